// Per-stage times of a layer stack from CUDA events between its stages, less the events' own
// cost. An event between two kernels holds the next one back until the event is recorded, so
// each stage's interval carries one event's cost (2-3 us on an H100 or H200, measured by
// `tlbench explain`), which on a launch-bound forward is a large share of a stage. The same
// forward is also timed with events between its layers only: the difference between the two
// totals, over the events the first has and the second has not, is one event's cost, and it is
// taken off each stage once per layer. Whether the result adds up to the forward timed without
// any event is then a check of that model, not true by construction.
#pragma once

#include <array>
#include <vector>

#include "stack/stage_costs.hpp"

namespace tlb {

class StackPath;

// What the runs measured: per run, each stage's time summed over the layers (events before
// every stage), and the forward's time with events before every stage and with events before
// every layer only (the same runs, in turns).
struct StageEventRuns {
  std::vector<std::array<double, kNumCostStages>> stage_ms;
  std::vector<double> stage_events_total_ms, layer_events_total_ms;
};

struct StageTiming {
  std::array<double, kNumCostStages> ms{};      // median per stage, less its events' cost (>= 0)
  std::array<double, kNumCostStages> raw_ms{};  // median per stage, as the events read
  double event_ms = 0;                          // one event's own cost (never below zero)
  double stage_events_total_ms = 0;             // medians of the two totals
  double layer_events_total_ms = 0;
  double sum_ms() const;                        // of ms
};

// One run of each on `path` (StackPath::run_stage_events, then run_layer_events), into `runs`.
void add_stage_event_run(StackPath& path, StageEventRuns& runs);

// `layers` >= 1; runs non-empty and of one length. The event cost is the median over runs of
// (stage-events total - layer-events total) / (6 * layers): 7 stage intervals a layer against 1.
StageTiming stage_timing(const StageEventRuns& runs, int layers);

}  // namespace tlb
