// The analysis as files (matrix, heatmap, effects and best tables per dtype group, an index)
// and as the summary `tlbench report` prints, in text or JSON.
#include "analysis.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include "config.hpp"
#include "matrices.hpp"
#include "output_files.hpp"
#include "stack/stage_costs.hpp"
#include "text.hpp"

namespace tlb::analysis {

namespace {

using nlohmann::json;

constexpr const char* kMethod =
    "Effects on ln(speedup) over the cases where every configuration was measured against the "
    "reference: main effect of A = mean(ln s | A on) - mean(ln s | A off); interaction AB = half "
    "the difference of A's effect at B on and at B off (2^k contrasts); ratio = exp(effect). "
    "Intervals: each point's speedup interval half-width in log space is treated as a standard "
    "error and combined as for a mean of independent terms, so they carry the per-point "
    "intervals' confidence level and cover measurement noise only, not the spread across cases "
    "or configurations.";

std::string num(std::optional<double> v, int digits = 4) {
  if (!v || !std::isfinite(*v)) return v ? fmt::format("{}", *v) : std::string();
  return fmt::format("{:.{}f}", *v, digits);
}

std::string sci(std::optional<double> v) {
  if (!v) return {};
  return fmt::format("{:.3e}", *v);
}

std::string flag(std::optional<bool> v) { return v ? (*v ? "true" : "false") : ""; }

json opt_json(std::optional<double> v) {
  if (!v || !std::isfinite(*v)) return nullptr;
  return *v;
}
json opt_json(std::optional<bool> v) { return v ? json(*v) : json(nullptr); }


std::string col_header(const MatrixCol& c) {
  std::string h = fmt::format("{} {}", c.case_id, c.case_name);
  if (!is_reference_baseline(c.baseline)) h += " (vs " + c.baseline + ")";
  return h;
}

// The run's matrix format (matrices.hpp), over every configuration of the design.
std::string matrix_csv(const DTypeAnalysis& g) {
  SpeedupMatrix m;
  m.group = g.group;
  for (const auto& r : g.rows) {
    m.configs.push_back(r.label);
    m.config_names.push_back(r.names);
  }
  for (const auto& c : g.cols) m.cases.push_back({c.case_id, c.case_name, c.baseline});
  for (size_t r = 0; r < g.rows.size(); ++r) {
    std::vector<std::string> line;
    for (size_t c = 0; c < g.cols.size(); ++c) {
      const Cell& cell = g.cells[r][c];
      line.push_back(cell.point ? matrix_cell(cell.point->status, cell.point->speedup) : std::string());
    }
    m.cells.push_back(std::move(line));
  }
  return tlb::matrix_csv(m);
}

json heatmap_json(const DTypeAnalysis& g, const Analysis& a) {
  json rows = json::array(), cols = json::array(), values = json::array(), lows = json::array(),
       highs = json::array(), status = json::array(), golden = json::array();
  for (const auto& r : g.rows) rows.push_back({{"config", r.label}, {"names", r.names}});
  for (const auto& c : g.cols)
    cols.push_back({{"case_id", c.case_id}, {"case_name", c.case_name}, {"baseline", c.baseline},
                    {"label", col_header(c)}});
  for (size_t r = 0; r < g.rows.size(); ++r) {
    json v = json::array(), lo = json::array(), hi = json::array(), st = json::array(),
         gp = json::array();
    for (size_t c = 0; c < g.cols.size(); ++c) {
      const Cell& cell = g.cells[r][c];
      const bool m = cell.measured();
      v.push_back(m ? json(*cell.point->speedup) : json(nullptr));
      lo.push_back(m ? opt_json(cell.point->speedup_ci_low) : json(nullptr));
      hi.push_back(m ? opt_json(cell.point->speedup_ci_high) : json(nullptr));
      st.push_back(cell.status());
      gp.push_back(cell.point ? opt_json(cell.point->golden_pass) : json(nullptr));
    }
    values.push_back(v);
    lows.push_back(lo);
    highs.push_back(hi);
    status.push_back(st);
    golden.push_back(gp);
  }
  json best = json::array();
  for (size_t c = 0; c < g.cols.size(); ++c) {
    json idx = nullptr;
    if (g.best[c].best)
      for (size_t r = 0; r < g.rows.size(); ++r)
        if (g.rows[r].label == g.best[c].best->config) idx = r;
    best.push_back(idx);
  }
  return {{"group", g.group},
          {"dtype", g.dtype},
          {"math", g.math},
          {"device", a.device},
          {"value", "speedup over the baseline (median of paired t_ref / t_cand)"},
          {"techniques", g.techniques},
          {"rows", rows},
          {"cols", cols},
          {"values", values},
          {"ci_low", lows},
          {"ci_high", highs},
          {"ci_level", opt_json(g.ci_level)},
          {"status", status},
          {"golden_pass", golden},
          {"best_row", best}};
}

json interval_json(const Interval& i) {
  return {{"value", i.value}, {"low", i.low}, {"high", i.high}};
}

json effect_json(const TechniqueEffect& e) {
  return {{"technique", e.technique},
          {"bit", e.bit},
          {"n_on", e.n_on},
          {"n_off", e.n_off},
          {"mean_on", interval_json(e.mean_on)},
          {"mean_off", interval_json(e.mean_off)},
          {"geomean_on", interval_json(e.geomean_on)},
          {"geomean_off", interval_json(e.geomean_off)},
          {"main_effect_log", e.effect_log},
          {"main_effect_halfwidth", e.effect_halfwidth},
          {"ratio", interval_json(e.ratio)}};
}

json effects_json(const DTypeAnalysis& g, const Analysis& a) {
  const Factorial& f = g.factorial;
  json excluded = json::array(), effects = json::array(), inter = json::array(),
       by_case = json::array();
  for (const auto& x : f.cases_excluded)
    excluded.push_back({{"case_id", x.case_id}, {"case_name", x.case_name}, {"reason", x.reason}});
  for (const auto& e : f.effects) effects.push_back(effect_json(e));
  for (const auto& i : f.interactions)
    inter.push_back({{"a", i.a},
                     {"b", i.b},
                     {"interaction_log", i.effect_log},
                     {"halfwidth", i.effect_halfwidth},
                     {"ratio", interval_json(i.ratio)}});
  for (const auto& c : f.by_case) {
    json es = json::array();
    for (const auto& e : c.effects)
      es.push_back({{"technique", e.technique},
                    {"main_effect_log", e.effect_log},
                    {"main_effect_halfwidth", e.effect_halfwidth},
                    {"ratio", interval_json(e.ratio)}});
    by_case.push_back({{"case_id", c.case_id}, {"case_name", c.case_name}, {"effects", es}});
  }
  return {{"group", g.group},      {"dtype", g.dtype},
          {"math", g.math},        {"device", a.device},
          {"method", kMethod},     {"ci_level", opt_json(g.ci_level)},
          {"cases_used", f.cases_used},
          {"cases_excluded", excluded}, {"note", f.note},
          {"techniques", effects}, {"interactions", inter},
          {"by_case", by_case}};
}

std::string effects_csv(const DTypeAnalysis& g) {
  std::string s =
      "technique,bit,n_on,n_off,mean_on,mean_on_low,mean_on_high,mean_off,mean_off_low,"
      "mean_off_high,geomean_on,geomean_on_low,geomean_on_high,geomean_off,geomean_off_low,"
      "geomean_off_high,main_effect_log,main_effect_halfwidth,ratio,ratio_low,ratio_high\n";
  for (const auto& e : g.factorial.effects) {
    s += fmt::format("{},{},{},{}", csv_cell(e.technique), e.bit, e.n_on, e.n_off);
    for (const Interval* i : {&e.mean_on, &e.mean_off, &e.geomean_on, &e.geomean_off})
      s += fmt::format(",{:.4f},{:.4f},{:.4f}", i->value, i->low, i->high);
    s += fmt::format(",{:.5f},{:.5f},{:.4f},{:.4f},{:.4f}\n", e.effect_log, e.effect_halfwidth,
                     e.ratio.value, e.ratio.low, e.ratio.high);
  }
  return s;
}

std::string effects_by_case_csv(const DTypeAnalysis& g) {
  std::string s =
      "case_id,case_name,technique,main_effect_log,main_effect_halfwidth,ratio,ratio_low,"
      "ratio_high\n";
  for (const auto& c : g.factorial.by_case)
    for (const auto& e : c.effects)
      s += fmt::format("{},{},{},{:.5f},{:.5f},{:.4f},{:.4f},{:.4f}\n", c.case_id,
                       csv_cell(c.case_name), csv_cell(e.technique), e.effect_log,
                       e.effect_halfwidth, e.ratio.value, e.ratio.low, e.ratio.high);
  return s;
}

std::string interactions_csv(const DTypeAnalysis& g) {
  std::string s = "technique_a,technique_b,interaction_log,halfwidth,ratio,ratio_low,ratio_high\n";
  for (const auto& i : g.factorial.interactions)
    s += fmt::format("{},{},{:.5f},{:.5f},{:.4f},{:.4f},{:.4f}\n", csv_cell(i.a), csv_cell(i.b),
                     i.effect_log, i.effect_halfwidth, i.ratio.value, i.ratio.low, i.ratio.high);
  return s;
}

std::string best_csv(const DTypeAnalysis& g) {
  std::string s =
      "case_id,case_name,baseline,best_config,best_techniques,speedup,ci_low,ci_high,ref_ms,"
      "cand_ms,tflops,status,golden_pass,golden_rel_l2,golden_rel_l2_ref,strict_pass,"
      "max_abs_err,within_noise,auto_speedup,auto_choice,note\n";
  for (const auto& b : g.best) {
    s += fmt::format("{},{},{},", b.case_id, csv_cell(b.case_name), csv_cell(b.baseline));
    if (b.best) {
      const Point& p = *b.best;
      s += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},", csv_cell(p.config),
                       csv_cell(p.config_names), num(p.speedup), num(p.speedup_ci_low),
                       num(p.speedup_ci_high), num(p.ref_ms), num(p.cand_ms), num(p.tflops, 1),
                       csv_cell(p.status.str()), flag(p.golden_pass), sci(p.golden_rel_l2),
                       sci(p.golden_rel_l2_ref), flag(p.strict_pass), sci(p.max_abs_err),
                       b.within_noise);
    } else {
      s += ",,,,,,,,,,,,,,,";
    }
    s += (b.auto_point && b.auto_point->measured()) ? num(b.auto_point->speedup) : "";
    s += fmt::format(",{},{}\n", csv_cell(b.auto_point ? b.auto_point->auto_choice : std::string()),
                     csv_cell(b.note));
  }
  return s;
}

// run --stage-times: per case, the stage times and floors of the reference (configuration
// 00000) and of the best configuration, or where the best has none (--stage-times-configs
// 00000,auto) of the auto point, where their rows have them; empty without any. The
// stage times are of the row's forward as run (a graph configuration's replay) without PDL,
// with events between the stages and their own cost taken off (stage_timing.hpp), while
// forward_ms is the row's timed forward with PDL: the last column says so, and the chart
// scales each bar's stages to its forward_ms.
std::string stage_breakdown_csv(const DTypeAnalysis& g) {
  std::string head = "case_id,case_name,role,config,forward_ms";
  for (int s = 0; s < kNumCostStages; ++s) head += fmt::format(",{}_ms", to_string(static_cast<CostStage>(s)));
  for (int s = 0; s < kNumCostStages; ++s) head += fmt::format(",{}_floor_ms", to_string(static_cast<CostStage>(s)));
  head += ",stages_ms,floors_ms,stage_times\n";
  std::string body;
  auto line = [&](const BestEntry& b, const char* role, const Point& p) {
    if (p.stage_ms.size() != static_cast<size_t>(kNumCostStages)) return;
    // The auto point with the configuration it chose: "auto=11110".
    const std::string config = p.config == "auto" && !p.auto_choice.empty() ? "auto=" + p.auto_choice : p.config;
    body += fmt::format("{},{},{},{},{}", b.case_id, csv_cell(b.case_name), role, csv_cell(config), num(p.cand_ms));
    double stages = 0, floors = 0;
    // Appended piece by piece: `"," + string` here is GCC 12's false -Wrestrict alarm.
    for (double v : p.stage_ms) {
      body += ',';
      body += num(v, 6);
      stages += v;
    }
    for (int s = 0; s < kNumCostStages; ++s) {
      const bool has = p.stage_floor_ms.size() == static_cast<size_t>(kNumCostStages);
      body += ',';
      if (has) body += num(p.stage_floor_ms[static_cast<size_t>(s)], 6);
      if (has) floors += p.stage_floor_ms[static_cast<size_t>(s)];
    }
    body += fmt::format(",{},{},events without PDL less their cost\n", num(stages, 6), num(floors, 6));
  };
  size_t ref_row = g.rows.size();
  for (size_t i = 0; i < g.rows.size(); ++i)
    if (g.rows[i].label.find_first_not_of('0') == std::string::npos) ref_row = i;
  for (size_t c = 0; c < g.best.size(); ++c) {
    const BestEntry& b = g.best[c];
    if (ref_row < g.rows.size() && c < g.cols.size() && g.cells[ref_row][c].measured())
      line(b, "reference", *g.cells[ref_row][c].point);
    const auto timed = [](const std::optional<Point>& p) {
      return p && p->stage_ms.size() == static_cast<size_t>(kNumCostStages);
    };
    if (timed(b.best)) line(b, "best", *b.best);
    else if (timed(b.auto_point)) line(b, "auto", *b.auto_point);
  }
  return body.empty() ? std::string() : head + body;
}

json best_json(const BestEntry& b) {
  json j = {{"case_id", b.case_id}, {"case_name", b.case_name}, {"baseline", b.baseline}};
  if (b.best) {
    const Point& p = *b.best;
    j["config"] = p.config;
    j["techniques"] = p.config_names;
    j["speedup"] = opt_json(p.speedup);
    j["ci_low"] = opt_json(p.speedup_ci_low);
    j["ci_high"] = opt_json(p.speedup_ci_high);
    j["ref_ms"] = opt_json(p.ref_ms);
    j["cand_ms"] = opt_json(p.cand_ms);
    j["golden_pass"] = opt_json(p.golden_pass);
    j["golden_rel_l2"] = opt_json(p.golden_rel_l2);
    j["golden_rel_l2_ref"] = opt_json(p.golden_rel_l2_ref);
    j["strict_pass"] = opt_json(p.strict_pass);
    j["within_noise"] = b.within_noise;
  } else {
    j["config"] = nullptr;
    j["note"] = b.note;
  }
  if (b.auto_point && b.auto_point->measured()) j["auto_speedup"] = *b.auto_point->speedup;
  if (b.auto_point && !b.auto_point->auto_choice.empty()) j["auto_choice"] = b.auto_point->auto_choice;
  return j;
}

std::vector<std::string> stage_analysis(const Analysis& a, const std::filesystem::path& dir,
                                        const std::vector<std::pair<std::string, std::string>>& also,
                                        StagedFiles& staged) {
  std::vector<std::string> written;
  auto put = [&](const std::string& name, const std::string& text) {
    staged.put((dir / name).string(), text);
    written.push_back(name);
  };
  for (const auto& [name, text] : also) put(name, text);
  json groups = json::array();
  for (const auto& g : a.groups) {
    const std::string& s = g.group;
    put("matrix_" + s + ".csv", matrix_csv(g));
    put("heatmap_" + s + ".json", heatmap_json(g, a).dump(1) + "\n");
    put("effects_" + s + ".csv", effects_csv(g));
    put("effects_" + s + ".json", effects_json(g, a).dump(1) + "\n");
    put("effects_by_case_" + s + ".csv", effects_by_case_csv(g));
    put("interactions_" + s + ".csv", interactions_csv(g));
    put("best_" + s + ".csv", best_csv(g));
    if (const std::string sb = stage_breakdown_csv(g); !sb.empty()) put("stage_breakdown_" + s + ".csv", sb);
    groups.push_back({{"group", s},
                      {"dtype", g.dtype},
                      {"math", g.math},
                      {"cases", g.cols.size()},
                      {"configurations", g.rows.size()},
                      {"points", g.points},
                      {"measured", g.measured},
                      {"heatmap", "heatmap_" + s + ".json"},
                      {"effects", "effects_" + s + ".json"},
                      {"notes", g.notes}});
  }
  json index = {{"source", a.source_dir}, {"device", a.device},     {"techniques", a.techniques},
                {"method", kMethod},      {"groups", groups},       {"warnings", a.warnings}};
  put("analysis.json", index.dump(1) + "\n");
  return written;
}

}  // namespace

std::vector<std::string> write_analysis(const Analysis& a, const std::string& out_dir,
                                        const std::vector<std::pair<std::string, std::string>>& also) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool created = !fs::exists(fs::symlink_status(out_dir, ec));
  if (!created && !fs::is_directory(fs::symlink_status(out_dir, ec)))
    throw ConfigError(out_dir + ": exists and is not a folder; nothing written");
  fs::create_directories(out_dir, ec);
  if (ec) throw ConfigError(out_dir + ": cannot create the output folder: " + ec.message());
  try {
    StagedFiles staged;
    std::vector<std::string> written = stage_analysis(a, out_dir, also, staged);
    staged.commit();
    return written;
  } catch (...) {
    if (created) fs::remove(out_dir, ec);  // only if still empty: nothing else was there
    throw;
  }
}

namespace {

void print_group_header(const DTypeAnalysis& g, std::FILE* out) {
  std::map<std::string, int> statuses;
  for (const auto& row : g.cells)
    for (const auto& c : row)
      if (c.point) ++statuses[c.point->status.str()];
  std::string status_text;
  for (const auto& [s, k] : statuses) status_text += fmt::format(", {} {}", k, s);
  fmt::print(out, "\n{}{}: {} cases x {} configurations; {} of {} points measured{}\n", g.group,
             g.dtype == "fp32" && !g.math.empty() ? " (" + g.math + " math)" : "",
             g.cols.size(), g.rows.size(), g.measured, g.points, status_text);
}

// The best configuration of each case, with its interval, accuracy and ties.
void print_best_table(const DTypeAnalysis& g, std::FILE* out) {
  size_t name_w = 4, tech_w = 10;
  for (const auto& b : g.best) {
    name_w = std::max(name_w, b.case_name.size() + 2);
    if (b.best) tech_w = std::max(tech_w, b.best->config_names.size());
  }
  const size_t bits_w = std::max<size_t>(g.techniques.size(), 4);
  fmt::print(out, "  {:>4}  {:<{}}  {:<{}}  {:<{}}  {:>7}  {:<17}  {:<21}  {:<6}  {}\n", "case",
             "name", name_w, "best", bits_w, "techniques", tech_w, "speedup",
             g.ci_level ? fmt::format("{:.0f}% interval", *g.ci_level * 100) : "interval",
             "golden L2 cand/ref", "strict", "ties");
  bool any_alt_baseline = false;
  for (const auto& b : g.best) {
    std::string name = b.case_name;
    if (!is_reference_baseline(b.baseline)) name += " *", any_alt_baseline = true;
    if (!b.best) {
      fmt::print(out, "  {:>4}  {:<{}}  {}\n", b.case_id, name, name_w, b.note);
      continue;
    }
    const Point& p = *b.best;
    std::string interval = (p.speedup_ci_low && p.speedup_ci_high)
                               ? fmt::format("[{:.3f}, {:.3f}]", *p.speedup_ci_low,
                                             *p.speedup_ci_high)
                               : "";
    std::string golden = fmt::format("{} / {}", p.golden_rel_l2 ? sci(p.golden_rel_l2) : "-",
                                     p.golden_rel_l2_ref ? sci(p.golden_rel_l2_ref) : "-");
    std::string strict = p.strict_pass ? (*p.strict_pass ? "pass" : "FAIL") : "-";
    fmt::print(out, "  {:>4}  {:<{}}  {:<{}}  {:<{}}  {:>7.3f}  {:<17}  {:<21}  {:<6}  {}\n",
               b.case_id, name, name_w, p.config, bits_w, p.config_names, tech_w, *p.speedup,
               interval, golden, strict, b.within_noise);
  }
  if (any_alt_baseline)
    fmt::print(out, "  * speedup against the attn-only configuration: the dense reference "
                    "does not fit\n");
}

// The auto row against the best fixed configuration (by forward time, see compare_auto):
// within noise, or how far short it falls.
void print_auto_line(const DTypeAnalysis& g, std::FILE* out) {
  int with_auto = 0, auto_within = 0, auto_same = 0;
  double worst = 0;
  std::string worst_text;
  for (const auto& b : g.best) {
    if (!b.best || !b.auto_point || !b.auto_point->measured()) continue;
    ++with_auto;
    const Point& p = *b.auto_point;
    const results::AutoVsBest c =
        results::compare_auto(p, *b.best, b.auto_chosen ? &*b.auto_chosen : nullptr);
    if (c.within_noise) ++auto_within;
    if (c.same_config) ++auto_same;
    if (c.shortfall_pct > worst) {
      worst = c.shortfall_pct;
      const Point& x = c.by_choice ? *b.auto_chosen : p;
      const std::string whose = c.by_choice ? "its choice" : "auto";
      worst_text = c.by_time
                       ? fmt::format(" (case {} {}: {} {} {:.4f} ms vs best {} {:.4f} ms)", b.case_id,
                                     b.case_name, whose, x.config == "auto" ? p.auto_choice : x.config,
                                     *x.cand_ms, b.best->config, *b.best->cand_ms)
                       : fmt::format(" (case {} {}: {} {} {:.3f}x vs best {} {:.3f}x)", b.case_id,
                                     b.case_name, whose, x.config == "auto" ? p.auto_choice : x.config,
                                     *x.speedup, b.best->config, *b.best->speedup);
    }
  }
  if (with_auto > 0)
    fmt::print(out, "  auto: chose the best configuration on {} of {} cases and one within noise "
                    "of it on {} (its choice's own row against the best's, by forward time); "
                    "largest difference {:.1f}%{}\n",
               auto_same, with_auto, auto_within, worst, worst_text);
}

void print_effects(const DTypeAnalysis& g, std::FILE* out) {
  const Factorial& f = g.factorial;
  if (f.effects.empty()) {
    fmt::print(out, "  technique effects: {}\n", f.note);
  } else {
    std::string used;
    for (int id : f.cases_used) used += (used.empty() ? "" : ", ") + std::to_string(id);
    fmt::print(out, "  technique effects (geometric-mean speedup on/off; cases {}):\n", used);
    for (const auto& e : f.effects)
      fmt::print(out, "    {:<8} x{:.3f} [{:.3f}, {:.3f}]   mean speedup on {:.3f} / off {:.3f}\n",
                 e.technique, e.ratio.value, e.ratio.low, e.ratio.high, e.mean_on.value,
                 e.mean_off.value);
  }
  for (const auto& x : f.cases_excluded)
    fmt::print(out, "    excluded case {} {}: {}\n", x.case_id, x.case_name, x.reason);
}

}  // namespace

void print_summary(const Analysis& a, std::FILE* out) {
  for (const auto& w : a.warnings) fmt::print(out, "warning: {}\n", w);
  if (a.groups.empty()) fmt::print(out, "no points in {}\n", a.source_dir);
  for (const auto& g : a.groups) {
    print_group_header(g, out);
    print_best_table(g, out);
    print_auto_line(g, out);
    print_effects(g, out);
    for (const auto& note : g.notes) fmt::print(out, "  note: {}\n", note);
  }
}

std::string summary_json(const Analysis& a) {
  json groups = json::array();
  for (const auto& g : a.groups) {
    json best = json::array(), effects = json::array(), excluded = json::array();
    for (const auto& b : g.best) best.push_back(best_json(b));
    for (const auto& e : g.factorial.effects) effects.push_back(effect_json(e));
    for (const auto& x : g.factorial.cases_excluded)
      excluded.push_back({{"case_id", x.case_id}, {"reason", x.reason}});
    groups.push_back({{"group", g.group},
                      {"dtype", g.dtype},
                      {"math", g.math},
                      {"points", g.points},
                      {"measured", g.measured},
                      {"best", best},
                      {"effects", effects},
                      {"cases_used", g.factorial.cases_used},
                      {"cases_excluded", excluded}});
  }
  json j = {{"source", a.source_dir},
            {"techniques", a.techniques},
            {"groups", groups},
            {"warnings", a.warnings}};
  return j.dump(1);
}

}  // namespace tlb::analysis
