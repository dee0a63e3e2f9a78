// cases.json / techniques.json: parse, validate everything, and turn every problem into one
// line "<file>: <json path>: <problem>" that says what to fix. Validation stops at the first
// problem so the message is never a cascade of consequences.
#include "config.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "config_bits.hpp"

namespace tlb {
namespace {

using json = nlohmann::json;

constexpr int64_t kMaxDim = std::numeric_limits<int32_t>::max();  // kernels index with int

[[noreturn]] void fail(const std::string& source, const std::string& path,
                       const std::string& problem) {
  throw ConfigError(source + ": " + path + ": " + problem);
}

bool is_identifier(const std::string& k) {
  if (k.empty() || !(std::isalpha(static_cast<unsigned char>(k[0])) || k[0] == '_')) return false;
  return std::all_of(k.begin(), k.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// JSON string literal of `s` with control characters escaped, so a message stays one line.
std::string json_quoted(const std::string& s) {
  try {
    return json(s).dump();
  } catch (const json::exception&) {
    return "\"<not UTF-8>\"";
  }
}

std::string key_path(const std::string& parent, const std::string& key) {
  return is_identifier(key) ? parent + "." + key : parent + "[" + json_quoted(key) + "]";
}

std::string index_path(const std::string& parent, size_t i) {
  return parent + "[" + std::to_string(i) + "]";
}

// "string \"128\"", "number 12.5", "an array", ... for "expected X, got Y".
std::string describe(const json& v) {
  std::string text;
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return std::string("boolean ") + (v.get<bool>() ? "true" : "false");
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: text = "string " + json_quoted(v.get<std::string>()); break;
    case json::value_t::number_float: text = "number " + v.dump(); break;
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: text = "integer " + v.dump(); break;
    default: return "a value of unknown type";
  }
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

// Rejects keys outside `allowed`, suggesting the nearest allowed key for a likely typo.
void check_keys(const json& obj, const std::vector<std::string>& allowed,
                const std::string& source, const std::string& path) {
  for (const auto& [k, v] : obj.items()) {
    if (std::find(allowed.begin(), allowed.end(), k) != allowed.end()) continue;
    std::string best;
    size_t best_d = 3;
    for (const auto& a : allowed) {
      const size_t d = edit_distance(k, a);
      if (d < best_d) best_d = d, best = a;
    }
    std::string problem = "unknown key";
    if (!best.empty()) problem += " (did you mean " + json_quoted(best) + "?)";
    problem += "; allowed keys: " + join(allowed, ", ");
    fail(source, key_path(path, k), problem);
  }
}

void require_keys(const json& obj, const std::vector<std::string>& required,
                  const std::string& source, const std::string& path) {
  for (const auto& k : required)
    if (!obj.contains(k)) fail(source, path, "missing required field " + json_quoted(k));
}

std::string fmt_range_error(const std::string& what, const std::string& value, int64_t hi) {
  return "expected " + what + " of at most " + std::to_string(hi) + ", got " + value;
}

// An integer in [lo, hi]; floats (even 12.0), strings and booleans are type errors.
int64_t get_integer(const json& v, int64_t lo, int64_t hi, const std::string& what,
                    const std::string& source, const std::string& path) {
  if (v.is_number_float())
    fail(source, path, "expected " + what + ", got " + describe(v) + " (not an integer)");
  if (!v.is_number_integer()) fail(source, path, "expected " + what + ", got " + describe(v));
  int64_t x = 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) fail(source, path, fmt_range_error(what, v.dump(), hi));
    x = static_cast<int64_t>(u);
  } else {
    x = v.get<int64_t>();
  }
  if (x < lo) fail(source, path, "expected " + what + ", got " + std::to_string(x));
  if (x > hi) fail(source, path, fmt_range_error(what, v.dump(), hi));
  return x;
}

const std::string& get_string(const json& v, const std::string& what, const std::string& source,
                              const std::string& path) {
  if (!v.is_string()) fail(source, path, "expected " + what + ", got " + describe(v));
  return v.get_ref<const std::string&>();
}

bool has_control_chars(const std::string& s) {
  return std::any_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

// Parses with line/column on malformed input, and rejects duplicate object keys (the JSON
// parser would silently keep the last one, hiding a typo such as two "heads").
json parse_document(std::string_view text, const std::string& source) {
  struct Frame {
    bool is_array = false;
    size_t index = 0;
    std::string key;
    std::set<std::string> keys;
    std::string path;
  };
  std::vector<Frame> stack;
  auto child_path = [&]() -> std::string {
    if (stack.empty()) return "$";
    const Frame& f = stack.back();
    return f.is_array ? index_path(f.path, f.index) : key_path(f.path, f.key);
  };
  auto value_done = [&]() {
    if (!stack.empty() && stack.back().is_array) ++stack.back().index;
  };
  json::parser_callback_t on_event = [&](int, json::parse_event_t ev, json& parsed) {
    switch (ev) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start: {
        Frame f;
        f.is_array = ev == json::parse_event_t::array_start;
        f.path = child_path();
        stack.push_back(std::move(f));
        break;
      }
      case json::parse_event_t::key: {
        Frame& f = stack.back();
        f.key = parsed.get<std::string>();
        if (!f.keys.insert(f.key).second)
          fail(source, key_path(f.path, f.key), "duplicate key (each key may appear once)");
        break;
      }
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        stack.pop_back();
        value_done();
        break;
      case json::parse_event_t::value: value_done(); break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), on_event);
  } catch (const json::parse_error& e) {
    // e.byte counts the characters read, so the offending one is at e.byte - 1.
    const size_t at = std::min(e.byte == 0 ? size_t{0} : e.byte - 1, text.size());
    size_t line = 1, line_start = 0;
    for (size_t i = 0; i < at; ++i)
      if (text[i] == '\n') ++line, line_start = i + 1;
    const size_t column = at - line_start + 1;
    std::string why = e.what();
    const size_t col_pos = why.find("column ");
    const size_t colon = col_pos == std::string::npos ? why.find("] ") : why.find(": ", col_pos);
    if (colon != std::string::npos) why = why.substr(colon + 2);
    if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) why = "the file is empty";
    throw ConfigError(source + ": line " + std::to_string(line) + ", column " +
                      std::to_string(column) + ": malformed JSON: " + why);
  }
}


const std::vector<std::string> kCaseKeys = {"id",     "name",      "batch",      "seq",
                                            "d_model", "heads",    "d_ff",       "layers",
                                            "mask",   "valid_lens", "activation", "eps",
                                            "policy", "dtypes",    "seed"};
const std::vector<std::string> kRequiredCaseKeys = {"id",    "name", "batch",  "seq", "d_model",
                                                    "heads", "d_ff", "layers", "mask"};

// The parts of a case, each checked where it is read (parse_case runs them in order).
void parse_case_shape(const json& c, const std::string& source, const std::string& path, CaseSpec& spec) {
  auto field = [&](const char* k) { return key_path(path, k); };
  LayerShape& s = spec.shape;
  spec.id = static_cast<int>(get_integer(c["id"], 1, kMaxDim, "a positive integer id", source,
                                         field("id")));
  spec.name = get_string(c["name"], "a name string", source, field("name"));
  if (spec.name.empty()) fail(source, field("name"), "is empty");
  if (has_control_chars(spec.name))
    fail(source, field("name"), "contains control characters: " + json_quoted(spec.name));

  auto dim = [&](const char* k) {
    return get_integer(c[k], 1, kMaxDim, "a positive integer", source, field(k));
  };
  s.batch = dim("batch");
  s.seq = dim("seq");
  s.d_model = dim("d_model");
  s.heads = dim("heads");
  s.d_ff = dim("d_ff");
  s.layers = dim("layers");
  // 16-byte vector accesses of fp16/bf16 rows need 8-element multiples.
  if (s.d_model % 8 != 0)
    fail(source, field("d_model"), std::to_string(s.d_model) + " is not a multiple of 8");
  if (s.d_ff % 8 != 0)
    fail(source, field("d_ff"), std::to_string(s.d_ff) + " is not a multiple of 8");
  if (s.d_model % s.heads != 0)
    fail(source, field("heads"), std::to_string(s.heads) + " does not divide d_model " +
                                     std::to_string(s.d_model));

  // Byte counts are 64-bit; a shape whose buffers cannot even be counted is not a shape.
  const double B = static_cast<double>(s.batch), S = static_cast<double>(s.seq);
  const double d = static_cast<double>(s.d_model), f = static_cast<double>(s.d_ff);
  const double largest = std::max({B * static_cast<double>(s.heads) * S * S * 4.0,
                                   B * S * std::max(3 * d, f) * 4.0,
                                   static_cast<double>(s.layers) * (4 * d * d + 2 * d * f) * 4.0});
  if (largest >= 0x1p62) {
    char bytes[32];
    std::snprintf(bytes, sizeof bytes, "%.3g", largest);
    fail(source, path, std::string("shape too large: one of its buffers would need ") + bytes +
                           " bytes, beyond 64-bit byte counts");
  }

}

void parse_case_mask(const json& c, const std::string& source, const std::string& path, CaseSpec& spec) {
  auto field = [&](const char* k) { return key_path(path, k); };
  LayerShape& s = spec.shape;
  const std::string& mask = get_string(c["mask"], "a mask name", source, field("mask"));
  if (!parse_mask(mask, s.mask))
    fail(source, field("mask"), "unknown mask " + json_quoted(mask) + " (expected none, causal or padding)");

  if (c.contains("valid_lens")) {
    const json& v = c["valid_lens"];
    const std::string vp = field("valid_lens");
    if (s.mask != MaskKind::padding)
      fail(source, vp, "only allowed with mask \"padding\" (this case's mask is " + json_quoted(mask) + ")");
    if (!v.is_array()) fail(source, vp, "expected an array of integers, got " + describe(v));
    if (static_cast<int64_t>(v.size()) != s.batch)
      fail(source, vp, "has " + std::to_string(v.size()) + " entries; batch is " +
                           std::to_string(s.batch) + " (one valid length per batch element)");
    for (size_t i = 0; i < v.size(); ++i) {
      const std::string ip = index_path(vp, i);
      if (!v[i].is_number_integer())
        fail(source, ip, "expected an integer valid length, got " + describe(v[i]));
      const bool neg = v[i].is_number_integer() && !v[i].is_number_unsigned() && v[i].get<int64_t>() < 0;
      const uint64_t len = neg ? 0 : v[i].get<uint64_t>();
      if (neg || len < 1 || len > static_cast<uint64_t>(s.seq))
        fail(source, ip, v[i].dump() + " is outside 1.." + std::to_string(s.seq) + " (seq)");
      s.valid_lens.push_back(static_cast<int>(len));
    }
  } else if (s.mask == MaskKind::padding) {
    fail(source, path, "mask \"padding\" needs \"valid_lens\" (one valid length per batch element)");
  }

}

void parse_case_math(const json& c, const std::string& source, const std::string& path, CaseSpec& spec) {
  auto field = [&](const char* k) { return key_path(path, k); };
  LayerShape& s = spec.shape;
  if (c.contains("activation")) {
    const std::string& a = get_string(c["activation"], "an activation name", source, field("activation"));
    if (!parse_activation(a, s.activation))
      fail(source, field("activation"),
           "unknown activation " + json_quoted(a) + " (expected gelu, gelu_tanh or relu)");
  }

  if (c.contains("eps")) {
    const json& e = c["eps"];
    if (!e.is_number()) fail(source, field("eps"), "expected a positive number, got " + describe(e));
    const double eps = e.get<double>();
    if (!(eps > 0) || !std::isfinite(eps) || !(static_cast<float>(eps) > 0.0f))
      fail(source, field("eps"), "expected a positive number, got " + e.dump());
    s.eps = static_cast<float>(eps);
  }

}

void parse_case_policy(const json& c, const std::string& source, const std::string& path, CaseSpec& spec) {
  auto field = [&](const char* k) { return key_path(path, k); };
  const LayerShape& s = spec.shape;
  spec.policy = std::string(static_cast<size_t>(s.layers), 'F');
  if (c.contains("policy")) {
    const std::string& p = get_string(c["policy"], "a policy string", source, field("policy"));
    if (p != "auto") {
      if (static_cast<int64_t>(p.size()) != s.layers)
        fail(source, field("policy"),
             json_quoted(p) + " has " + std::to_string(p.size()) + " letters; layers is " +
                 std::to_string(s.layers) + " (one E or F per layer, or \"auto\")");
      for (size_t i = 0; i < p.size(); ++i)
        if (p[i] != 'E' && p[i] != 'F')
          fail(source, field("policy"),
               json_quoted(p) + ": letter " + std::to_string(i + 1) + " is " +
                   json_quoted(std::string(1, p[i])) + ", not E or F (or use \"auto\")");
    }
    spec.policy = p;
  }

}

void parse_case_dtypes(const json& c, const std::string& source, const std::string& path, CaseSpec& spec) {
  auto field = [&](const char* k) { return key_path(path, k); };
  if (c.contains("dtypes")) {
    const json& v = c["dtypes"];
    const std::string vp = field("dtypes");
    if (!v.is_array()) fail(source, vp, "expected an array of dtype names, got " + describe(v));
    if (v.empty()) fail(source, vp, "is empty; name at least one of fp16, bf16, fp32");
    for (size_t i = 0; i < v.size(); ++i) {
      const std::string& n = get_string(v[i], "a dtype name", source, index_path(vp, i));
      DType dt;
      if (!parse_dtype(n, dt))
        fail(source, index_path(vp, i), "unknown dtype " + json_quoted(n) + " (expected fp16, bf16 or fp32)");
      if (std::find(spec.dtypes.begin(), spec.dtypes.end(), dt) != spec.dtypes.end())
        fail(source, index_path(vp, i), "duplicate dtype " + json_quoted(n));
      spec.dtypes.push_back(dt);
    }
  } else {
    spec.dtypes = {DType::fp16, DType::bf16, DType::fp32};
  }

}

void parse_case_seed(const json& c, const std::string& source, const std::string& path, CaseSpec& spec) {
  auto field = [&](const char* k) { return key_path(path, k); };
  if (c.contains("seed")) {
    const json& v = c["seed"];
    const std::string sp = field("seed");
    if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0))
      fail(source, sp, "expected a non-negative integer, got " + describe(v));
    spec.seed = v.get<uint64_t>();
  }
}

CaseSpec parse_case(const json& c, const std::string& source, const std::string& path) {
  if (!c.is_object()) fail(source, path, "expected a case object, got " + describe(c));
  check_keys(c, kCaseKeys, source, path);
  require_keys(c, kRequiredCaseKeys, source, path);
  CaseSpec spec;
  parse_case_shape(c, source, path, spec);
  parse_case_mask(c, source, path, spec);
  parse_case_math(c, source, path, spec);
  parse_case_policy(c, source, path, spec);
  parse_case_dtypes(c, source, path, spec);
  parse_case_seed(c, source, path, spec);
  return spec;
}

const std::vector<std::string> kTechniqueKeys = {"name", "description"};

}  // namespace

std::string read_config_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ConfigError(path + ": cannot read: is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path + ": cannot read: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw ConfigError(path + ": cannot read: " + std::strerror(errno));
  return ss.str();
}

CaseSet parse_cases(std::string_view text, const std::string& source) {
  const json doc = parse_document(text, source);
  if (!doc.is_object())
    fail(source, "$", "expected an object {\"cases\": [...]}, got " + describe(doc));
  check_keys(doc, {"cases"}, source, "$");
  require_keys(doc, {"cases"}, source, "$");
  const json& arr = doc["cases"];
  if (!arr.is_array()) fail(source, "$.cases", "expected an array of case objects, got " + describe(arr));
  if (arr.empty()) fail(source, "$.cases", "is empty; at least one case is needed");

  CaseSet set;
  set.source = source;
  std::map<int, size_t> id_at;
  std::map<std::string, size_t> name_at;
  for (size_t i = 0; i < arr.size(); ++i) {
    const std::string path = index_path("$.cases", i);
    CaseSpec c = parse_case(arr[i], source, path);
    if (auto [it, fresh] = id_at.emplace(c.id, i); !fresh)
      fail(source, path + ".id",
           "duplicate id " + std::to_string(c.id) + " (also at " + index_path("$.cases", it->second) + ")");
    if (auto [it, fresh] = name_at.emplace(c.name, i); !fresh)
      fail(source, path + ".name",
           "duplicate name " + json_quoted(c.name) + " (also at " + index_path("$.cases", it->second) + ")");
    set.cases.push_back(std::move(c));
  }
  return set;
}

TechniqueSet parse_techniques(std::string_view text, const std::string& source) {
  const json doc = parse_document(text, source);
  if (!doc.is_object())
    fail(source, "$", "expected an object {\"techniques\": [...]}, got " + describe(doc));
  check_keys(doc, {"techniques"}, source, "$");
  require_keys(doc, {"techniques"}, source, "$");
  const json& arr = doc["techniques"];
  if (!arr.is_array())
    fail(source, "$.techniques", "expected an array of technique objects, got " + describe(arr));
  if (arr.empty()) fail(source, "$.techniques", "is empty; at least one technique is needed");

  TechniqueSet set;
  set.source = source;
  std::map<std::string, size_t> name_at;
  for (size_t i = 0; i < arr.size(); ++i) {
    const std::string path = index_path("$.techniques", i);
    const json& t = arr[i];
    if (!t.is_object()) fail(source, path, "expected a technique object, got " + describe(t));
    check_keys(t, kTechniqueKeys, source, path);
    require_keys(t, kTechniqueKeys, source, path);
    Technique tech;
    tech.name = get_string(t["name"], "a technique name", source, path + ".name");
    if (!parse_stage(tech.name, tech.stage))
      fail(source, path + ".name",
           "unknown technique " + json_quoted(tech.name) + " (expected one of qkv, attn, ffn, norm, graph)");
    if (auto [it, fresh] = name_at.emplace(tech.name, i); !fresh)
      fail(source, path + ".name",
           "duplicate technique " + json_quoted(tech.name) + " (also at " +
               index_path("$.techniques", it->second) + ")");
    tech.description = get_string(t["description"], "a one-line description", source,
                                  path + ".description");
    if (tech.description.find_first_not_of(" \t") == std::string::npos)
      fail(source, path + ".description", "is empty; say in one line what the technique does");
    if (has_control_chars(tech.description))
      fail(source, path + ".description", "must be one line (contains control characters)");
    set.items.push_back(std::move(tech));
  }
  return set;
}

std::string layer_policy(const CaseSpec& c) {
  if (c.policy == "auto") return std::string(static_cast<size_t>(c.shape.layers), 'F');
  return c.policy;
}

CaseSet load_cases(const std::string& path) { return parse_cases(read_config_file(path), path); }

TechniqueSet load_techniques(const std::string& path) {
  return parse_techniques(read_config_file(path), path);
}

TechniqueSet default_techniques() {
  TechniqueSet set;
  set.source = "built-in defaults";
  const std::pair<Stage, const char*> items[] = {
      {Stage::qkv, "one hand-written tensor-core GEMM over the packed [3d, d] weight with bias and "
                   "head split in its epilogue"},
      {Stage::attn, "hand-written flash-style attention: tiled online softmax on tensor cores, mask "
                    "in the tile, no seq x seq buffer"},
      {Stage::ffn, "hand-written tensor-core GEMMs with fused epilogues: bias+GELU on the up "
                   "projection, bias+residual on the down projection"},
      {Stage::norm, "fused residual add + bias + LayerNorm in one vectorised pass per row with fp32 "
                    "statistics"},
      {Stage::graph, "the whole stack captured once as a CUDA Graph and replayed"},
  };
  for (const auto& [stage, desc] : items)
    set.items.push_back(Technique{std::string(to_string(stage)), desc, stage});
  return set;
}

std::string TechniqueSet::bits(uint32_t config) const { return config_bits(config, size()); }

StageSwitch TechniqueSet::stages(uint32_t config) const {
  StageSwitch sw;
  const int n = size();
  for (int i = 0; i < n; ++i)
    if (config & (1u << (n - 1 - i))) sw[items[static_cast<size_t>(i)].stage] = true;
  return sw;
}

std::string TechniqueSet::names(uint32_t config) const {
  std::vector<std::string> names;
  for (const Technique& t : items) names.push_back(t.name);
  return config_names(config, names);
}

}  // namespace tlb
