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
  const auto cases = run.find("cases");
  if (cases == run.end() || !cases->is_array()) return;
  std::set<std::pair<int, std::string>> present;
  for (const Point& p : r.points) present.insert({p.case_id, p.dtype});
  for (const json& c : *cases) {
    if (!c.is_object() || !c.contains("id") || !c["id"].is_number_integer() || !c.contains("dtypes") ||
        !c["dtypes"].is_array())
      continue;
    const int id = c["id"].get<int>();
    const std::string name = c.value("name", std::string());
    for (const json& d : c["dtypes"])
      if (d.is_string() && !present.count({id, d.get<std::string>()}))
        violate(rep, "incomplete", "no rows", "every planned (case, dtype)", id, name, d.get<std::string>());
  }
}

// A point's identity across runs: case, dtype, fp32 math mode, row label.
using Key = std::tuple<int, std::string, std::string, std::string>;
Key key_of(const Point& p) { return {p.case_id, p.dtype, p.dtype == "fp32" ? p.math : std::string(), p.row_label()}; }

std::string shape_text(const Point& p) {
  auto v = [](const std::optional<int64_t>& x) { return x ? std::to_string(*x) : std::string("?"); };
  return fmt::format("b{} s{} d{} h{} ff{} L{} {}", v(p.batch), v(p.seq), v(p.d_model), v(p.heads), v(p.d_ff),
                     v(p.layers), p.mask.empty() ? "?" : p.mask);
}

// Keys of the non-A/A rows, and the case ids they cover.
std::map<Key, const Point*> index_rows(const Results& r, bool measured_only) {
  std::map<Key, const Point*> out;
  for (const Point& p : r.points)
    if (!p.is_aa() && (!measured_only || p.measured())) out.emplace(key_of(p), &p);
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
    const auto it = std::find_if(r.points.begin(), r.points.end(), [&](const Point& p) { return p.line == d.line; });
    if (it == r.points.end()) continue;
    violate(rep, "duplicate_point", fmt::format("lines {} and {}", d.replaced_line, d.line), "each point once",
            it->case_id, it->case_name, it->group, it->row_label());
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
    const std::string mine = shape_text(p), theirs = shape_text(*it->second);
    if (mine != theirs) violate(rep, "baseline_shape", mine + " vs baseline " + theirs, "the same shape", p.case_id, p.case_name);
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
  if (!p.golden_rel_l2 || !p.golden_threshold) return std::nullopt;  // no golden: the flag is the NaN check
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
