// run.json, the run's own record: the options it was started with (what --resume reads back),
// provenance, the cases and techniques with their files' fingerprints, the grid, the golden
// tolerances, the dispatch table auto points use, one entry per (case, dtype) group and the
// counts of what is on disk. Rewritten whole, atomically, after each group and at the end.
#pragma once

#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config.hpp"
#include "dispatch_table.hpp"
#include "point_measure.hpp"
#include "run_options.hpp"
#include "run_schedule.hpp"
#include "writers.hpp"

namespace tlb {

// The document of a new run (state "running"); opt as recorded, its paths already final.
nlohmann::json new_run_document(const RunOptions& opt, const CaseSet& cases, const TechniqueSet& techniques,
                                const ScheduleInfo& info, size_t points);

// $.grid.groups: each planned (case, dtype) and its number of points, in schedule order, so
// the gate can tell a finished run from one that lost a group (or gained one) whatever
// --cases, --dtypes, --configs or --quick narrowed.
void record_planned_groups(nlohmann::json& doc, const Schedule& sched, const CaseSet& cases);

// The command that continues the run in `out_dir` ($.resume_command, and the interrupted
// run's last line); a merged folder records it too.
std::string resume_command_for(const std::string& out_dir);

// The table auto points are chosen from. A resumed run keeps its points but may meet another
// table (a rebuilt binary): the rows say which they used, run.json keeps both (with a warning).
void record_dispatch_table(nlohmann::json& doc, const DispatchTable& table);

// The group's entry in $.groups (replacing an earlier segment's entry for the same group).
void record_group(nlohmann::json& doc, const Group& g);

// Rows per status, every "fallback:<stages>" counted as "fallback".
std::map<std::string, int> status_counts(const std::vector<PointRow>& rows);

// $.points: scheduled, on disk, by status and golden failures; and $.block_spread.
void record_point_counts(nlohmann::json& doc, const std::vector<PointRow>& rows, size_t scheduled);

// $.block_spread: how far apart the blocks of one point measured, the run's own between-run
// spread (an A/A run's is the noise floor of a rerun): per dtype and over all, the points timed
// in two or more blocks and the median, 90th percentile and largest of their block_spread.
nlohmann::json block_spread_summary(const std::vector<PointRow>& rows);

}  // namespace tlb
