// The schedule of `tlbench run`: the grid's points in order, each with the key that marks it
// done on disk, and the configuration of each auto point, chosen from the dispatch table when
// the schedule is made and again from the run's own rows when its turn comes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config.hpp"
#include "dispatch_table.hpp"
#include "grid.hpp"
#include "run_options.hpp"
#include "writers.hpp"

namespace tlb {

// One point of the schedule. An auto point carries the configuration the dispatch table chose
// for it, and the note that says where the choice came from.
struct SchedPoint {
  size_t case_index = 0;
  DType dtype = DType::fp16;
  uint32_t config = 0;
  bool automatic = false;
  std::string auto_note;
  std::string key;
};

// What the schedule holds, for the header line and run.json.
struct ScheduleInfo {
  uint32_t configs = 0;  // fixed configurations per (case, dtype)
  size_t auto_points = 0;
  std::string narrowed;  // --quick's narrowing, if any
};

struct Schedule {
  std::vector<SchedPoint> points;
  ScheduleInfo info;
};

// Grid order; A/A keeps one reference point per (case, dtype). table: needed where the grid
// holds auto points.
Schedule build_schedule(const RunOptions& opt, const CaseSet& cases, const TechniqueSet& techniques,
                        const Selection& sel, const std::vector<GridPoint>& grid,
                        const std::optional<DispatchTable>& table);

// An auto point comes last in its (case, dtype) group. Where the run has measured fixed
// configurations of the group (this GPU, this build, this exact shape), the dispatcher takes
// the table those rows make, as `tlbench dispatch` would build it from the folder, over the
// table chosen at schedule time; rows on disk from an earlier segment count, so a resumed run
// chooses the same. Leaves p unchanged where no row of the group is usable.
void choose_from_rows(const std::vector<PointRow>& rows, const std::string& out_dir,
                      const TechniqueSet& techniques, int case_id, DType dtype, SchedPoint& p);

}  // namespace tlb
