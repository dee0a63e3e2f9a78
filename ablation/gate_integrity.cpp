#include "gate_integrity.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "accuracy.hpp"

namespace tlb::gate {
namespace {

using results::Point;
using results::Results;
using nlohmann::json;

void violate(GateReport& rep, const std::string& rule, const std::string& measured, const std::string& limit,
             int case_id = 0, const std::string& case_name = "", const std::string& dtype = "",
             const std::string& config = "") {
  rep.violations.push_back({case_id, case_name, dtype, config, rule, measured, limit});
}

// "1, 2, 5-9" for a sorted set of case ids.
std::string case_list(const std::set<int>& ids) {
  std::string out;
  for (auto it = ids.begin(); it != ids.end();) {
    int first = *it, last = first;
    for (++it; it != ids.end() && *it == last + 1; ++it) last = *it;
    out += (out.empty() ? "" : ", ") + (first == last ? std::to_string(first) : fmt::format("{}-{}", first, last));
  }
  return out;
}

void check_state(const Results& r, GateReport& rep) {
  const json& run = r.run;
  if (run.empty()) return violate(rep, "run_state", "no run.json in " + r.dir, "a finished run's run.json");
  const auto state = run.find("state");
  if (state == run.end() || !state->is_string())
    return violate(rep, "run_state", "run.json records no state", "\"complete\"");
  if (*state != "complete")
    violate(rep, "run_state", fmt::format("run.json says \"{}\"", state->get<std::string>()), "\"complete\"");
}

// The planned grid against the rows on disk: the count, and every planned (case, dtype).
void check_grid(const Results& r, GateReport& rep) {
  const json& run = r.run;
  const auto grid = run.find("grid");
  if (grid == run.end() || !grid->is_object() || !grid->contains("points") || !(*grid)["points"].is_number_integer())
    return violate(rep, "incomplete", "run.json records no planned grid", "grid.points");
  const auto planned = (*grid)["points"].get<int64_t>();
  if (static_cast<int64_t>(r.points.size()) != planned)
    violate(rep, "incomplete", fmt::format("{} rows on disk", r.points.size()),
            fmt::format("{} planned in run.json", planned));
  // Per planned group (run.json of runs before grid.groups was recorded: the count alone).
  const auto groups = grid->find("groups");
  if (groups == grid->end() || !groups->is_array()) return;
  std::map<std::pair<int, std::string>, int64_t> on_disk;
  std::map<std::pair<int, std::string>, const Point*> first;
  for (const Point& p : r.points) {
    ++on_disk[{p.case_id, p.dtype}];
    first.emplace(std::make_pair(p.case_id, p.dtype), &p);
  }
  std::set<std::pair<int, std::string>> planned_groups;
  for (const json& g : *groups) {
    if (!g.is_object() || !g.contains("case_id") || !g["case_id"].is_number_integer() || !g.contains("dtype") ||
        !g["dtype"].is_string() || !g.contains("points") || !g["points"].is_number_integer())
      return violate(rep, "incomplete", "run.json's grid.groups is malformed", "{case_id, dtype, points} entries");
    const std::pair<int, std::string> key{g["case_id"].get<int>(), g["dtype"].get<std::string>()};
    planned_groups.insert(key);
    const int64_t want = g["points"].get<int64_t>(), have = on_disk.count(key) ? on_disk[key] : 0;
    if (have != want)
      violate(rep, "incomplete", fmt::format("{} rows", have), fmt::format("{} planned", want), key.first,
              first.count(key) ? first[key]->case_name : "", key.second);
  }
  for (const auto& [key, n] : on_disk)
    if (!planned_groups.count(key))
      violate(rep, "incomplete", fmt::format("{} rows of an unplanned group", n), "only planned groups", key.first,
              first[key]->case_name, key.second);
}

using Key = results::PointKey;

// The shape fields two rows of one case disagree on ("seq 128 vs 256"), comparing only what
// both record (older rows have no shape columns).
std::string shape_difference(const Point& a, const Point& b) {
  std::string out;
  auto field = [&](const char* name, const std::optional<int64_t>& x, const std::optional<int64_t>& y) {
    if (x && y && *x != *y) out += fmt::format("{}{} {} vs {}", out.empty() ? "" : ", ", name, *x, *y);
  };
  field("batch", a.batch, b.batch);
  field("seq", a.seq, b.seq);
  field("d_model", a.d_model, b.d_model);
  field("heads", a.heads, b.heads);
  field("d_ff", a.d_ff, b.d_ff);
  field("layers", a.layers, b.layers);
  if (!a.mask.empty() && !b.mask.empty() && a.mask != b.mask)
    out += fmt::format("{}mask {} vs {}", out.empty() ? "" : ", ", a.mask, b.mask);
  return out;
}

// The non-A/A rows by key.
std::map<Key, const Point*> index_rows(const Results& r, bool measured_only) {
  std::map<Key, const Point*> out;
  for (const Point& p : r.points)
    if (!p.is_aa() && (!measured_only || p.measured())) out.emplace(results::point_key(p), &p);
  return out;
}

// Rows of `from` without a counterpart in `in`, as one violation naming their cases.
void check_covered(const std::map<Key, const Point*>& from, const std::map<Key, const Point*>& in,
                   const std::string& what, GateReport& rep) {
  std::set<int> cases;
  int missing = 0;
  for (const auto& [key, p] : from)
    if (!in.count(key)) {
      ++missing;
      cases.insert(p->case_id);
    }
  if (missing > 0)
    violate(rep, "baseline_coverage", fmt::format("{} {} (cases {})", missing, what, case_list(cases)),
            "the same points in both runs");
}

}  // namespace

void check_results_integrity(const Results& r, GateReport& rep) {
  check_state(r, rep);
  if (!r.run.empty()) check_grid(r, rep);
  if (r.torn_line > 0)
    violate(rep, "torn_line", fmt::format("points.jsonl line {} is cut short", r.torn_line), "whole lines");
  for (const auto& d : r.duplicates) {
    const Point& p = r.points[d.point];
    violate(rep, "duplicate_point", fmt::format("lines {} and {}", d.replaced_line, d.line), "each point once",
            p.case_id, p.case_name, p.group, p.row_label());
  }
}

void check_baseline_fit(const Results& r, const Results& baseline, GateReport& rep) {
  const auto base_measured = index_rows(baseline, true);
  if (base_measured.empty())
    return violate(rep, "baseline_empty", "no measured point in " + baseline.dir, "a measured baseline run");
  if (r.techniques != baseline.techniques) {
    auto names = [](const std::vector<std::string>& t) {
      std::string s;
      for (const auto& n : t) s += (s.empty() ? "" : ",") + n;
      return s;
    };
    violate(rep, "baseline_techniques", names(r.techniques) + " vs baseline " + names(baseline.techniques),
            "the same techniques in the same order");
  }
  std::map<int, const Point*> base_shapes;
  for (const Point& p : baseline.points) base_shapes.emplace(p.case_id, &p);
  std::set<int> reported;
  for (const Point& p : r.points) {
    const auto it = base_shapes.find(p.case_id);
    if (it == base_shapes.end() || reported.count(p.case_id)) continue;
    reported.insert(p.case_id);
    const std::string differs = shape_difference(p, *it->second);
    if (!differs.empty())
      violate(rep, "baseline_shape", differs + " (here vs baseline)", "the same shape", p.case_id, p.case_name);
  }
  const auto rows = index_rows(r, false), base_rows = index_rows(baseline, false);
  check_covered(base_rows, rows, "baseline points missing here", rep);
  check_covered(rows, base_rows, "points missing from the baseline", rep);
}

std::optional<std::string> golden_contradiction(const Point& p) {
  if (p.golden_pass != true) return std::nullopt;
  const int64_t nonfinite = p.nan_count.value_or(0) + p.inf_count.value_or(0);
  if (nonfinite > 0)
    return fmt::format("golden_pass true with {} NaN, {} Inf", p.nan_count.value_or(0), p.inf_count.value_or(0));
  // The runner records a pass only with the error and the threshold it was judged by.
  if (!p.golden_rel_l2 || !p.golden_threshold) return std::string("golden_pass true without its rel L2 and threshold");
  const double err = *p.golden_rel_l2, limit = *p.golden_threshold;
  if (!std::isfinite(err) || err > limit)
    return fmt::format("golden_pass true with rel L2 {:.2e} > threshold {:.2e}", err, limit);
  // No looser than any threshold the runner could have set for this dtype and reference: the
  // ratio to the reference, the allowance or the floor of either fp32 math mode, whichever is
  // largest (a bound, not the exact rule: the row does not record which one applied).
  DType dtype{};
  if (!parse_dtype(p.dtype, dtype)) return std::nullopt;
  double loosest = 0;
  for (Fp32Math math : {Fp32Math::ieee, Fp32Math::tf32}) {
    loosest = std::max(loosest, golden_verdict(GoldenError{err, 0, 0}, p.golden_rel_l2_ref, dtype, math).threshold);
    loosest = std::max(loosest, golden_tolerance(dtype, math).floor);
  }
  if (limit > loosest * (1 + 1e-9))
    return fmt::format("threshold {:.2e} looser than the tolerance table's {:.2e}", limit, loosest);
  return std::nullopt;
}

std::optional<std::string> strict_contradiction(const Point& p) {
  if (p.strict_pass != true) return std::nullopt;
  const int64_t bad = p.strict_violations.value_or(0) + p.nan_count.value_or(0) + p.inf_count.value_or(0);
  if (bad == 0) return std::nullopt;
  return fmt::format("strict_pass true with {} violations, {} NaN, {} Inf", p.strict_violations.value_or(0),
                     p.nan_count.value_or(0), p.inf_count.value_or(0));
}

}  // namespace tlb::gate
