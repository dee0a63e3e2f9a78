#include "run_document.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "provenance.hpp"
#include "statistics.hpp"
#include "text.hpp"

namespace tlb {
namespace {

using json = nlohmann::json;

json case_json(const CaseSpec& c) {
  const LayerShape& s = c.shape;
  json dt = json::array();
  for (DType d : c.dtypes) dt.push_back(std::string(to_string(d)));
  return {{"id", c.id},
          {"name", c.name},
          {"batch", s.batch},
          {"seq", s.seq},
          {"d_model", s.d_model},
          {"heads", s.heads},
          {"d_ff", s.d_ff},
          {"layers", s.layers},
          {"mask", std::string(to_string(s.mask))},
          {"valid_lens", s.valid_lens},
          {"activation", std::string(to_string(s.activation))},
          {"eps", s.eps},
          {"policy", c.policy},
          {"dtypes", dt},
          {"seed", c.seed}};
}

// Where a dispatch table is from, and a fingerprint of its content.
json dispatch_table_record(const DispatchTable& t) {
  // A table of one folder keeps its source's fields flat; one of several lists them.
  auto source = [](const DispatchSource& s) {
    return json{{"results", s.results}, {"gpu", s.gpu}, {"git_commit", s.git_commit}, {"time", s.time},
                {"quick", s.quick}};
  };
  json j = {{"origin", t.origin}, {"provenance", dispatch_provenance(t)}};
  if (t.sources.size() == 1) {
    j.update(source(t.sources[0]));
  } else {
    j["sources"] = json::array();
    for (const DispatchSource& s : t.sources) j["sources"].push_back(source(s));
  }
  j["entries"] = t.entries.size();
  j["fingerprint"] = fnv1a64(dispatch_table_json(t));
  return j;
}

// A file the run read: its path as given and its fingerprint (none for the built-in technique
// set, which has no file).
json file_record(const std::string& path) {
  std::error_code ec;
  return {{"path", path},
          {"fingerprint", std::filesystem::is_regular_file(path, ec) ? file_fingerprint(path) : std::string()}};
}

}  // namespace

json new_run_document(const RunOptions& opt, const CaseSet& cases, const TechniqueSet& techniques,
                      const ScheduleInfo& info, size_t points) {
  json doc = json::object();
  doc["tool"] = tool_json();
  doc["state"] = "running";
  doc["start_time"] = utc_timestamp();
  doc["command_line"] = opt.command_line;
  doc["seed"] = opt.seed;
  doc["options"] = options_to_json(opt);
  doc["mode"] = opt.aa ? "aa" : "ablation";
  doc["cases_file"] = file_record(opt.cases_path);
  doc["techniques_file"] = file_record(techniques.source);
  json tech = json::array();
  for (const Technique& t : techniques.items)
    tech.push_back({{"name", t.name}, {"description", t.description}});
  doc["techniques"] = tech;
  json cj = json::array();
  for (const CaseSpec& c : cases.cases) cj.push_back(case_json(c));
  doc["cases"] = cj;
  doc["grid"] = {{"points", points}, {"configurations", info.configs}, {"auto_points", info.auto_points}};
  if (!info.narrowed.empty()) doc["grid"]["narrowed"] = info.narrowed;
  doc["golden_tolerances"] = json::array();
  for (const GoldenTolerance& t : kGoldenTolerances)
    doc["golden_tolerances"].push_back({{"dtype", std::string(to_string(t.dtype))},
                                        {"math", std::string(to_string(t.math))},
                                        {"floor", t.floor},
                                        {"allowance", t.allowance},
                                        {"ratio", kGoldenRatio}});
  return doc;
}

std::string resume_command_for(const std::string& out_dir) {
  return fmt::format("tlbench run --resume {}", out_dir);
}

void record_planned_groups(json& doc, const Schedule& sched, const CaseSet& cases) {
  std::vector<std::pair<int, DType>> order;
  std::map<std::pair<int, DType>, int64_t> points;
  for (const SchedPoint& p : sched.points) {
    const std::pair<int, DType> g{cases.cases[p.case_index].id, p.dtype};
    if (points[g]++ == 0) order.push_back(g);
  }
  json groups = json::array();
  for (const auto& g : order)
    groups.push_back({{"case_id", g.first}, {"dtype", std::string(to_string(g.second))}, {"points", points[g]}});
  doc["grid"]["groups"] = groups;
}

void record_dispatch_table(json& doc, const DispatchTable& table) {
  const json used = dispatch_table_record(table);
  if (doc.contains("dispatch_table") && doc["dispatch_table"] != used) {
    fmt::print(stderr, "tlbench: warning: auto points measured from now on use {}, not the "
                       "table this run began with ({})\n",
               dispatch_provenance(table), doc["dispatch_table"].value("provenance", "?"));
    if (!doc["earlier_dispatch_tables"].is_array()) doc["earlier_dispatch_tables"] = json::array();
    doc["earlier_dispatch_tables"].push_back(doc["dispatch_table"]);
  }
  doc["dispatch_table"] = used;
}

void record_group(json& doc, const Group& g) {
  const std::string golden_note =
      g.golden_tried ? g.golden_note : "not computed: no point of this group was measured";
  const std::string dtype(to_string(g.dtype));
  json e = {{"case_id", g.spec.id},
            {"case_name", g.spec.name},
            {"dtype", dtype},
            {"golden_computed", g.golden_ok},
            {"golden_ms", g.golden_ok ? json(g.golden_ms) : json(nullptr)},
            {"golden_note", golden_note},
            {"baseline", g.baseline_bits},
            {"baseline_reason", g.baseline_choice.reason},
            {"baseline_golden_rel_l2", g.baseline_golden && std::isfinite(g.baseline_golden->rel_l2)
                                           ? json(g.baseline_golden->rel_l2)
                                           : json(nullptr)},
            {"failed", !g.failed_status ? json(nullptr) : json(g.failed_note)}};
  json& groups = doc["groups"];
  if (!groups.is_array()) groups = json::array();
  for (json& old : groups)
    if (old.value("case_id", -1) == g.spec.id && old.value("dtype", std::string()) == dtype) {
      old = e;
      return;
    }
  groups.push_back(e);
}

std::map<std::string, int> status_counts(const std::vector<PointRow>& rows) {
  std::map<std::string, int> by_status;
  for (const PointRow& r : rows) ++by_status[r.status.counted_as()];
  return by_status;
}

void record_point_counts(json& doc, const std::vector<PointRow>& rows, size_t scheduled) {
  int failures = 0;
  for (const PointRow& r : rows)
    if (r.golden_pass && !*r.golden_pass) ++failures;
  doc["points"] = {{"scheduled", scheduled},
                   {"on_disk", rows.size()},
                   {"by_status", status_counts(rows)},
                   {"golden_failures", failures}};
  doc["block_spread"] = block_spread_summary(rows);
}

json block_spread_summary(const std::vector<PointRow>& rows) {
  std::map<std::string, std::vector<double>> by_dtype;
  for (const PointRow& r : rows)
    if (r.blocks && *r.blocks >= 2 && r.block_spread && std::isfinite(*r.block_spread)) {
      by_dtype[r.dtype].push_back(*r.block_spread);
      by_dtype["all"].push_back(*r.block_spread);
    }
  json out = json::object();
  for (auto& [dtype, v] : by_dtype) {
    std::sort(v.begin(), v.end());
    out[dtype] = {{"points", v.size()},
                  {"median", stats::quantile_sorted(v, 0.5)},
                  {"p90", stats::quantile_sorted(v, 0.9)},
                  {"max", v.back()}};
  }
  return out;
}

}  // namespace tlb
