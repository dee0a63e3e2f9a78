// `tlbench explain`: where one layer stack's time goes, stage by stage, beside each stage's
// floor at this GPU's ceilings. For each configuration of one case and dtype:
//   - the forward as `tlbench run` times it (a graph configuration replayed, else eager);
//   - events: the same forward (a graph configuration's replayed from a graph holding the
//     events as nodes, an eager one's launched from the host) with a CUDA event before every
//     stage of every layer (StackPath::run_stage_events), without PDL, since an event between
//     two kernels ends their overlap anyway; each stage carries the launch gaps it waited on,
//     less its events' own cost (ablation/stage_timing.hpp: the forward timed with events
//     before every layer only gives one event's cost), so the stages add up to the forward
//     without PDL (StackPath::run_serial) where that model holds, and a line of its own, PDL
//     overlap, takes them to the forward as run;
//   - marginal: the forward replayed from a graph in which every layer runs the stage twice,
//     less the plain replay (StackPath::run_replayed_repeating): the stage's own device time
//     inside a graph, no launch gap in it;
//   - launch gaps: the forward less the marginal stages' sum, what runs between and around the
//     stages' work (the host's launches in an eager forward, the graph's own in a replay);
//   - per stage its FLOPs and least bytes (stack/stage_costs.hpp), its floor at the ceilings
//     measured in the same process (timing/ceilings.hpp) and the fraction of it reached.
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "config.hpp"
#include "grid.hpp"
#include "stack/stage_costs.hpp"
#include "timing/ceilings.hpp"

namespace tlb {

struct ExplainOptions {
  std::string cases_path;
  int case_id = 0;
  DType dtype = DType::fp16;
  Fp32Math fp32_math = Fp32Math::tf32;
  std::vector<std::string> configs;  // bit strings over the built-in techniques, or "auto"
  uint64_t seed = kDefaultRunSeed;
  int reps = 0;                      // timed repetitions per figure; 0: what fits in ~0.3 s, 5 to 50
  std::string ceilings_path;         // cache of measured ceilings (read where it matches, else written)
};

// One stage of one configuration, every layer's share summed.
struct ExplainStage {
  StageCost cost;           // of all layers
  double floor_ms = 0;
  double events_ms = 0;     // median over the repetitions, less its events' cost
  double events_raw_ms = 0; // median over the repetitions, as the events read
  double marginal_ms = 0;   // median of the paired differences
};

struct ExplainConfig {
  std::string config, names, note;  // note: where auto came from
  bool graph = false;
  std::string dispatch;             // as a result row names it
  int reps = 0;                     // timed repetitions behind each figure
  std::string error;                // not measured, and why (out of memory, capture refused)
  double forward_ms = 0;            // as run times the configuration
  double eager_ms = 0;              // an uncaptured forward without events (run_eager)
  double serial_ms = 0;             // the forward as run, without PDL (run_serial)
  double event_ms = 0;              // one event's own cost (stage_timing.hpp)
  bool event_probed = false;        // event_ms from the probe: the forward's estimate was noisy
  double event_forward_ms = 0;      // the forward's estimate and its standard error
  double event_forward_se_ms = 0;
  double stage_events_total_ms = 0; // the forward with an event before every stage
  double layer_events_total_ms = 0; // and with one before every layer only
  double replayed_ms = 0;           // the plain replay the marginal costs are taken against
  std::vector<ExplainStage> stages;
  double events_sum_ms() const;
  double marginal_sum_ms() const;
  double launch_gaps_ms() const { return forward_ms - marginal_sum_ms(); }
  // What PDL's overlap of neighbouring kernels takes off the forward (negative where it helps).
  double pdl_overlap_ms() const { return forward_ms - serial_ms; }
};

struct Explanation {
  CaseSpec spec;
  DType dtype = DType::fp16;
  Fp32Math fp32_math = Fp32Math::tf32;
  std::string device, device_uuid;
  MeasuredCeilings ceilings;
  std::string ceilings_source;  // "measured" or the cache file it came from
  std::vector<ExplainConfig> configs;
};

// Checks the options against the cases file (ConfigError naming the option: an unknown case
// id, a dtype the case does not run, a configuration that is not a bit string of the built-in
// techniques or "auto"). No device is touched.
CaseSpec check_explain_options(const ExplainOptions& o);
// Measures (throws DeviceError; the caller maps it to exit 3).
Explanation run_explain(const ExplainOptions& o);

void print_explanation(const Explanation& e, std::FILE* out);
nlohmann::json explanation_json(const Explanation& e);

}  // namespace tlb
