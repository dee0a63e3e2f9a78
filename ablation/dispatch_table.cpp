#include "dispatch_table.hpp"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <tuple>

#include "config.hpp"
#include "config_bits.hpp"
#include "json_fields.hpp"
#include "writers.hpp"

namespace tlb {

namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;
using results::Point;

constexpr int kFormatVersion = 1;
constexpr const char* kHalfMath = "fp32-acc";

constexpr const char* kComment =
    "Dispatch table of `tlbench run --policy auto`: per dtype, math and shape, the fastest "
    "configuration (by forward time) that passed the golden check (ties within noise go to one "
    "that also passes strict). Made by `tlbench dispatch --results DIR -o FILE`.";

using json_fields::fail;
using json_fields::key_path;

std::string shown(const json& v) {
  std::string s = v.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

std::string math_of(DType d, Fp32Math m) {
  return d == DType::fp32 ? std::string(to_string(m)) : std::string(kHalfMath);
}

// ---------------------------------------------------------------- building

// The interval of a point's speedup: its confidence interval, else +- the half-width the
// reader derives from the spreads.
double low_of(const Point& p) {
  if (p.speedup_ci_low && std::isfinite(*p.speedup_ci_low)) return *p.speedup_ci_low;
  return *p.speedup - p.halfwidth();
}
double high_of(const Point& p) {
  if (p.speedup_ci_high && std::isfinite(*p.speedup_ci_high)) return *p.speedup_ci_high;
  return *p.speedup + p.halfwidth();
}

// Neither is distinguishable from the other: each median lies inside the other's interval.
bool within_noise(const Point& a, const Point& b) {
  return *a.speedup >= low_of(b) && *a.speedup <= high_of(b) && *b.speedup >= low_of(a) &&
         *b.speedup <= high_of(a);
}

// Rows of one (case, dtype) share their baseline path, so the dispatcher ranks them by their
// own forward time where every candidate has one: a speedup also carries its point's own
// measurement of the baseline, whose noise (large where the eager reference is launch-bound)
// says nothing about the configuration. Without times, by speedup.
bool has_time(const Point& p) { return p.cand_ms && *p.cand_ms > 0; }
double spread_of(const Point& p) { return p.cand_spread_ms.value_or(0.0); }
bool time_ties(const Point& a, const Point& b) {
  return std::fabs(*a.cand_ms - *b.cand_ms) <= spread_of(a) + spread_of(b);
}
bool faster(const Point& a, const Point& b, bool by_time) {
  return by_time ? *a.cand_ms < *b.cand_ms : *a.speedup > *b.speedup;
}

// The tie-break among rows within noise of the fastest: strict first, then speed; the bit
// string last, so the choice never depends on file order.
bool preferred(const Point& a, const Point& b, bool by_time) {
  const bool sa = a.strict_pass == true, sb = b.strict_pass == true;
  if (sa != sb) return sa;
  if (faster(a, b, by_time)) return true;
  if (faster(b, a, by_time)) return false;
  return a.config < b.config;
}

const json* run_case(const json& run, int case_id) {
  auto it = run.find("cases");
  if (it == run.end() || !it->is_array()) return nullptr;
  for (const json& c : *it)
    if (c.is_object() && c.value("id", -1) == case_id) return &c;
  return nullptr;
}

// The shape of a point's case: from the row, else from run.json's copy of the case.
DispatchShape shape_of(const Point& p, const results::Results& r) {
  DispatchShape s;
  std::string mask = p.mask;
  if (p.batch && p.seq && p.d_model && p.heads && p.d_ff && p.layers && !mask.empty()) {
    s.batch = *p.batch, s.seq = *p.seq, s.d_model = *p.d_model, s.heads = *p.heads;
    s.d_ff = *p.d_ff, s.layers = *p.layers;
  } else {
    const json* c = run_case(r.run, p.case_id);
    const char* keys[] = {"batch", "seq", "d_model", "heads", "d_ff", "layers"};
    int64_t* dims[] = {&s.batch, &s.seq, &s.d_model, &s.heads, &s.d_ff, &s.layers};
    bool ok = c != nullptr && c->contains("mask") && (*c)["mask"].is_string();
    for (int i = 0; ok && i < 6; ++i) {
      ok = c->contains(keys[i]) && (*c)[keys[i]].is_number_integer();
      if (ok) *dims[i] = (*c)[keys[i]].get<int64_t>();
    }
    if (!ok)
      throw ConfigError(fmt::format(
          "{}/points.jsonl:{}: case {}: the row has no shape (batch, seq, d_model, heads, d_ff, "
          "layers, mask) and run.json has no such case",
          r.dir, p.line, p.case_id));
    mask = (*c)["mask"].get<std::string>();
  }
  if (!parse_mask(mask, s.mask))
    throw ConfigError(fmt::format("{}/points.jsonl:{}: \"mask\": \"{}\" is not none, causal or padding",
                                  r.dir, p.line, mask));
  return s;
}

DispatchSource source_of(const results::Results& r) {
  DispatchSource s;
  s.results = r.dir;
  s.gpu = r.device_name();
  const json& run = r.run;
  if (auto t = run.find("tool"); t != run.end() && t->is_object())
    s.git_commit = t->value("git_commit", "");
  if (auto c = run.find("git_commit"); s.git_commit.empty() && c != run.end() && c->is_string())
    s.git_commit = c->get<std::string>();
  for (const char* key : {"end_time", "updated_time", "start_time"})
    if (auto it = run.find(key); it != run.end() && it->is_string()) {
      s.time = it->get<std::string>();
      break;
    }
  if (auto o = run.find("options"); o != run.end() && o->is_object())
    s.quick = o->value("quick", false);
  return s;
}

// ---------------------------------------------------------------- JSON

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

StageSwitch stages_of(const std::string& bits, const std::vector<std::string>& techniques) {
  StageSwitch sw;
  for (size_t i = 0; i < bits.size() && i < techniques.size(); ++i) {
    Stage st;
    if (bits[i] == '1' && parse_stage(techniques[i], st)) sw[st] = true;
  }
  return sw;
}

}  // namespace

std::string dispatch_provenance(const DispatchTable& t) {
  std::string s;
  for (const std::string& part : {t.source.gpu, t.source.git_commit, t.source.time})
    if (!part.empty()) s += (s.empty() ? "" : ", ") + part;
  if (t.source.quick) s += (s.empty() ? "" : ", ") + std::string("quick");
  const std::string origin = t.origin == kBuiltinDispatchOrigin ? "the " + t.origin : t.origin;
  return s.empty() ? origin : fmt::format("{} ({})", origin, s);
}

DispatchShape dispatch_shape(const LayerShape& s) {
  return {s.batch, s.seq, s.d_model, s.heads, s.d_ff, s.layers, s.mask};
}

namespace {

// The table tells the runner which stages to switch on, so every technique must be a stage.
void check_techniques_are_stages(const results::Results& r) {
  if (r.techniques.empty())
    throw ConfigError(r.dir + ": no points and no technique names in run.json: nothing to build a "
                              "dispatch table from");
  for (size_t i = 0; i < r.techniques.size(); ++i) {
    Stage st;
    if (!parse_stage(r.techniques[i], st))
      throw ConfigError(fmt::format(
          "{}: technique {} is \"{}\" ({}), not one of qkv, attn, ffn, norm, graph: the table "
          "could not tell the runner what to switch on",
          r.dir, i + 1, r.techniques[i], r.techniques_source));
  }
}

// One (dtype, math, case) of the results: its rows that may be picked, and how many it had.
struct CandidateGroup {
  std::string dtype, math, case_name;
  int case_id = 0;
  std::vector<const Point*> passing;  // measured and passing golden
  int rows = 0, measured = 0;
};

// Keyed so that the entries come out fp16, bf16, fp32 (tf32 before ieee), then by case id.
using GroupKey = std::tuple<int, std::string, int>;

std::map<GroupKey, CandidateGroup> candidate_groups(const results::Results& r) {
  std::map<GroupKey, CandidateGroup> groups;
  auto dtype_rank = [](const std::string& d) { return d == "fp16" ? 0 : d == "bf16" ? 1 : 2; };
  for (const Point& p : r.points) {
    if (p.is_aa() || p.is_auto()) continue;
    std::string math = p.math;
    if (p.dtype != "fp32") math = kHalfMath;
    CandidateGroup& g = groups[{dtype_rank(p.dtype) * 2 + (math == "ieee"), math, p.case_id}];
    g.dtype = p.dtype, g.math = math, g.case_id = p.case_id;
    if (g.case_name.empty()) g.case_name = p.case_name;
    ++g.rows;
    if (!p.measured()) continue;
    ++g.measured;
    if (p.golden_pass == true) g.passing.push_back(&p);
  }
  return groups;
}

// The fastest passing row, or among those that tie with it the preferred one.
const Point* pick_of(const CandidateGroup& g) {
  const bool by_time = std::all_of(g.passing.begin(), g.passing.end(),
                                   [](const Point* p) { return has_time(*p); });
  const Point* fastest = g.passing.front();
  for (const Point* p : g.passing)
    if (faster(*p, *fastest, by_time)) fastest = p;
  const Point* pick = fastest;
  for (const Point* p : g.passing) {
    const bool tie = by_time ? time_ties(*p, *fastest) : within_noise(*p, *fastest);
    if (tie && preferred(*p, *pick, by_time)) pick = p;
  }
  return pick;
}

DispatchEntry entry_of(const CandidateGroup& g, const Point& pick, const results::Results& r) {
  DispatchEntry e;
  e.dtype = g.dtype;
  e.math = g.math;
  e.shape = shape_of(pick, r);
  e.config = pick.config;
  e.config_names = config_names(pick.config, r.techniques);
  e.speedup = *pick.speedup;
  e.cand_ms = pick.cand_ms;
  e.golden_rel_l2 = pick.golden_rel_l2;
  e.strict_pass = pick.strict_pass;
  e.dispatch = pick.dispatch;
  e.case_id = g.case_id;
  e.case_name = g.case_name;
  return e;
}

}  // namespace

DispatchTable build_dispatch_table(const results::Results& r) {
  DispatchTable t;
  t.origin = r.dir;
  t.source = source_of(r);
  t.techniques = r.techniques;
  check_techniques_are_stages(r);
  for (const auto& [key, g] : candidate_groups(r)) {
    const std::string where = fmt::format("case {} {} {}", g.case_id, g.case_name, g.dtype);
    if (g.dtype == "fp32" && g.math.empty()) {
      t.notes.push_back(where + ": rows do not say their fp32 math mode; no entry");
      continue;
    }
    if (g.passing.empty()) {
      t.notes.push_back(where + (g.measured == 0
                                     ? ": no configuration was measured; no entry"
                                     : ": no measured configuration passed the golden check; no entry"));
      continue;
    }
    t.entries.push_back(entry_of(g, *pick_of(g), r));
  }
  return t;
}

std::string dispatch_table_json(const DispatchTable& t) {
  const ordered_json source = {{"results", t.source.results},
                               {"gpu", t.source.gpu},
                               {"git_commit", t.source.git_commit},
                               {"time", t.source.time},
                               {"quick", t.source.quick}};
  // One entry per line, so a regenerated table reads as a diff of choices.
  std::string text = "{\n";
  text += fmt::format("  \"$comment\": {},\n", ordered_json(kComment).dump());
  text += fmt::format("  \"format_version\": {},\n", kFormatVersion);
  text += fmt::format("  \"source\": {},\n", source.dump());
  text += fmt::format("  \"techniques\": {},\n", ordered_json(t.techniques).dump());
  text += "  \"entries\": [";
  for (size_t i = 0; i < t.entries.size(); ++i) {
    const DispatchEntry& e = t.entries[i];
    const ordered_json j = {
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
    text += (i ? ",\n    " : "\n    ") + j.dump();
  }
  text += t.entries.empty() ? "],\n" : "\n  ],\n";
  text += fmt::format("  \"notes\": {}\n}}\n", ordered_json(t.notes).dump());
  return text;
}

namespace {

void parse_source(const json& doc, const std::string& origin, DispatchTable& t) {
  const json& src = need(doc, "source", origin, "$");
  if (!src.is_object()) fail(origin, "$.source", "expected an object, got " + shown(src));
  check_keys(src, {"results", "gpu", "git_commit", "time", "quick"}, origin, "$.source");
  t.source.results = opt_string(src, "results", origin, "$.source");
  t.source.gpu = opt_string(src, "gpu", origin, "$.source");
  t.source.git_commit = opt_string(src, "git_commit", origin, "$.source");
  t.source.time = opt_string(src, "time", origin, "$.source");
  t.source.quick = opt_bool(src, "quick", origin, "$.source").value_or(false);

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
DispatchEntry parse_entry(const json& o, const std::vector<std::string>& techniques, const std::string& origin,
                          const std::string& path) {
  if (!o.is_object()) fail(origin, path, "expected an entry object, got " + shown(o));
  check_keys(o,
             {"dtype", "math", "case_id", "case_name", "batch", "seq", "d_model", "heads", "d_ff",
              "layers", "mask", "config", "config_names", "speedup", "cand_ms", "golden_rel_l2",
              "strict_pass", "dispatch"},
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
  json doc;
  try {
    doc = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    throw ConfigError(fmt::format("{}: malformed JSON: {}", origin, e.what()));
  }
  if (!doc.is_object()) fail(origin, "$", "expected an object, got " + shown(doc));
  check_keys(doc, {"format_version", "source", "techniques", "entries", "notes"}, origin, "$");
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
    t.entries.push_back(parse_entry(entries[i], t.techniques, origin, fmt::format("$.entries[{}]", i)));
  parse_notes(doc, origin, t);
  return t;
}

DispatchTable load_dispatch_table(const std::string& path) {
  return parse_dispatch_table(read_config_file(path), path);
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

double shape_distance(const DispatchShape& a, const DispatchShape& b) {
  auto d = [](int64_t x, int64_t y) {
    return std::log(static_cast<double>(x)) - std::log(static_cast<double>(y));
  };
  const double tokens = d(a.batch * a.seq, b.batch * b.seq), seq = d(a.seq, b.seq);
  const double width = d(a.d_model, b.d_model), ffn = d(a.d_ff, b.d_ff);
  return std::sqrt(tokens * tokens + seq * seq + width * width + ffn * ffn) +
         (a.mask != b.mask ? kMaskPenalty : 0.0);
}

DispatchChoice choose(const DispatchTable& t, const LayerShape& shape, DType dtype,
                      Fp32Math fp32_math) {
  const std::string dt(to_string(dtype)), math = math_of(dtype, fp32_math);
  const DispatchShape want = dispatch_shape(shape);
  DispatchChoice c;
  double best = std::numeric_limits<double>::infinity();
  for (const DispatchEntry& e : t.entries) {
    if (e.dtype != dt || e.math != math) continue;
    if (e.shape == want) {
      c.entry = &e;
      c.exact = true;
      best = 0;
      break;
    }
    const double d = shape_distance(want, e.shape);
    if (d < best) best = d, c.entry = &e;
  }
  const std::string what = dtype == DType::fp32 ? fmt::format("{} ({})", dt, math) : dt;
  if (!c.entry) {
    c.config = std::string(t.techniques.size(), '1');
    for (int i = 0; i < kNumStages; ++i) c.stages.on[i] = true;
    c.reason = fmt::format("no {} entry; every technique on", what);
    return c;
  }
  const DispatchEntry& e = *c.entry;
  c.config = e.config;
  c.stages = stages_of(e.config, t.techniques);
  c.distance = best;
  c.reason = c.exact ? fmt::format("exact shape: case {} {} {}", e.case_id, e.case_name, what)
                     : fmt::format("nearest shape: case {} {} {} at distance {:.2f}", e.case_id,
                                   e.case_name, what, best);
  return c;
}

AutoConfig auto_config(const DispatchTable& t, const CaseSpec& c, DType dtype, Fp32Math fp32_math,
                       const TechniqueSet& techniques) {
  AutoConfig a;
  a.choice = choose(t, c.shape, dtype, fp32_math);
  const int n = techniques.size();
  for (int i = 0; i < n; ++i)
    if (a.choice.stages[techniques.items[static_cast<size_t>(i)].stage]) a.config |= 1u << (n - 1 - i);
  std::string missing;
  const StageSwitch have = techniques.stages(techniques.num_configs() - 1);
  for (int s = 0; s < kNumStages; ++s) {
    const Stage st = static_cast<Stage>(s);
    // "Every technique on" means every technique of the run; only a table's explicit choice
    // of a technique the run lacks is worth saying.
    if (a.choice.entry && a.choice.stages[st] && !have[st])
      missing += (missing.empty() ? "" : ", ") + std::string(to_string(st));
  }
  a.note = fmt::format("auto chose {} ({}) from {}: {}", techniques.bits(a.config),
                       techniques.names(a.config), dispatch_provenance(t), a.choice.reason);
  if (!missing.empty()) a.note += fmt::format("; {} not among this run's techniques, left off", missing);
  return a;
}

}  // namespace tlb
