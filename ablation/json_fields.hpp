// Reading JSON input with the place of every problem in its message: each failure is a
// ConfigError "<source>: <JSON path>: <problem>", where the path starts at the document's root
// "$" ("$.cases[2].heads", "$.overrides[0].configs"), or "<source>: line L, column C: <problem>"
// for the text itself. Every JSON file the tool reads (cases, techniques, gate thresholds,
// dispatch tables, run.json, points.jsonl) comes in through read_input_file and parse_document
// or parse_line, so each is bounded the same way: its size is checked before it is read and its
// nesting before it is parsed, duplicate keys and numbers beyond a double are refused.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace tlb::json_fields {

// No file the tool writes comes near these; they bound what reading a hostile or broken file
// can cost (a deeply nested file would otherwise take memory quadratic in its depth).
inline constexpr size_t kMaxDocumentBytes = size_t{16} << 20;  // a config, table or run.json
inline constexpr size_t kMaxPointsBytes = size_t{256} << 20;  // points.jsonl (a full run: ~2 MB)
inline constexpr size_t kMaxDepth = 32;                        // our files nest 4 deep at most

[[noreturn]] void fail(const std::string& source, const std::string& path,
                       const std::string& problem);

// "$.cases" + "heads" -> "$.cases.heads"; a key that is no identifier as ["a key"].
std::string key_path(const std::string& parent, const std::string& key);
// "$.cases" + 2 -> "$.cases[2]".
std::string index_path(const std::string& parent, size_t i);
// A JSON string literal of s with control characters escaped, so a message stays one line.
std::string json_quoted(const std::string& s);
// "string \"128\"", "number 12.5", "an array", ... for "expected X, got Y".
std::string describe(const nlohmann::json& v);

// Rejects keys outside `allowed`, suggesting the nearest allowed key for a likely typo.
void check_keys(const nlohmann::json& obj, const std::vector<std::string>& allowed,
                const std::string& source, const std::string& path);
// "missing required field \"<key>\"" at `path` for the first of `required` that is absent.
void require_keys(const nlohmann::json& obj, const std::vector<std::string>& required,
                  const std::string& source, const std::string& path);
// An integer in [lo, hi]; floats (even 12.0), strings and booleans are type errors. `what`
// says what was expected ("a positive integer").
int64_t get_integer(const nlohmann::json& v, int64_t lo, int64_t hi, const std::string& what,
                    const std::string& source, const std::string& path);
const std::string& get_string(const nlohmann::json& v, const std::string& what,
                              const std::string& source, const std::string& path);

// The whole of the file `path`; ConfigError "<path>: cannot read: <why>" when it is missing, not
// a regular file (a FIFO would block, a folder reads as nothing) or larger than max_bytes, all
// found before a byte is read.
std::string read_input_file(const std::string& path, size_t max_bytes = kMaxDocumentBytes);

// Parses with line and column on malformed input. Refused before parsing: more than
// kMaxDocumentBytes, nesting deeper than kMaxDepth. Refused while parsing: a duplicate object
// key (the JSON parser would silently keep the last one, hiding a typo such as two "heads") and
// a number no double holds (1e999 would become inf).
nlohmann::json parse_document(std::string_view text, const std::string& source);
// One line of a JSON-lines file, the same checks; errors read "<file>:<line>: column C: ..." and
// "<file>:<line>: $.path: ...".
nlohmann::json parse_line(std::string_view text, const std::string& file, int line);

}  // namespace tlb::json_fields
