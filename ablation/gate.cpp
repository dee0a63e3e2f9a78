#include "gate.hpp"
#include "gate_integrity.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "config.hpp"
#include "config_bits.hpp"
#include "json_fields.hpp"

namespace tlb::gate {

namespace {

using nlohmann::json;
using results::Point;
using results::Results;

using json_fields::fail;
using json_fields::index_path;

bool is_comment_key(const std::string& key) { return !key.empty() && key[0] == '$'; }

void read_limit(const json& v, Limit& out, bool allow_zero, const std::string& source,
                const std::string& path) {
  out.set = true;
  if (v.is_null()) {
    out.value.reset();
    return;
  }
  if (!v.is_number()) fail(source, path, "expected a number or null, got " + v.dump());
  double x = v.get<double>();
  if (!std::isfinite(x) || x < 0 || (!allow_zero && x == 0))
    fail(source, path, fmt::format("{} is out of range (must be {} 0)", v.dump(),
                                  allow_zero ? ">=" : ">"));
  out.value = x;
}

void read_flag(const json& v, std::optional<bool>& out, const std::string& source,
               const std::string& path) {
  if (!v.is_boolean()) fail(source, path, "expected true or false, got " + v.dump());
  out = v.get<bool>();
}

// Returns true when `key` is a rule and was read into `layer`.
bool read_rule(const std::string& key, const json& v, RuleLayer& layer, const std::string& source,
               const std::string& path) {
  const std::string p = path + "." + key;
  if (key == "min_speedup") return read_limit(v, layer.min_speedup, false, source, p), true;
  if (key == "min_best_speedup")
    return read_limit(v, layer.min_best_speedup, false, source, p), true;
  if (key == "max_regression_pct")
    return read_limit(v, layer.max_regression_pct, true, source, p), true;
  if (key == "max_auto_shortfall_pct")
    return read_limit(v, layer.max_auto_shortfall_pct, true, source, p), true;
  if (key == "require_golden") return read_flag(v, layer.require_golden, source, p), true;
  if (key == "require_strict") return read_flag(v, layer.require_strict, source, p), true;
  if (key == "allow_nonviable") return read_flag(v, layer.allow_nonviable, source, p), true;
  if (key == "allow_oom") return read_flag(v, layer.allow_oom, source, p), true;
  if (key == "allow_fallback") return read_flag(v, layer.allow_fallback, source, p), true;
  if (key == "require_all_configs")
    return read_flag(v, layer.require_all_configs, source, p), true;
  return false;
}

constexpr const char* kRuleKeys =
    "min_speedup, max_regression_pct, require_golden, require_strict, allow_nonviable, "
    "allow_oom, allow_fallback, min_best_speedup, max_auto_shortfall_pct, require_all_configs";

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else if (c != ' ') {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

int parse_case_id(const std::string& text, const std::string& source, const std::string& path) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos ||
      text.size() > 9)
    fail(source, path, "\"" + text + "\" is not a case id");
  return std::stoi(text);
}

std::vector<int> read_cases(const json& v, const std::string& source, const std::string& path) {
  std::vector<int> ids;
  if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_number_integer() || v[i].get<int64_t>() < 0)
        fail(source, index_path(path, i), "expected a case id, got " + v[i].dump());
      ids.push_back(v[i].get<int>());
    }
  } else if (v.is_string()) {
    for (const auto& part : split_commas(v.get<std::string>())) {
      auto dash = part.find('-');
      if (dash == std::string::npos) {
        ids.push_back(parse_case_id(part, source, path));
        continue;
      }
      int lo = parse_case_id(part.substr(0, dash), source, path);
      int hi = parse_case_id(part.substr(dash + 1), source, path);
      if (hi < lo) fail(source, path, "range \"" + part + "\" runs backwards");
      for (int id = lo; id <= hi; ++id) ids.push_back(id);
    }
  } else {
    fail(source, path, "expected a list of case ids or a string like \"1-5,9\", got " + v.dump());
  }
  if (ids.empty()) fail(source, path, "selects no case");
  return ids;
}

std::vector<std::string> read_string_list(const json& v, const std::string& source,
                                          const std::string& path, const char* what) {
  std::vector<std::string> out;
  if (v.is_string()) {
    out = split_commas(v.get<std::string>());
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string())
        fail(source, index_path(path, i), std::string("expected ") + what);
      out.push_back(v[i].get<std::string>());
    }
  } else {
    fail(source, path, std::string("expected ") + what + " or a list of them, got " + v.dump());
  }
  if (out.empty()) fail(source, path, "selects nothing");
  return out;
}

RuleLayer read_layer(const json& o, const std::string& source, const std::string& path,
                     Selector* selector) {
  if (!o.is_object()) fail(source, path, "expected an object");
  RuleLayer layer;
  for (const auto& [key, v] : o.items()) {
    if (is_comment_key(key)) continue;
    if (read_rule(key, v, layer, source, path)) continue;
    const std::string p = path + "." + key;
    if (selector && key == "cases") {
      selector->case_ids = read_cases(v, source, p);
    } else if (selector && key == "dtypes") {
      selector->dtypes = read_string_list(v, source, p, "a dtype");
      for (const auto& d : selector->dtypes)
        if (d != "fp16" && d != "bf16" && d != "fp32")
          fail(source, p, "unknown dtype \"" + d + "\" (fp16, bf16 or fp32)");
    } else if (selector && key == "configs") {
      selector->config_patterns = read_string_list(v, source, p, "a configuration pattern");
      for (const auto& pat : selector->config_patterns)
        if (pat != "auto" && (pat.empty() || pat.find_first_not_of("01xX") != std::string::npos))
          fail(source, p, "\"" + pat + "\" is not a pattern of 0, 1 and x (or \"auto\")");
    } else {
      fail(source, p,
          fmt::format("unknown key (rules: {}{})", kRuleKeys,
                      selector ? "; selectors: cases, dtypes, configs" : ""));
    }
  }
  return layer;
}

template <class T>
void apply(std::optional<T>& into, const std::optional<T>& from) {
  if (from) into = from;
}

void apply_limit(std::optional<double>& into, const Limit& from) {
  if (from.set) into = from.value;
}

void apply_point_rules(EffectiveRules& r, const RuleLayer& l) {
  apply_limit(r.min_speedup, l.min_speedup);
  apply_limit(r.max_regression_pct, l.max_regression_pct);
  if (l.require_golden) r.require_golden = *l.require_golden;
  if (l.require_strict) r.require_strict = *l.require_strict;
  if (l.allow_nonviable) r.allow_nonviable = *l.allow_nonviable;
  if (l.allow_oom) r.allow_oom = *l.allow_oom;
  if (l.allow_fallback) r.allow_fallback = *l.allow_fallback;
}

void apply_case_rules(EffectiveRules& r, const RuleLayer& l) {
  apply_limit(r.min_best_speedup, l.min_best_speedup);
  apply_limit(r.max_auto_shortfall_pct, l.max_auto_shortfall_pct);
  if (l.require_all_configs) r.require_all_configs = *l.require_all_configs;
  // Per-case lookups also need the accuracy rule that decides which configuration is "best".
  if (l.require_golden) r.require_golden = *l.require_golden;
}

bool selects(const Selector& s, int case_id, const std::string& dtype, const std::string& config) {
  if (!s.case_ids.empty() &&
      std::find(s.case_ids.begin(), s.case_ids.end(), case_id) == s.case_ids.end())
    return false;
  if (!s.dtypes.empty() && std::find(s.dtypes.begin(), s.dtypes.end(), dtype) == s.dtypes.end())
    return false;
  if (s.config_patterns.empty()) return true;
  if (config.empty()) return false;  // per-case lookups skip config-specific overrides
  for (const auto& pat : s.config_patterns) {
    if (pat == "auto" ? config == "auto" : bits_match(pat, config)) return true;
  }
  return false;
}

std::string f3(double v) { return fmt::format("{:.3f}", v); }

std::string accuracy_text(const Point& p, bool golden) {
  std::optional<bool> flag = golden ? p.golden_pass : p.strict_pass;
  std::string s = !flag ? "not recorded" : (*flag ? "pass" : "fail");
  if (golden && p.golden_rel_l2)
    s += fmt::format(" (rel L2 {:.2e}{})", *p.golden_rel_l2,
                     p.golden_rel_l2_ref ? fmt::format(", ref {:.2e}", *p.golden_rel_l2_ref) : "");
  if (!golden && p.max_abs_err) s += fmt::format(" (max abs err {:.2e})", *p.max_abs_err);
  if ((p.nan_count && *p.nan_count > 0) || (p.inf_count && *p.inf_count > 0))
    s += fmt::format(" [{} NaN, {} Inf]", p.nan_count.value_or(0), p.inf_count.value_or(0));
  return s;
}

using results::PointKey;
using results::point_key;

}  // namespace

Thresholds parse_thresholds(std::string_view text, const std::string& source) {
  const json doc = json_fields::parse_document(text, source);
  Thresholds t;
  t.source = source;
  if (!doc.is_object()) fail(source, "$", "expected an object with \"defaults\" and \"overrides\"");
  for (const auto& [key, v] : doc.items()) {
    if (is_comment_key(key)) continue;
    if (key == "defaults") {
      t.defaults = read_layer(v, source, "$.defaults", nullptr);
    } else if (key == "overrides") {
      if (!v.is_array()) fail(source, "$.overrides", "expected a list of objects");
      for (size_t i = 0; i < v.size(); ++i) {
        Override o;
        o.path = fmt::format("$.overrides[{}]", i);
        o.rules = read_layer(v[i], source, o.path, &o.selector);
        if (!o.selector.config_patterns.empty()) {
          const RuleLayer& l = o.rules;
          const char* per_case = l.min_best_speedup.set         ? "min_best_speedup"
                                 : l.max_auto_shortfall_pct.set ? "max_auto_shortfall_pct"
                                 : l.require_all_configs        ? "require_all_configs"
                                                                : nullptr;
          if (per_case)
            fail(source, o.path + "." + per_case,
                "applies per case and dtype, so it cannot sit in an override with \"configs\"");
        }
        t.overrides.push_back(std::move(o));
      }
    } else {
      fail(source, "$." + key, "unknown key (expected defaults, overrides or a \"$comment\")");
    }
  }
  return t;
}

Thresholds load_thresholds(const std::string& path) {
  return parse_thresholds(json_fields::read_input_file(path), path);
}

EffectiveRules rules_for(const Thresholds& t, int case_id, const std::string& dtype,
                         const std::string& config) {
  EffectiveRules r;
  const bool per_case = config.empty();
  auto layer = [&](const RuleLayer& l) {
    if (per_case)
      apply_case_rules(r, l);
    else
      apply_point_rules(r, l);
  };
  layer(t.defaults);
  for (const auto& o : t.overrides)
    if (selects(o.selector, case_id, dtype, config)) layer(o.rules);
  return r;
}

namespace {

// Every configuration pattern of an override has one position per technique of the results.
void check_patterns(const Thresholds& t, const Results& results) {
  const int n = results.num_techniques();
  for (const auto& o : t.overrides)
    for (const auto& pat : o.selector.config_patterns) {
      if (pat == "auto" || static_cast<int>(pat.size()) == n) continue;
      std::string names;
      for (const auto& name : results.techniques) names += (names.empty() ? "" : ", ") + name;
      fail(t.source, o.path + ".configs",
          fmt::format("pattern \"{}\" has {} positions but {} has {} techniques ({})", pat, pat.size(),
                      results.dir, n, names));
    }
}

// The baseline folder's measured points by key, and which of them the results matched.
struct BaselineIndex {
  std::map<PointKey, const Point*> points;
  std::set<PointKey> matched;
};

// The per-point rules: status, speedup, accuracy and the regression against the baseline.
void check_point(const Point& p, const EffectiveRules& r, BaselineIndex* base, GateReport& rep) {
  auto violate = [&](const std::string& rule, const std::string& measured, const std::string& limit) {
    rep.violations.push_back({p.case_id, p.case_name, p.group, p.row_label(), rule, measured, limit});
  };
  const std::string& status = p.status.str();
  if (p.status == StatusKind::nonviable || p.status == StatusKind::oom) {
    const bool allowed = p.status == StatusKind::nonviable ? r.allow_nonviable : r.allow_oom;
    if (allowed)
      ++rep.allowed_unmeasured;
    else
      violate("allow_" + status, status, "not allowed here");
    return;
  }
  if (p.status == StatusKind::error) return violate("error", "error", "never allowed");
  if (!p.status.ran())
    return violate("status", "\"" + status + "\"", "ok, fallback:<stage>, nonviable or oom");
  if (p.is_fallback() && !r.allow_fallback) violate("allow_fallback", status, "not allowed here");
  if (!p.measured())
    return violate("speedup_missing", p.speedup ? fmt::format("{}", *p.speedup) : "none", "a positive speedup");
  ++rep.measured;
  const double s = *p.speedup;
  if (r.min_speedup && s < *r.min_speedup) violate("min_speedup", f3(s), ">= " + f3(*r.min_speedup));
  // The recorded verdicts are recomputed from the row's own numbers: a flag alone is not trusted.
  if (r.require_golden) {
    if (p.golden_pass != true)
      violate("require_golden", accuracy_text(p, true),
              p.golden_threshold ? fmt::format("pass (rel L2 <= {:.2e})", *p.golden_threshold) : "pass");
    else if (const auto why = golden_contradiction(p))
      violate("require_golden", *why, "a pass the row's numbers support");
  }
  if (r.require_strict) {
    if (p.strict_pass != true)
      violate("require_strict", accuracy_text(p, false), "pass");
    else if (const auto why = strict_contradiction(p))
      violate("require_strict", *why, "a pass the row's numbers support");
  }
  if (!base) return;
  auto it = base->points.find(point_key(p));
  if (it == base->points.end()) return;
  base->matched.insert(it->first);
  ++rep.compared;
  const Point& before = *it->second;
  // Where both runs timed the point against their baseline replayed from a graph (a
  // host-bound baseline, whose eager time measures the host's launch rate), they are compared
  // on that speedup, which does not depend on the host. Where only one did, the other's
  // eager figure is all there is to set beside it: eager against eager, counted apart (a
  // replayed figure against an eager one would be the probe's ratio, not a change).
  const bool on_replay = p.speedup_vs_graph_ref.has_value() && before.speedup_vs_graph_ref.has_value();
  if (p.speedup_vs_graph_ref.has_value() != before.speedup_vs_graph_ref.has_value()) ++rep.replayed_in_one_run;
  struct Judged {
    double speedup;
    std::optional<double> low, high;
  };
  auto judged = [on_replay](const Point& x) {
    return on_replay ? Judged{*x.speedup_vs_graph_ref, x.speedup_vs_graph_ref_ci_low, x.speedup_vs_graph_ref_ci_high}
                     : Judged{*x.speedup, x.speedup_ci_low, x.speedup_ci_high};
  };
  const Judged now = judged(p), then = judged(before);
  if (on_replay) ++rep.compared_on_replay;
  if (then.low && then.high) {
    ++rep.with_baseline_interval;
    if (now.speedup >= *then.low && now.speedup <= *then.high) ++rep.inside_baseline_interval;
  }
  const double change = (now.speedup / then.speedup - 1.0) * 100.0;
  rep.worst_change_pct = std::min(rep.worst_change_pct, change);
  if (!r.max_regression_pct || -change <= *r.max_regression_pct) return;
  // A drop past the threshold is a regression only where the two runs' intervals exclude each
  // other: inside them it is the noise each run reported. Points without intervals are judged
  // by the threshold alone.
  if (now.high && then.low && *now.high >= *then.low) {
    ++rep.regressions_within_noise;
    return;
  }
  violate("max_regression_pct",
          fmt::format("{} vs {} ({:+.1f}%{})", f3(now.speedup), f3(then.speedup), change,
                      on_replay ? ", against the replayed baseline" : ""),
          fmt::format("<= {:.1f}% slower", *r.max_regression_pct));
}

// The points of one (case, dtype group), for the per-case rules.
struct CaseGroup {
  std::string group;
  int case_id = 0;
  std::vector<const Point*> points;
  void violate(GateReport& rep, const std::string& config, const std::string& rule,
               const std::string& measured, const std::string& limit) const {
    rep.violations.push_back({case_id, points.front()->case_name, group, config, rule, measured, limit});
  }
};

// require_all_configs: each of the 2^n fixed configurations has a row.
void check_all_configs(const CaseGroup& cg, int n, GateReport& rep) {
  const int configs = (n > 0 && n <= 16) ? (1 << n) : 0;
  if (configs == 0) return;
  std::vector<bool> present(static_cast<size_t>(configs), false);
  for (const Point* p : cg.points) {
    if (p->is_auto()) continue;
    present[config_index(p->config)] = true;
  }
  for (int k = 0; k < configs; ++k) {
    if (present[static_cast<size_t>(k)]) continue;
    std::string bits(static_cast<size_t>(n), '0');
    for (int i = 0; i < n; ++i)
      if (k & (1 << (n - 1 - i))) bits[static_cast<size_t>(i)] = '1';
    cg.violate(rep, bits, "require_all_configs", "not in the results", "every configuration");
  }
}

// max_auto_shortfall_pct: auto's choice is judged (compare_auto says how): the fixed row of the
// configuration it chose against the best's, by forward time where both have one. When auto
// ran the best configuration itself there is nothing to judge.
void check_auto(const CaseGroup& cg, const Point& automatic, const Point& best, double limit_pct,
                GateReport& rep) {
  const Point* chosen = nullptr;
  for (const Point* p : cg.points)
    if (!p->is_auto() && !automatic.auto_choice.empty() && p->config == automatic.auto_choice) chosen = p;
  const results::AutoVsBest c = results::compare_auto(automatic, best, chosen);
  if (c.same_config || c.shortfall_pct <= limit_pct) return;
  const Point& judged = c.by_choice ? *chosen : automatic;
  const std::string what = c.by_choice ? "auto's choice " + chosen->config : std::string("auto");
  cg.violate(rep, "auto", "max_auto_shortfall_pct",
             c.by_time ? fmt::format("{} {:.4f} ms vs best {} {:.4f} ms ({:.1f}% slower)", what,
                                     *judged.cand_ms, best.config, *best.cand_ms, c.shortfall_pct)
                       : fmt::format("{} {} vs best {} {} ({:.1f}% slower)", what, f3(*judged.speedup),
                                     best.config, f3(*best.speedup), c.shortfall_pct),
             fmt::format("<= {:.1f}% slower", limit_pct));
}

// The per-case rules: every configuration present, the best one fast enough, auto close to it.
void check_case_group(const Thresholds& t, const CaseGroup& cg, int n, GateReport& rep) {
  const EffectiveRules r = rules_for(t, cg.case_id, cg.points.front()->dtype, "");
  if (r.require_all_configs) check_all_configs(cg, n, rep);
  const Point* best = nullptr;
  const Point* automatic = nullptr;
  for (const Point* p : cg.points) {
    if (!p->measured()) continue;
    if (p->is_auto()) {
      automatic = p;
      continue;
    }
    if (r.require_golden && (p->golden_pass != true || golden_contradiction(*p))) continue;
    if (!best || *p->speedup > *best->speedup) best = p;
  }
  if (r.min_best_speedup) {
    if (!best)
      cg.violate(rep, "", "min_best_speedup",
                 r.require_golden ? "no measured configuration passes golden" : "no measured configuration",
                 ">= " + f3(*r.min_best_speedup));
    else if (*best->speedup < *r.min_best_speedup)
      cg.violate(rep, "", "min_best_speedup", fmt::format("{} ({})", f3(*best->speedup), best->config),
                 ">= " + f3(*r.min_best_speedup));
  }
  if (r.max_auto_shortfall_pct && automatic && best)
    check_auto(cg, *automatic, *best, *r.max_auto_shortfall_pct, rep);
}

}  // namespace

GateReport run_gate(const Thresholds& t, const Results& results, const Results* baseline) {
  check_patterns(t, results);
  GateReport rep;
  check_results_integrity(results, rep);
  if (baseline) check_baseline_fit(results, *baseline, rep);
  BaselineIndex base;
  if (baseline)
    for (const auto& p : baseline->points)
      if (!p.is_aa() && p.measured()) base.points[point_key(p)] = &p;

  // Points grouped per (case, dtype group) for the per-case rules, in a stable order.
  std::map<std::pair<std::string, int>, CaseGroup> per_case;
  std::set<int> case_ids;
  std::set<std::string> groups;
  for (const auto& p : results.points) {
    if (p.is_aa()) {
      ++rep.aa_points;
      continue;
    }
    ++rep.points;
    CaseGroup& cg = per_case[{p.group, p.case_id}];
    cg.group = p.group;
    cg.case_id = p.case_id;
    cg.points.push_back(&p);
    case_ids.insert(p.case_id);
    groups.insert(p.group);
    check_point(p, rules_for(t, p.case_id, p.dtype, p.row_label()), baseline ? &base : nullptr, rep);
  }
  if (baseline) rep.baseline_unmatched = static_cast<int>(base.points.size() - base.matched.size());
  rep.cases = static_cast<int>(case_ids.size());
  rep.groups = static_cast<int>(groups.size());
  if (rep.points == 0)
    rep.violations.push_back({0, "", "", "", "no_points", "no points in " + results.dir,
                              "at least one measured point"});
  for (const auto& [where, cg] : per_case) check_case_group(t, cg, results.num_techniques(), rep);

  std::stable_sort(rep.violations.begin(), rep.violations.end(), [](const Violation& a, const Violation& b) {
    return std::tie(a.case_id, a.dtype, a.config) < std::tie(b.case_id, b.dtype, b.config);
  });
  return rep;
}

void print_report(const GateReport& r, std::FILE* out) {
  std::string baseline_text;
  if (r.compared > 0 || r.baseline_unmatched > 0) {
    baseline_text = fmt::format("; vs baseline: {} points compared", r.compared);
    if (r.compared_on_replay || r.replayed_in_one_run) {
      baseline_text += fmt::format(" ({} host-bound, on the replayed baseline", r.compared_on_replay);
      if (r.replayed_in_one_run)
        baseline_text += fmt::format("; {} replayed in one run only, compared eagerly", r.replayed_in_one_run);
      baseline_text += ")";
    }
    baseline_text += fmt::format(", worst change {:+.1f}%", r.worst_change_pct);
    if (r.with_baseline_interval)
      baseline_text += fmt::format(", {} of {} inside the baseline's intervals ({:.1f} %)", r.inside_baseline_interval,
                                   r.with_baseline_interval,
                                   100.0 * r.inside_baseline_interval / r.with_baseline_interval);
    if (r.regressions_within_noise)
      baseline_text += fmt::format(", {} past the threshold but within both runs' intervals", r.regressions_within_noise);
    if (r.baseline_unmatched)
      baseline_text += fmt::format(", {} baseline points without a match", r.baseline_unmatched);
  }
  if (r.passed()) {
    fmt::print(out,
               "gate: passed: {} points ({} measured, {} allowed unmeasured) over {} cases and {} "
               "dtypes{}\n",
               r.points, r.measured, r.allowed_unmeasured, r.cases, r.groups, baseline_text);
    return;
  }
  size_t name_w = 4, rule_w = 4, meas_w = 8, cfg_w = 6, dt_w = 5;
  for (const auto& v : r.violations) {
    name_w = std::max(name_w, v.case_name.size());
    rule_w = std::max(rule_w, v.rule.size());
    meas_w = std::max(meas_w, v.measured.size());
    cfg_w = std::max(cfg_w, v.config.size());
    dt_w = std::max(dt_w, v.dtype.size());
  }
  fmt::print(out, "{:>4}  {:<{}}  {:<{}}  {:<{}}  {:<{}}  {:<{}}  {}\n", "case", "name", name_w,
             "dtype", dt_w, "config", cfg_w, "rule", rule_w, "measured", meas_w, "limit");
  for (const auto& v : r.violations)
    fmt::print(out, "{:>4}  {:<{}}  {:<{}}  {:<{}}  {:<{}}  {:<{}}  {}\n", v.case_id, v.case_name,
               name_w, v.dtype, dt_w, v.config.empty() ? "-" : v.config, cfg_w, v.rule, rule_w,
               v.measured, meas_w, v.limit);
  fmt::print(out, "gate: FAILED: {} violation{} in {} points over {} cases and {} dtypes{}\n",
             r.violations.size(), r.violations.size() == 1 ? "" : "s", r.points, r.cases,
             r.groups, baseline_text);
}

std::string report_json(const GateReport& r) {
  json v = json::array();
  for (const auto& x : r.violations)
    v.push_back({{"case_id", x.case_id},
                 {"case_name", x.case_name},
                 {"dtype", x.dtype},
                 {"config", x.config},
                 {"rule", x.rule},
                 {"measured", x.measured},
                 {"limit", x.limit}});
  json j = {{"passed", r.passed()},
            {"points", r.points},
            {"measured", r.measured},
            {"allowed_unmeasured", r.allowed_unmeasured},
            {"aa_points", r.aa_points},
            {"cases", r.cases},
            {"dtypes", r.groups},
            {"violations", v}};
  if (r.compared > 0 || r.baseline_unmatched > 0) {
    j["baseline_compared"] = r.compared;
    j["baseline_unmatched"] = r.baseline_unmatched;
    j["worst_change_pct"] = r.worst_change_pct;
    j["regressions_within_noise"] = r.regressions_within_noise;
    j["compared_on_replay"] = r.compared_on_replay;
    j["replayed_in_one_run"] = r.replayed_in_one_run;
    j["with_baseline_interval"] = r.with_baseline_interval;
    j["inside_baseline_interval"] = r.inside_baseline_interval;
  }
  return j.dump(1);
}

}  // namespace tlb::gate
