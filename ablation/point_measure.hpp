// Measuring one point of `tlbench run`: a (case, dtype) group's shared state (the data, the
// golden output, the baseline path and its output), and per configuration the steps of a point:
// memory against the budget (nonviable points are never attempted), construction (an
// allocation failure is an `oom` row), one poisoned run checked against the baseline and the
// golden, then paired ABBA timing against the baseline, all into one row.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "accuracy.hpp"
#include "common/device_buffer.hpp"
#include "config.hpp"
#include "paired_timer.hpp"
#include "plan_report.hpp"
#include "run_control.hpp"
#include "run_options.hpp"
#include "run_schedule.hpp"
#include "stack/layer_stack.hpp"
#include "stack/stage_costs.hpp"
#include "writers.hpp"

namespace tlb {

// An eager baseline's forward against the same forward replayed from a CUDA graph: the ratio
// of their times is what the host's launches add to the kernels' own. Where its interval lies
// wholly above kHostBoundRatio (plan_report.hpp) the baseline is host-bound.
struct HostProbe {
  double eager_ms = 0, replay_ms = 0;  // medians
  stats::MedianInterval ratio;         // eager / replayed, over the probe's pairs
  bool host_bound = false;
};

// What a (case, dtype) group keeps while its points run.
struct Group {
  CaseSpec spec;  // seed and layer policy resolved
  DType dtype = DType::fp16;
  size_t elements = 0;
  bool set_up = false;
  bool golden_tried = false;
  // Golden (fp32 IEEE, streamed attention), its output kept on the device.
  DeviceBuffer golden_out;
  bool golden_ok = false;
  std::string golden_note;
  double golden_ms = 0;
  std::vector<std::vector<float>> golden_layers;
  // The case's data in the dtype and the baseline path over it.
  std::unique_ptr<CaseData> data;
  BaselineChoice baseline_choice;
  std::string baseline_bits;
  std::unique_ptr<StackPath> baseline;
  DeviceBuffer baseline_out;  // a copy: the candidate check never races the timing runs
  std::optional<GoldenError> baseline_golden;
  // Measured once the baseline exists, for an eager baseline outside A/A runs. A host-bound
  // group's points are timed a second time against the replayed baseline.
  std::optional<HostProbe> host_probe;
  std::string host_probe_note;  // why there is none, where the baseline could not be replayed
  // The baseline's median forward time (ms), eager and replayed, from the group's latest
  // timing of it (the host probe or a point's block); 0 before the first. A point's timer then
  // needs no baseline warm-up run to size its batches (TimerOptions::baseline_ms).
  double baseline_ms = 0, baseline_replay_ms = 0;
  // A failure that makes every point of the group the same row.
  std::optional<StatusKind> failed_status;  // oom | error; none while the group is usable
  std::string failed_note;
  // The spread between the blocks of the group's points (block_log_sd), against the baseline
  // (rows of earlier segments included) and against its replay (this segment's points): where
  // a point's own blocks happen to agree, the group's typical spread still widens its interval.
  std::vector<double> block_sds, replay_block_sds;
  // --stage-times: the ceilings the stages' floors are taken at (the run folder's
  // ceilings.json, else measured once), or why there are none.
  bool ceilings_tried = false;
  std::optional<Ceilings> ceilings;
  std::string ceilings_note;
};

// --stage-times: forwards with stage events per point, each stage's median taken.
inline constexpr int kStageTimeRuns = 5;

// The group of schedule point p: its case with the run's seed and the layer policy applied.
Group make_group(const CaseSet& cases, const SchedPoint& p, uint64_t run_seed);

// What every point of a run measures with.
struct MeasureContext {
  const RunOptions& opt;
  const TechniqueSet& techniques;
  cudaStream_t stream;
  CudaRunClock& clock;
  ClockTracker& tracker;
  uint64_t budget_bytes;   // device memory a point may use
  uint64_t used_at_start;  // in use before the run began (peaks are counted above it)
  const FaultInjection& fault;
  const ConfigPatterns* stage_time_points;  // with --stage-times: the points that get them (null: all)
};

// The golden of the group, once (a note says why where it cannot be computed).
void ensure_golden(const MeasureContext& ctx, Group& g);

// A point between its blocks: its row as far as it is known and each block's timings. The
// candidate path lives only while a block is timed, so a group's points hold no device memory
// between their blocks; each block after the first builds it anew.
struct PendingPoint {
  PointRow row;
  PathOptions po;
  bool ran = false;             // a candidate was attempted: the row gets its peak memory
  bool timed = false;           // the first block was timed: the row waits for the rest
  bool blocks_stopped = false;  // a later block failed (the row's note says why): no more
  bool replay_stopped = false;  // the candidate could not be replayed (the note says why)
  bool wants_stage_times = false;  // --stage-times asks for this point's (and it was timed)
  std::vector<PairedMeasurement> blocks, replay_blocks;
  uint64_t peak_used = 0;
  // Whether the point takes another block in a run of `blocks` blocks a point.
  bool wants_block(size_t blocks) const;
};

// A point's setup, accuracy check and first block; a point that does not run (nonviable, oom,
// error) comes back complete, with timed false. Nothing where the run was interrupted during
// the timing. Throws DeviceError only for sticky faults (the context is gone); every other
// failure is the row's status (`oom`, `error`) and note. rows: those on disk, from which an
// auto point chooses.
std::optional<PendingPoint> begin_point(const MeasureContext& ctx, Group& g, const SchedPoint& p,
                                        const std::vector<PointRow>& rows);
// The point's next block: the candidate built anew, warmed up, timed. False where the run was
// interrupted; a failure stops the point's blocks (blocks_stopped, and a note).
bool time_next_block(const MeasureContext& ctx, Group& g, PendingPoint& pp);
// The points' block spreads into their group (before finish_point, which reads them).
void note_block_spreads(Group& g, const std::vector<PendingPoint>& points);
// A point's row, finished but for its stage times, with what timing them needs: held until
// every block of its group, the auto point's included, is timed.
struct RowAwaitingStages {
  PointRow row;
  PathOptions po;
  bool wants_stage_times = false;
};
// The point's row, its blocks pooled, the interval widened by the spread between them, with
// what its stage timing needs.
RowAwaitingStages finish_point(const MeasureContext& ctx, const Group& g, PendingPoint&& pp);
// --stage-times: the stage times and floors into the row, its path built anew, where it asks
// for them. Run once the group's blocks are done, so that these extra forwards heat none of
// them (between a point's blocks they slowed the auto point's second block).
void time_stages(const MeasureContext& ctx, Group& g, RowAwaitingStages& r);

}  // namespace tlb
