// Per-stage times of a layer stack from CUDA events between its stages, less the events' own
// cost. An event between two kernels holds the next one back until the event is recorded, so
// each stage's interval carries one event's cost (2-3 us on an H100 or H200, measured by
// `tlbench explain`), which on a launch-bound forward is a large share of a stage. The same
// forward is also timed with events between its layers only: the difference between the two
// totals, over the events the first has and the second has not, is one event's cost, and it is
// taken off each stage once per layer. Whether the result adds up to the forward timed without
// any event is then a check of that model, not true by construction. On a long forward that
// difference (a few tens of microseconds) drowns in the forward's run-to-run noise, and the
// cost comes from a probe that measures one event apart from any workload instead
// (timing/event_cost.hpp).
#pragma once

#include <array>
#include <functional>
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
  double event_forward_ms = 0;     // the forward's estimate of it (median over the runs, >= 0)
  double event_forward_se_ms = 0;  // that median's standard error (infinite under 3 runs)
  bool event_probed = false;       // event_ms is the probe's: the forward's was not precise
                                   // (and the probe gave a finite time)
  double stage_events_total_ms = 0;             // medians of the two totals
  double layer_events_total_ms = 0;
  double sum_ms() const;                        // of ms
};

// One run of each on `path` (StackPath::run_stage_events, then run_layer_events), into `runs`.
void add_stage_event_run(StackPath& path, StageEventRuns& runs);

// The standard error under which the forward's estimate of an event's cost is taken: a fifth
// of the 2-3 us an event costs.
inline constexpr double kEventCostPrecisionMs = 0.0005;

// `layers` >= 1; runs non-empty and of one length. The forward's estimate of an event's cost is
// the median over runs of (stage-events total - layer-events total) / (6 * layers): 7 stage
// intervals a layer against 1. Its standard error, 1.2533 x 1.4826 x MAD / sqrt(runs) (a
// median's, from the runs' robust spread), decides: under kEventCostPrecisionMs it is the
// event's cost, else the median of `probe`'s readings (timing/event_cost.hpp, called only
// then) gives it.
StageTiming stage_timing(const StageEventRuns& runs, int layers,
                         const std::function<std::vector<double>()>& probe);

}  // namespace tlb
