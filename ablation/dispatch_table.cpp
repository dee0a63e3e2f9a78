// The dispatch table from a results folder (each (dtype, math, case)'s fastest passing
// configuration) and the lookup of the nearest entry for a shape. As a file:
// dispatch_table_file.cpp.
#include "dispatch_table.hpp"

#include <fmt/core.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include "config.hpp"
#include "config_bits.hpp"

namespace tlb {

namespace {

using json = nlohmann::json;
using results::Point;

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
  std::string all;
  for (const DispatchSource& src : t.sources) {
    std::string s;
    for (const std::string& part : {src.gpu, src.git_commit, src.time})
      if (!part.empty()) s += (s.empty() ? "" : ", ") + part;
    if (src.quick) s += (s.empty() ? "" : ", ") + std::string("quick");
    if (!s.empty()) all += (all.empty() ? "" : "; ") + s;
  }
  const std::string origin = t.origin == kBuiltinDispatchOrigin ? "the " + t.origin : t.origin;
  return all.empty() ? origin : fmt::format("{} ({})", origin, all);
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
  return build_dispatch_table(std::vector<results::Results>{r});
}

DispatchTable build_dispatch_table(const std::vector<results::Results>& folders) {
  if (folders.empty()) throw ConfigError("no results folder to build a dispatch table from");
  DispatchTable t;
  t.techniques = folders.front().techniques;
  // Entries by dtype, math, case id, then folder; each (dtype, math, shape) from one folder.
  std::map<std::tuple<GroupKey, size_t>, DispatchEntry> entries;
  std::map<std::tuple<std::string, std::string, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int>, size_t>
      measured_in;
  for (size_t i = 0; i < folders.size(); ++i) {
    const results::Results& r = folders[i];
    t.origin += (i ? ", " : "") + r.dir;
    t.sources.push_back(source_of(r));
    check_techniques_are_stages(r);
    if (r.techniques != t.techniques)
      throw ConfigError(fmt::format("{}: techniques {} differ from {}'s {}: one table has one technique order",
                                    r.dir, fmt::join(r.techniques, ","), folders.front().dir,
                                    fmt::join(t.techniques, ",")));
    const std::string from = folders.size() > 1 ? " (" + r.dir + ")" : "";
    for (const auto& [key, g] : candidate_groups(r)) {
      const std::string where = fmt::format("case {} {} {}", g.case_id, g.case_name, g.dtype);
      if (g.dtype == "fp32" && g.math.empty()) {
        t.notes.push_back(where + from + ": rows do not say their fp32 math mode; no entry");
        continue;
      }
      if (g.passing.empty()) {
        t.notes.push_back(where + from +
                          (g.measured == 0 ? ": no configuration was measured; no entry"
                                           : ": no measured configuration passed the golden check; no entry"));
        continue;
      }
      DispatchEntry e = entry_of(g, *pick_of(g), r);
      e.source = i;
      const DispatchShape& s = e.shape;
      const auto shape = std::make_tuple(e.dtype, e.math, s.batch, s.seq, s.d_model, s.heads, s.d_ff, s.layers,
                                         static_cast<int>(s.mask));
      // Two cases of one folder may share a shape (each keeps its entry, as before); two
      // folders may not.
      if (const auto [it, fresh] = measured_in.emplace(shape, i); !fresh && it->second != i)
        throw ConfigError(fmt::format("{} and {} both measured the shape of case {} {} in {} ({}): which one the "
                                      "table should keep is not for it to guess",
                                      folders[it->second].dir, r.dir, e.case_id, e.case_name, e.dtype, e.math));
      entries.emplace(std::make_tuple(key, i), std::move(e));
    }
  }
  for (auto& [key, e] : entries) t.entries.push_back(std::move(e));
  return t;
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
  const std::string dt(to_string(dtype)), math = row_math(dtype, fp32_math);
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
