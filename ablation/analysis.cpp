// The analysis of a results folder: per dtype group, the matrix of its points, each case's
// best configuration and the factorial effects. Its files and summary: analysis_output.cpp.
#include "analysis.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "config_bits.hpp"

namespace tlb::analysis {

namespace {

using nlohmann::json;


int group_rank(const std::string& g) {
  static const char* order[] = {"fp16", "bf16", "fp32", "fp32-tf32", "fp32-ieee"};
  for (int i = 0; i < 5; ++i)
    if (g == order[i]) return i;
  return 5;
}

Interval exp_interval(double log_mean, double log_hw) {
  return {std::exp(log_mean), std::exp(log_mean - log_hw), std::exp(log_mean + log_hw)};
}

// Best configuration of one column: highest speedup among measured rows passing golden.
BestEntry find_best(const DTypeAnalysis& g, size_t col) {
  BestEntry b;
  b.case_id = g.cols[col].case_id;
  b.case_name = g.cols[col].case_name;
  b.baseline = g.cols[col].baseline;
  int measured = 0;
  for (size_t r = 0; r < g.rows.size(); ++r) {
    const Cell& c = g.cells[r][col];
    if (g.rows[r].config < 0) {
      if (c.point) b.auto_point = c.point;
      continue;
    }
    if (!c.measured()) continue;
    ++measured;
    if (c.point->golden_pass != true) continue;
    if (!b.best || *c.point->speedup > *b.best->speedup) b.best = c.point;
  }
  if (b.auto_point && !b.auto_point->auto_choice.empty()) {
    for (size_t r = 0; r < g.rows.size(); ++r) {
      const Cell& c = g.cells[r][col];
      if (g.rows[r].config >= 0 && c.point && c.point->config == b.auto_point->auto_choice) b.auto_chosen = c.point;
    }
  }
  if (!b.best) {
    b.note = measured == 0 ? "no configuration was measured"
                           : "no measured configuration passed the golden check";
    return b;
  }
  const double best_low = *b.best->speedup - b.best->halfwidth();
  for (size_t r = 0; r < g.rows.size(); ++r) {
    const Cell& c = g.cells[r][col];
    if (g.rows[r].config < 0 || !c.measured() || c.point->golden_pass != true) continue;
    if (c.point->config == b.best->config) continue;
    if (*c.point->speedup + c.point->halfwidth() >= best_low) ++b.within_noise;
  }
  return b;
}

std::string describe_missing(const DTypeAnalysis& g, size_t col) {
  std::map<std::string, int> why;
  int missing = 0;
  const int configs = 1 << g.techniques.size();
  std::vector<bool> present(static_cast<size_t>(configs), false);
  for (size_t r = 0; r < g.rows.size(); ++r) {
    if (g.rows[r].config < 0) continue;
    const Cell& c = g.cells[r][col];
    if (c.point) present[static_cast<size_t>(g.rows[r].config)] = true;
    if (c.point && !c.measured()) {
      ++missing;
      ++why[c.point->is_fallback() ? "fallback without speedup" : c.point->status.str()];
    }
  }
  for (bool p : present)
    if (!p) ++missing, ++why["not run"];
  std::string text = fmt::format("{} of {} configurations not measured (", missing, configs);
  bool first = true;
  for (const auto& [status, n] : why) {
    text += fmt::format("{}{} {}", first ? "" : ", ", n, status);
    first = false;
  }
  return text + ")";
}

Factorial factorial_of(const DTypeAnalysis& g) {
  Factorial f;
  const int n = static_cast<int>(g.techniques.size());
  if (n == 0 || n > 16) {
    f.note = fmt::format("{} techniques: no factorial analysis", n);
    return f;
  }
  const int configs = 1 << n;
  std::vector<int> row_of(static_cast<size_t>(configs), -1);
  for (size_t r = 0; r < g.rows.size(); ++r)
    if (g.rows[r].config >= 0) row_of[static_cast<size_t>(g.rows[r].config)] = static_cast<int>(r);

  FactorialInput all;
  for (size_t col = 0; col < g.cols.size(); ++col) {
    bool complete = true;
    for (int k = 0; k < configs && complete; ++k) {
      int r = row_of[static_cast<size_t>(k)];
      complete = r >= 0 && g.cells[static_cast<size_t>(r)][col].measured();
    }
    const MatrixCol& mc = g.cols[col];
    if (!complete) {
      std::string reason = describe_missing(g, col);
      if (!is_reference_baseline(mc.baseline))
        reason += "; speedups are against " + mc.baseline + ", not the reference";
      f.cases_excluded.push_back({mc.case_id, mc.case_name, reason});
      continue;
    }
    if (!is_reference_baseline(mc.baseline)) {
      f.cases_excluded.push_back(
          {mc.case_id, mc.case_name, "speedups are against " + mc.baseline + ", not the reference"});
      continue;
    }
    FactorialInput one;
    one.speedup.emplace_back();
    one.halfwidth.emplace_back();
    one.log_speedup.emplace_back();
    one.log_halfwidth.emplace_back();
    for (int k = 0; k < configs; ++k) {
      const Point& p = *g.cells[static_cast<size_t>(row_of[static_cast<size_t>(k)])][col].point;
      one.speedup[0].push_back(*p.speedup);
      one.halfwidth[0].push_back(p.halfwidth());
      one.log_speedup[0].push_back(std::log(*p.speedup));
      one.log_halfwidth[0].push_back(p.log_halfwidth());
    }
    f.cases_used.push_back(mc.case_id);
    f.by_case.push_back({mc.case_id, mc.case_name, main_effects(one, g.techniques)});
    all.speedup.push_back(one.speedup[0]);
    all.halfwidth.push_back(one.halfwidth[0]);
    all.log_speedup.push_back(one.log_speedup[0]);
    all.log_halfwidth.push_back(one.log_halfwidth[0]);
  }
  if (f.cases_used.empty()) {
    f.note = fmt::format("no case has all {} configurations measured against the reference; "
                         "technique effects not computed", configs);
    return f;
  }
  f.effects = main_effects(all, g.techniques);
  f.interactions = interactions(all, g.techniques);
  return f;
}

}  // namespace

std::vector<TechniqueEffect> main_effects(const FactorialInput& in,
                                          const std::vector<std::string>& techniques) {
  const int n = static_cast<int>(techniques.size());
  const int configs = 1 << n;
  std::vector<TechniqueEffect> out;
  for (int t = 0; t < n; ++t) {
    const int mask = 1 << (n - 1 - t);
    double s_sum[2] = {0, 0}, s_hw2[2] = {0, 0}, l_sum[2] = {0, 0}, l_hw2[2] = {0, 0};
    int count[2] = {0, 0};
    for (size_t c = 0; c < in.log_speedup.size(); ++c) {
      for (int k = 0; k < configs; ++k) {
        const size_t ks = static_cast<size_t>(k);
        const int on = (k & mask) ? 1 : 0;
        ++count[on];
        s_sum[on] += in.speedup[c][ks];
        s_hw2[on] += in.halfwidth[c][ks] * in.halfwidth[c][ks];
        l_sum[on] += in.log_speedup[c][ks];
        l_hw2[on] += in.log_halfwidth[c][ks] * in.log_halfwidth[c][ks];
      }
    }
    TechniqueEffect e;
    e.technique = techniques[static_cast<size_t>(t)];
    e.bit = t + 1;
    e.n_on = count[1];
    e.n_off = count[0];
    if (count[0] == 0 || count[1] == 0) {
      out.push_back(e);
      continue;
    }
    auto mean = [&](int on) {
      double m = s_sum[on] / count[on], hw = std::sqrt(s_hw2[on]) / count[on];
      return Interval{m, m - hw, m + hw};
    };
    e.mean_on = mean(1);
    e.mean_off = mean(0);
    const double lm_on = l_sum[1] / count[1], lm_off = l_sum[0] / count[0];
    e.geomean_on = exp_interval(lm_on, std::sqrt(l_hw2[1]) / count[1]);
    e.geomean_off = exp_interval(lm_off, std::sqrt(l_hw2[0]) / count[0]);
    e.effect_log = lm_on - lm_off;
    e.effect_halfwidth = std::sqrt(l_hw2[1] / (double(count[1]) * count[1]) +
                                   l_hw2[0] / (double(count[0]) * count[0]));
    e.ratio = exp_interval(e.effect_log, e.effect_halfwidth);
    out.push_back(e);
  }
  return out;
}

std::vector<InteractionEffect> interactions(const FactorialInput& in,
                                            const std::vector<std::string>& techniques) {
  const int n = static_cast<int>(techniques.size());
  const int configs = 1 << n;
  const double total = static_cast<double>(in.log_speedup.size()) * configs;
  std::vector<InteractionEffect> out;
  if (total == 0) return out;
  // Each quadrant (A on/off x B on/off) holds total/4 points, so
  // AB = 1/2 [(m11 - m01) - (m10 - m00)] = (2 / total) * sum(sign_A * sign_B * ln s).
  const double weight = 2.0 / total;
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      const int ma = 1 << (n - 1 - a), mb = 1 << (n - 1 - b);
      double sum = 0, hw2 = 0;
      for (size_t c = 0; c < in.log_speedup.size(); ++c)
        for (int k = 0; k < configs; ++k) {
          const double sign = ((k & ma) ? 1.0 : -1.0) * ((k & mb) ? 1.0 : -1.0);
          sum += sign * in.log_speedup[c][static_cast<size_t>(k)];
          const double h = in.log_halfwidth[c][static_cast<size_t>(k)];
          hw2 += h * h;
        }
      InteractionEffect e;
      e.a = techniques[static_cast<size_t>(a)];
      e.b = techniques[static_cast<size_t>(b)];
      e.effect_log = weight * sum;
      e.effect_halfwidth = weight * std::sqrt(hw2);
      e.ratio = exp_interval(e.effect_log, e.effect_halfwidth);
      out.push_back(e);
    }
  }
  return out;
}

namespace {

// The dtype groups present, in report order.
std::vector<std::string> group_order(const Results& results) {
  std::set<std::string> groups;
  for (const auto& p : results.points) groups.insert(p.group);
  std::vector<std::string> order(groups.begin(), groups.end());
  std::stable_sort(order.begin(), order.end(), [](const std::string& x, const std::string& y) {
    return group_rank(x) < group_rank(y);
  });
  return order;
}

// The baseline is a property of the case and dtype; if rows disagree, the majority is shown
// and the disagreement reported.
std::string majority_baseline(const std::map<std::string, int>& counts, int case_id, int n,
                              std::vector<std::string>& notes) {
  std::string baseline;
  int best = -1;
  for (const auto& [b, k] : counts)
    if (k > best) best = k, baseline = b;
  if (counts.size() > 1)
    notes.push_back(fmt::format("case {}: rows name {} different baselines; shown as {}", case_id,
                                counts.size(), baseline));
  return baseline.empty() ? std::string(static_cast<size_t>(n), '0') : baseline;
}

// The group's columns (cases, with their baselines) and rows (configurations ascending, then
// auto), its counts, and the math modes and interval level its points share.
void lay_out(DTypeAnalysis& g, const Results& results, int n) {
  std::map<int, MatrixCol> cols;
  std::map<int, std::map<std::string, int>> baselines;  // case -> baseline -> count
  std::set<int> configs;
  bool has_auto = false;
  std::set<std::string> maths;
  std::set<double> levels;
  for (const auto& p : results.points) {
    if (p.group != g.group) continue;
    if (g.dtype.empty()) g.dtype = p.dtype;
    if (p.is_aa()) {
      ++g.aa_points;
      continue;
    }
    if (!p.math.empty()) maths.insert(p.math);
    ++g.points;
    if (p.measured()) {
      ++g.measured;
      levels.insert(p.speedup_ci_level.value_or(-1.0));
    }
    auto& col = cols[p.case_id];
    col.case_id = p.case_id;
    if (col.case_name.empty()) col.case_name = p.case_name;
    if (!p.baseline.empty() && !p.is_auto()) ++baselines[p.case_id][p.baseline];
    if (p.is_auto())
      has_auto = true;
    else
      configs.insert(static_cast<int>(config_index(p.config)));
  }
  if (levels.size() == 1 && *levels.begin() > 0) g.ci_level = *levels.begin();
  if (g.dtype == "fp32") {
    for (const auto& m : maths) g.math += (g.math.empty() ? "" : ",") + m;
  }
  for (auto& [id, col] : cols) {
    col.baseline = majority_baseline(baselines[id], id, n, g.notes);
    g.cols.push_back(col);
  }
  for (int k : configs) {
    const auto c = static_cast<uint32_t>(k);
    g.rows.push_back({config_bits(c, n), config_names(c, g.techniques), k});
  }
  if (has_auto) g.rows.push_back({"auto", "auto", -1});
}

// Each of the group's points in its cell of the matrix.
void fill_cells(DTypeAnalysis& g, const Results& results) {
  std::map<int, size_t> col_of;
  for (size_t c = 0; c < g.cols.size(); ++c) col_of[g.cols[c].case_id] = c;
  std::map<std::string, size_t> row_of;
  for (size_t r = 0; r < g.rows.size(); ++r) row_of[g.rows[r].label] = r;
  g.cells.assign(g.rows.size(), std::vector<Cell>(g.cols.size()));
  for (const auto& p : results.points) {
    if (p.group != g.group || p.is_aa()) continue;
    g.cells[row_of[p.row_label()]][col_of[p.case_id]].point = p;
  }
}

DTypeAnalysis analyze_group(const Results& results, const std::string& name) {
  DTypeAnalysis g;
  g.group = name;
  g.techniques = results.techniques;
  lay_out(g, results, results.num_techniques());
  fill_cells(g, results);
  for (size_t c = 0; c < g.cols.size(); ++c) g.best.push_back(find_best(g, c));
  g.factorial = factorial_of(g);
  return g;
}

}  // namespace

Analysis analyze(const Results& results) {
  Analysis a;
  a.source_dir = results.dir;
  a.techniques = results.techniques;
  a.device = results.device_name();
  a.warnings = results.warnings;
  for (const auto& name : group_order(results)) a.groups.push_back(analyze_group(results, name));
  return a;
}

}  // namespace tlb::analysis
