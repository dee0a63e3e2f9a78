#include "stage_timing.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "stack/layer_stack.hpp"
#include "statistics.hpp"

namespace tlb {

double StageTiming::sum_ms() const {
  double t = 0;
  for (double m : ms) t += m;
  return t;
}

void add_stage_event_run(StackPath& path, StageEventRuns& runs) {
  const StageTimes t = path.run_stage_events();
  runs.stage_ms.push_back(t.ms);
  runs.stage_events_total_ms.push_back(t.total_ms);
  runs.layer_events_total_ms.push_back(path.run_layer_events());
}

StageTiming stage_timing(const StageEventRuns& runs, int layers,
                         const std::function<std::vector<double>()>& probe) {
  const size_t n = runs.stage_ms.size();
  if (layers < 1 || n == 0 || runs.stage_events_total_ms.size() != n || runs.layer_events_total_ms.size() != n)
    throw std::invalid_argument("stage_timing: one stage-events run, one total of each kind per run, layers >= 1");
  StageTiming t;
  std::vector<double> per_event;
  for (size_t i = 0; i < n; ++i)
    per_event.push_back((runs.stage_events_total_ms[i] - runs.layer_events_total_ms[i]) / (6.0 * layers));
  t.event_forward_ms = std::max(0.0, stats::median(per_event));
  t.event_forward_se_ms = n < 3 ? std::numeric_limits<double>::infinity()
                                : 1.2533 * 1.4826 * stats::mad(per_event) / std::sqrt(static_cast<double>(n));
  t.event_ms = t.event_forward_ms;
  if (!(t.event_forward_se_ms < kEventCostPrecisionMs)) {
    // A probe that measured nothing (NaN, inf) leaves the forward's estimate, and says so.
    const std::vector<double> readings = probe();
    const double probed = stats::median(readings);  // NaN where it read nothing
    t.event_probed = std::isfinite(probed);
    if (t.event_probed) t.event_ms = std::max(0.0, probed);
  }
  t.stage_events_total_ms = stats::median(runs.stage_events_total_ms);
  t.layer_events_total_ms = stats::median(runs.layer_events_total_ms);
  for (int s = 0; s < kNumCostStages; ++s) {
    std::vector<double> v;
    for (const auto& run : runs.stage_ms) v.push_back(run[static_cast<size_t>(s)]);
    t.raw_ms[static_cast<size_t>(s)] = stats::median(v);
    // A stage shorter than its events' cost as estimated (noise on a tiny stage) reads zero.
    t.ms[static_cast<size_t>(s)] = std::max(0.0, t.raw_ms[static_cast<size_t>(s)] - layers * t.event_ms);
  }
  return t;
}

}  // namespace tlb
