// The dispatch table as a file: written as JSON (format version 1) and read back with every
// problem named by its JSON path; the built-in table is configs/dispatch.json compiled in.
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include "config.hpp"
#include "config_bits.hpp"
#include "dispatch_table.hpp"
#include "json_fields.hpp"
#include "output_files.hpp"
#include "point_row.hpp"  // kHalfMath

namespace tlb {

namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

constexpr int kFormatVersion = 1;

constexpr const char* kComment =
    "Dispatch table of `tlbench run --policy auto`: per dtype, math and shape, the fastest "
    "configuration (by forward time) that passed the golden check (ties within noise go to one "
    "that also passes strict). Made by `tlbench dispatch --results DIR [--results DIR ...] -o FILE`.";

using json_fields::fail;
using json_fields::key_path;

std::string shown(const json& v) {
  std::string s = v.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

void check_keys(const json& o, std::initializer_list<const char*> allowed,
                const std::string& origin, const std::string& path) {
  for (const auto& [k, v] : o.items()) {
    if (!k.empty() && k[0] == '$') continue;  // comments
    if (std::find_if(allowed.begin(), allowed.end(), [&](const char* a) { return k == a; }) !=
        allowed.end())
      continue;
    std::string list;
    for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
    fail(origin, path + "." + k, "unknown key; allowed keys: " + list);
  }
}

const json& need(const json& o, const char* key, const std::string& origin,
                 const std::string& path) {
  auto it = o.find(key);
  if (it == o.end()) fail(origin, path, fmt::format("missing required field \"{}\"", key));
  return *it;
}

std::string need_string(const json& o, const char* key, const std::string& origin,
                        const std::string& path) {
  const json& v = need(o, key, origin, path);
  if (!v.is_string()) fail(origin, key_path(path, key), "expected a string, got " + shown(v));
  return v.get<std::string>();
}

std::string opt_string(const json& o, const char* key, const std::string& origin,
                       const std::string& path) {
  return o.contains(key) ? need_string(o, key, origin, path) : std::string();
}

int64_t need_positive(const json& o, const char* key, const std::string& origin,
                      const std::string& path) {
  const json& v = need(o, key, origin, path);
  if (!v.is_number_integer() || v.get<int64_t>() < 1 ||
      v.get<int64_t>() > std::numeric_limits<int32_t>::max())
    fail(origin, key_path(path, key), "expected a positive integer, got " + shown(v));
  return v.get<int64_t>();
}

std::optional<double> opt_number(const json& o, const char* key, const std::string& origin,
                                 const std::string& path) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) fail(origin, key_path(path, key), "expected a number or null, got " + shown(*it));
  return it->get<double>();
}

std::optional<bool> opt_bool(const json& o, const char* key, const std::string& origin,
                             const std::string& path) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) fail(origin, key_path(path, key), "expected true, false or null, got " + shown(*it));
  return it->get<bool>();
}

ordered_json opt_json(std::optional<double> v) {
  return v && std::isfinite(*v) ? ordered_json(*v) : ordered_json(nullptr);
}

ordered_json source_json(const DispatchSource& s) {
  return {{"results", s.results}, {"gpu", s.gpu}, {"git_commit", s.git_commit}, {"time", s.time}, {"quick", s.quick}};
}

}  // namespace

std::string dispatch_table_json(const DispatchTable& t) {
  // One source: "source", as every table of one folder reads. Several: "sources", and each
  // entry names its own by index.
  const bool several = t.sources.size() > 1;
  // One entry per line, so a regenerated table reads as a diff of choices.
  std::string text = "{\n";
  text += fmt::format("  \"$comment\": {},\n", ordered_json(kComment).dump());
  text += fmt::format("  \"format_version\": {},\n", kFormatVersion);
  if (several) {
    text += "  \"sources\": [";
    for (size_t i = 0; i < t.sources.size(); ++i) text += (i ? ",\n    " : "\n    ") + source_json(t.sources[i]).dump();
    text += "\n  ],\n";
  } else {
    text += fmt::format("  \"source\": {},\n", source_json(t.sources.empty() ? DispatchSource{} : t.sources[0]).dump());
  }
  text += fmt::format("  \"techniques\": {},\n", ordered_json(t.techniques).dump());
  text += "  \"entries\": [";
  for (size_t i = 0; i < t.entries.size(); ++i) {
    const DispatchEntry& e = t.entries[i];
    ordered_json j = {
        {"dtype", e.dtype},
        {"math", e.math},
        {"case_id", e.case_id},
        {"case_name", e.case_name},
        {"batch", e.shape.batch},
        {"seq", e.shape.seq},
        {"d_model", e.shape.d_model},
        {"heads", e.shape.heads},
        {"d_ff", e.shape.d_ff},
        {"layers", e.shape.layers},
        {"mask", std::string(to_string(e.shape.mask))},
        {"config", e.config},
        {"config_names", e.config_names},
        {"speedup", e.speedup},
        {"cand_ms", opt_json(e.cand_ms)},
        {"golden_rel_l2", opt_json(e.golden_rel_l2)},
        {"strict_pass", e.strict_pass ? ordered_json(*e.strict_pass) : ordered_json(nullptr)},
        {"dispatch", e.dispatch}};
    if (several) j["source"] = e.source;
    text += (i ? ",\n    " : "\n    ") + j.dump();
  }
  text += t.entries.empty() ? "],\n" : "\n  ],\n";
  text += fmt::format("  \"notes\": {}\n}}\n", ordered_json(t.notes).dump());
  return text;
}

namespace {

DispatchSource parse_one_source(const json& src, const std::string& origin, const std::string& path) {
  if (!src.is_object()) fail(origin, path, "expected an object, got " + shown(src));
  check_keys(src, {"results", "gpu", "git_commit", "time", "quick"}, origin, path);
  DispatchSource s;
  s.results = opt_string(src, "results", origin, path);
  s.gpu = opt_string(src, "gpu", origin, path);
  s.git_commit = opt_string(src, "git_commit", origin, path);
  s.time = opt_string(src, "time", origin, path);
  s.quick = opt_bool(src, "quick", origin, path).value_or(false);
  return s;
}

// "source" (a table of one folder) or "sources" (a non-empty array, one per folder), not both.
void parse_source(const json& doc, const std::string& origin, DispatchTable& t) {
  if (doc.contains("source") && doc.contains("sources"))
    fail(origin, "$.sources", "a table has \"source\" or \"sources\", not both");
  if (!doc.contains("sources")) {
    t.sources.push_back(parse_one_source(need(doc, "source", origin, "$"), origin, "$.source"));
    return;
  }
  const json& list = doc["sources"];
  if (!list.is_array() || list.empty())
    fail(origin, "$.sources", "expected a non-empty array of source objects, got " + shown(list));
  for (size_t i = 0; i < list.size(); ++i)
    t.sources.push_back(parse_one_source(list[i], origin, fmt::format("$.sources[{}]", i)));

}

void parse_techniques(const json& doc, const std::string& origin, DispatchTable& t) {
  const json& techs = need(doc, "techniques", origin, "$");
  if (!techs.is_array() || techs.empty())
    fail(origin, "$.techniques", "expected a non-empty array of technique names, got " + shown(techs));
  for (size_t i = 0; i < techs.size(); ++i) {
    const std::string path = fmt::format("$.techniques[{}]", i);
    Stage st;
    if (!techs[i].is_string() || !parse_stage(techs[i].get<std::string>(), st))
      fail(origin, path, "expected one of \"qkv\", \"attn\", \"ffn\", \"norm\", \"graph\", got " +
                             shown(techs[i]));
    const std::string name = techs[i].get<std::string>();
    if (std::find(t.techniques.begin(), t.techniques.end(), name) != t.techniques.end())
      fail(origin, path, "duplicate technique \"" + name + "\"");
    t.techniques.push_back(name);
  }

}

// One entry of $.entries, checked field by field against the table's techniques.
DispatchEntry parse_entry(const json& o, const std::vector<std::string>& techniques, size_t sources,
                          const std::string& origin, const std::string& path) {
  if (!o.is_object()) fail(origin, path, "expected an entry object, got " + shown(o));
  check_keys(o,
             {"dtype", "math", "case_id", "case_name", "batch", "seq", "d_model", "heads", "d_ff",
              "layers", "mask", "config", "config_names", "speedup", "cand_ms", "golden_rel_l2",
              "strict_pass", "dispatch", "source"},
             origin, path);
  DispatchEntry e;
  e.dtype = need_string(o, "dtype", origin, path);
  DType dt;
  if (!parse_dtype(e.dtype, dt))
    fail(origin, path + ".dtype", "\"" + e.dtype + "\" is not fp16, bf16 or fp32");
  e.math = need_string(o, "math", origin, path);
  const bool math_ok = dt == DType::fp32 ? (e.math == "tf32" || e.math == "ieee") : e.math == kHalfMath;
  if (!math_ok)
    fail(origin, path + ".math",
         fmt::format("\"{}\" does not fit {} (expected {})", e.math, e.dtype,
                     dt == DType::fp32 ? "tf32 or ieee" : kHalfMath));
  e.case_id = static_cast<int>(need_positive(o, "case_id", origin, path));
  e.case_name = opt_string(o, "case_name", origin, path);
  e.shape.batch = need_positive(o, "batch", origin, path);
  e.shape.seq = need_positive(o, "seq", origin, path);
  e.shape.d_model = need_positive(o, "d_model", origin, path);
  e.shape.heads = need_positive(o, "heads", origin, path);
  e.shape.d_ff = need_positive(o, "d_ff", origin, path);
  e.shape.layers = need_positive(o, "layers", origin, path);
  if (e.shape.d_model % e.shape.heads != 0)
    fail(origin, path + ".heads",
         fmt::format("{} does not divide d_model {}", e.shape.heads, e.shape.d_model));
  const std::string mask = need_string(o, "mask", origin, path);
  if (!parse_mask(mask, e.shape.mask))
    fail(origin, path + ".mask", "\"" + mask + "\" is not none, causal or padding");
  e.config = need_string(o, "config", origin, path);
  if (e.config.size() != techniques.size() ||
      e.config.find_first_not_of("01") != std::string::npos)
    fail(origin, path + ".config",
         fmt::format("\"{}\" is not a bit string of {} (one 0 or 1 per technique of "
                     "$.techniques)", e.config, techniques.size()));
  e.config_names = config_names(e.config, techniques);
  const std::string names = opt_string(o, "config_names", origin, path);
  if (!names.empty() && names != e.config_names)
    fail(origin, path + ".config_names",
         fmt::format("\"{}\" does not match config {} (\"{}\")", names, e.config, e.config_names));
  const std::optional<double> speedup = opt_number(o, "speedup", origin, path);
  if (!speedup || !(*speedup > 0) || !std::isfinite(*speedup))
    fail(origin, path + ".speedup", "expected a positive number, got " +
                                        (o.contains("speedup") ? shown(o["speedup"]) : "nothing"));
  e.speedup = *speedup;
  e.cand_ms = opt_number(o, "cand_ms", origin, path);
  e.golden_rel_l2 = opt_number(o, "golden_rel_l2", origin, path);
  e.strict_pass = opt_bool(o, "strict_pass", origin, path);
  e.dispatch = opt_string(o, "dispatch", origin, path);
  if (o.contains("source")) {
    const json& src = o["source"];
    if (!src.is_number_integer() || src.get<int64_t>() < 0 || static_cast<size_t>(src.get<int64_t>()) >= sources)
      fail(origin, path + ".source",
           fmt::format("expected the index of one of the {} entries of $.sources, got {}", sources, shown(src)));
    e.source = static_cast<size_t>(src.get<int64_t>());
  }
  return e;
}

void parse_notes(const json& doc, const std::string& origin, DispatchTable& t) {
  if (doc.contains("notes")) {
    const json& notes = doc["notes"];
    if (!notes.is_array()) fail(origin, "$.notes", "expected an array of strings, got " + shown(notes));
    for (size_t i = 0; i < notes.size(); ++i) {
      if (!notes[i].is_string())
        fail(origin, fmt::format("$.notes[{}]", i), "expected a string, got " + shown(notes[i]));
      t.notes.push_back(notes[i].get<std::string>());
    }
  }
}

}  // namespace

DispatchTable parse_dispatch_table(std::string_view text, const std::string& origin) {
  const json doc = json_fields::parse_document(text, origin);
  if (!doc.is_object()) fail(origin, "$", "expected an object, got " + shown(doc));
  check_keys(doc, {"format_version", "source", "sources", "techniques", "entries", "notes"}, origin, "$");
  const json& version = need(doc, "format_version", origin, "$");
  if (!version.is_number_integer() || version.get<int64_t>() != kFormatVersion)
    fail(origin, "$.format_version",
         fmt::format("expected {}, got {} (a table from another version of tlbench; rebuild it "
                     "with tlbench dispatch)", kFormatVersion, shown(version)));

  DispatchTable t;
  t.origin = origin;
  parse_source(doc, origin, t);
  parse_techniques(doc, origin, t);
  const json& entries = need(doc, "entries", origin, "$");
  if (!entries.is_array()) fail(origin, "$.entries", "expected an array, got " + shown(entries));
  for (size_t i = 0; i < entries.size(); ++i)
    t.entries.push_back(
        parse_entry(entries[i], t.techniques, t.sources.size(), origin, fmt::format("$.entries[{}]", i)));
  parse_notes(doc, origin, t);
  return t;
}

DispatchTable load_dispatch_table(const std::string& path) {
  return parse_dispatch_table(json_fields::read_input_file(path), path);
}

void write_dispatch_table(const DispatchTable& t, const std::string& path) {
  try {
    write_file_atomic(path, dispatch_table_json(t));
  } catch (const std::runtime_error& e) {
    throw ConfigError(e.what());
  }
}

const DispatchTable& builtin_dispatch_table() {
  static const DispatchTable table =
      parse_dispatch_table(builtin_dispatch_table_text(), kBuiltinDispatchOrigin);
  return table;
}

DispatchTable dispatch_table_for(const std::string& path) {
  return path.empty() ? builtin_dispatch_table() : load_dispatch_table(path);
}

}  // namespace tlb
