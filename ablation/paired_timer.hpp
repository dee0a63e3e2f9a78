// Paired timing of a reference and a candidate forward in ABBA order (ref, cand, cand, ref,
// ref, cand, ...): a drift of the GPU clock or temperature during a point hits both sides
// alike, and each pair's ratio t_ref / t_cand is taken from two adjacent runs. The speedup is
// the median of the pair ratios with a distribution-free interval (statistics.hpp).
//
// The timer sees the device only through RunClock, so tests drive it with fake callables and
// a fake clock; CudaRunClock is the real one: CUDA events on the paths' stream around each
// run, an optional L2 flush before it, an SM clock probe after it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "statistics.hpp"

namespace tlb {

enum class Side : uint8_t { ref = 0, cand = 1 };

// Run order of pairs [first_pair, first_pair + pairs): pair k runs (ref, cand) when k is even
// and (cand, ref) when k is odd, so any block of two pairs is ABBA.
std::vector<Side> abba_schedule(size_t first_pair, size_t pairs);

// Times enqueued work. One batch: enqueue(0..count-1), then collect(count).
class RunClock {
 public:
  virtual ~RunClock() = default;
  // Enqueues `work` (which enqueues one forward) bracketed by timing markers, as run `slot`
  // of the current batch.
  virtual void enqueue(size_t slot, const std::function<void()>& work) = 0;
  // Waits for the batch and returns each run's device time in ms and the SM clock in MHz
  // sampled right after it (NaN where no sample was taken).
  virtual void collect(size_t count, std::vector<double>& ms, std::vector<double>& mhz) = 0;
  // Monotonic host time in ms, for the per-point budget.
  virtual double now_ms() = 0;
};

class CudaRunClock final : public RunClock {
 public:
  struct Options {
    bool l2_flush = false;     // write 2x the L2 size before every run (cold runs)
    bool sample_clock = true;  // SM clock probe after every run
  };
  CudaRunClock(cudaStream_t stream, const Options& opt);
  ~CudaRunClock() override;
  CudaRunClock(const CudaRunClock&) = delete;
  CudaRunClock& operator=(const CudaRunClock&) = delete;

  void enqueue(size_t slot, const std::function<void()>& work) override;
  void collect(size_t count, std::vector<double>& ms, std::vector<double>& mhz) override;
  double now_ms() override;
  uint64_t l2_flush_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The highest SM clock seen in the whole run: a sample under `throttle_fraction` of it was
// taken while the GPU was throttled (power, thermal) and is flagged. A pair whose ratio of
// clocks (candidate / baseline) strays from the point's typical ratio by more than
// `pair_clock_tolerance` is left out: a transient hit one run and not the other. A steady
// ratio is kept: under a power cap the baseline and the candidate draw different power and
// run at different clocks (one case 8 point on the H200 spanned 1.78-1.97 GHz), and
// that is part of what each costs.
struct ClockTracker {
  double throttle_fraction = 0.9;
  double pair_clock_tolerance = 0.05;
  double max_mhz = 0;
  void observe(double mhz);
  bool throttled(double mhz) const;  // false for NaN (no sample): unknown is not throttled
  // false when either clock is unknown or there is no typical ratio (NaN)
  bool clocks_stray(double ref_mhz, double cand_mhz, double typical_ratio) const;
};

struct TimerOptions {
  size_t warmup_min_runs = 3;   // candidate runs, warmup_prior_runs included
  double warmup_min_ms = 25;    // candidate device time, summed over the timed warm-up runs
  // Candidate runs made since it was built and before the timer (the accuracy check's run):
  // they count toward warmup_min_runs, not toward warmup_min_ms (they were not timed).
  size_t warmup_prior_runs = 0;
  size_t warmup_ref_runs = 1;   // baseline runs (it is warm from the previous point)
  // The baseline's forward time where the group has measured it already (ms; 0: unknown). It
  // sizes the batches where no baseline warm-up run is made, which otherwise take the
  // candidate's time for it: an IEEE baseline 5x slower than its candidate would overrun the
  // budget by that much.
  double baseline_ms = 0;
  stats::StoppingRule stop;
  double confidence = 0.95;     // level of the speedup interval
  double batch_target_ms = 20;  // device time enqueued between two looks at the results
};

struct PairedMeasurement {
  stats::Summary ref, cand;          // per-run ms of the pairs used
  stats::MedianInterval speedup;     // of t_ref / t_cand over the pairs used
  size_t pairs = 0;                  // used: neither run throttled
  size_t pairs_attempted = 0;
  size_t throttled_samples = 0;      // timed runs under the clock threshold
  size_t throttled_pairs = 0;        // pairs left out: their clock ratio strayed (ClockTracker)
  size_t warmup_runs = 0;            // candidate warm-up runs, warmup_prior_runs included
  size_t warmup_ref_runs = 0;        // baseline warm-up runs
  double min_mhz = 0, max_mhz = 0;   // over the timed runs (NaN when not sampled)
  double elapsed_ms = 0;             // warm-up included
  stats::StopReason stop = stats::StopReason::running;
  // The usable pairs themselves (ms of each side, t_ref / t_cand), so that blocks of one
  // point measured apart in time can be pooled (pool_blocks).
  std::vector<double> ref_samples, cand_samples, ratio_samples;
};

// Warms up: warmup_ref_runs baseline runs, then candidate runs until >= warmup_min_runs (the
// prior runs counted) and >= warmup_min_ms (the baseline is warm from the point before; each
// configuration is new).
// Then times pairs in ABBA order (ref, cand, cand, ref, ...) in batches until opt.stop says so. `abandon` is polled between batches (Ctrl-C):
// when it returns true the measurement ends with stop == interrupted.
PairedMeasurement measure_paired(RunClock& clock, const std::function<void()>& ref,
                                 const std::function<void()>& cand, const TimerOptions& opt,
                                 ClockTracker& tracker,
                                 const std::function<bool()>& abandon = nullptr);

// The blocks of one point, measured apart in time, as one measurement: the speedup interval
// and the ms summaries over the usable pairs of every block, the counts summed, the clock
// range and elapsed time over all of them. Its stop reason is `converged` only where every
// block converged, else the first other reason (interrupted, budget, max_pairs). The speedup
// interval is the pooled pairs' alone; widen_for_blocks adds the spread between the blocks.
PairedMeasurement pool_blocks(const std::vector<PairedMeasurement>& blocks, double confidence);

// The median speedup of each block (NaN for a block without a usable pair).
std::vector<double> block_medians(const std::vector<PairedMeasurement>& blocks);
// The sd of the log of those medians (stats::block_log_sd): the spread between the blocks.
double block_spread(const std::vector<PairedMeasurement>& blocks);

}  // namespace tlb
