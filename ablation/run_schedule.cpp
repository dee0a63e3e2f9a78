#include "run_schedule.hpp"

#include <fmt/core.h>

#include <set>
#include <utility>

#include "config_bits.hpp"
#include "resume.hpp"
#include "results_reader.hpp"

namespace tlb {

Schedule build_schedule(const RunOptions& opt, const CaseSet& cases, const TechniqueSet& techniques,
                        const Selection& sel, const std::vector<GridPoint>& grid,
                        const std::optional<DispatchTable>& table) {
  Schedule s;
  s.info.configs = opt.aa ? 1 : selected_config_count(sel, techniques);
  s.info.narrowed = sel.narrowed;
  std::set<std::pair<size_t, int>> seen;
  for (const GridPoint& gp : grid) {
    SchedPoint p;
    p.case_index = gp.case_index;
    p.dtype = gp.dtype;
    p.config = gp.config;
    const CaseSpec& c = cases.cases[p.case_index];
    if (opt.aa) {
      if (!seen.insert({gp.case_index, static_cast<int>(gp.dtype)}).second) continue;
      p.config = 0;
    } else if (gp.automatic) {
      const AutoConfig a = auto_config(*table, c, p.dtype, opt.fp32_math, techniques);
      p.automatic = true;
      p.config = a.config;
      p.auto_note = a.note;
      ++s.info.auto_points;
    }
    p.key = point_key(c.id, to_string(p.dtype), p.automatic ? "auto" : techniques.bits(p.config),
                      layer_policy(c));
    s.points.push_back(p);
  }
  return s;
}

void choose_from_rows(const std::vector<PointRow>& rows, const std::string& out_dir,
                      const TechniqueSet& techniques, int case_id, DType dtype, SchedPoint& p) {
  results::Results own;
  own.dir = out_dir;
  for (const Technique& t : techniques.items) own.techniques.push_back(t.name);
  const std::string dt(to_string(dtype));
  for (const PointRow& row : rows) {
    if (row.case_id != case_id || row.dtype != dt || row.config == "auto") continue;
    own.points.emplace_back(row);
  }
  if (own.points.empty()) return;
  DispatchTable t;
  try {
    t = build_dispatch_table(own);
  } catch (const ConfigError&) {
    return;  // no usable row: the schedule-time choice stands
  }
  if (t.entries.empty()) return;
  const DispatchEntry& e = t.entries.front();
  const uint32_t config = config_index(e.config);
  p.config = config;
  p.auto_note = fmt::format(
      "auto chose {} ({}) from this run's {} rows of case {} {}: the fastest passing golden "
      "({:.3f}x; by forward time, ties within noise to strict)",
      techniques.bits(config), techniques.names(config), own.points.size(), case_id, dt, e.speedup);
}

}  // namespace tlb
