// What the gate checks before any threshold: that a results folder holds the whole run its
// run.json planned, each point once, with accuracy verdicts its own numbers support; and, with
// a baseline, that the baseline measured the same thing. A folder that fails here cannot be
// judged by its speedups, whatever they are.
//
// Folder rules (always on; each violation names its rule):
//   run_state        run.json is missing, or says the run did not finish ("running",
//                    "interrupted", "device-fault", "time-limit")
//   incomplete       fewer (or more) rows on disk than run.json's planned grid; per planned
//                    (case, dtype) of grid.groups, another number of rows; rows of a group
//                    the run did not plan
//   torn_line        the last line of points.jsonl is a write cut short
//   duplicate_point  a point written twice (a finished or resumed run writes each once)
// Baseline rules (with --baseline):
//   baseline_empty       the baseline has no measured point
//   baseline_techniques  the two runs' techniques differ (names or order)
//   baseline_shape       a case id measured another shape in the baseline
//   baseline_coverage    points of one run without a counterpart in the other
// Row verdicts: golden_contradiction / strict_contradiction say why a recorded "pass" does
// not follow from the row's error, threshold and NaN/Inf counts.
#pragma once

#include <optional>
#include <string>

#include "gate.hpp"
#include "results_reader.hpp"

namespace tlb::gate {

void check_results_integrity(const results::Results& r, GateReport& rep);
void check_baseline_fit(const results::Results& r, const results::Results& baseline, GateReport& rep);

// Why a row's golden_pass = true is not what its numbers say (nullopt: they agree, or the row
// records no pass). The threshold itself may be no looser than the tolerance table allows.
// (Checked against the loosest of the table's numbers for the row's dtype and reference.)
std::optional<std::string> golden_contradiction(const results::Point& p);
// The same for strict_pass = true: no strict violations, NaN or Inf.
std::optional<std::string> strict_contradiction(const results::Point& p);

}  // namespace tlb::gate
