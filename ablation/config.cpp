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
#include "json_fields.hpp"

namespace tlb {
namespace {

using json = nlohmann::json;

constexpr int64_t kMaxDim = std::numeric_limits<int32_t>::max();  // kernels index with int
// The plan, the policy string and the run all go layer by layer; the largest models have ~100
// layers, and a bound keeps `tlbench plan` fast for every shape it accepts.
constexpr int64_t kMaxLayers = 4096;

bool has_control_chars(const std::string& s) {
  return std::any_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

using json_fields::check_keys;
using json_fields::describe;
using json_fields::fail;
using json_fields::get_integer;
using json_fields::get_string;
using json_fields::index_path;
using json_fields::json_quoted;
using json_fields::key_path;
using json_fields::parse_document;
using json_fields::require_keys;

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
  s.layers = get_integer(c["layers"], 1, kMaxLayers, "a positive integer", source, field("layers"));
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
    // Kernels take eps as a float: a double beyond FLT_MAX would become inf there.
    if (!(eps > 0) || !std::isfinite(static_cast<float>(eps)) || !(static_cast<float>(eps) > 0.0f))
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

CaseSet load_cases(const std::string& path) { return parse_cases(json_fields::read_input_file(path), path); }

TechniqueSet load_techniques(const std::string& path) {
  return parse_techniques(json_fields::read_input_file(path), path);
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
