// Reading fields of a JSON document with the place of every problem in its message: each
// failure is a ConfigError "<source>: <JSON path>: <problem>", where the path starts at the
// document's root "$" ("$.cases[2].heads", "$.overrides[0].configs"). Config files, gate
// thresholds, dispatch tables and run.json are all read through it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace tlb::json_fields {

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

// Parses with line and column on malformed input, and rejects duplicate object keys (the JSON
// parser would silently keep the last one, hiding a typo such as two "heads").
nlohmann::json parse_document(std::string_view text, const std::string& source);

}  // namespace tlb::json_fields
