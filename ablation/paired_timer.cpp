#include "paired_timer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "common/cuda_check.hpp"
#include "common/cuda_event.hpp"
#include "common/device_buffer.hpp"
#include "timing/clock_probe.hpp"
#include "timing/l2_flush.hpp"

namespace tlb {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}

std::vector<Side> abba_schedule(size_t first_pair, size_t pairs) {
  std::vector<Side> order;
  order.reserve(2 * pairs);
  for (size_t k = first_pair; k < first_pair + pairs; ++k) {
    const bool ref_first = (k % 2) == 0;
    order.push_back(ref_first ? Side::ref : Side::cand);
    order.push_back(ref_first ? Side::cand : Side::ref);
  }
  return order;
}

// ---------------------------------------------------------------- CudaRunClock

struct CudaRunClock::Impl {
  cudaStream_t stream = nullptr;
  Options opt;
  std::vector<CudaEvent> start, stop;
  DeviceBuffer probes;  // ClockProbeSample per slot
  std::vector<ClockProbeSample> probes_host;
  DeviceBuffer flush;
  unsigned flush_counter = 0;

  void reserve(size_t slots) {
    while (start.size() < slots) {
      start.emplace_back();
      stop.emplace_back();
    }
    if (opt.sample_clock && probes.bytes() < slots * sizeof(ClockProbeSample)) {
      // Grow geometrically. This can happen in the middle of a batch, so the samples already
      // taken move along (after the probes that write them have finished).
      const size_t cap = std::max(slots, 2 * probes.bytes() / sizeof(ClockProbeSample));
      DeviceBuffer grown(cap * sizeof(ClockProbeSample));
      if (probes.bytes() > 0)
        TLB_CUDA_CHECK(cudaMemcpyAsync(grown.get(), probes.get(), probes.bytes(),
                                       cudaMemcpyDeviceToDevice, stream));
      TLB_CUDA_CHECK(cudaStreamSynchronize(stream));  // before the old buffer is freed
      probes = std::move(grown);
      probes_host.resize(cap);
    }
  }
};

CudaRunClock::CudaRunClock(cudaStream_t stream, const Options& opt) : impl_(new Impl) {
  impl_->stream = stream;
  impl_->opt = opt;
  if (opt.l2_flush) {
    int device = 0, l2 = 0;
    TLB_CUDA_CHECK(cudaGetDevice(&device));
    TLB_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
    const uint64_t bytes = std::max<uint64_t>(2ull * static_cast<uint64_t>(l2), 1ull << 20);
    impl_->flush = DeviceBuffer((bytes + 15) / 16 * 16);
  }
  impl_->reserve(512);  // the timer's largest batch: 256 pairs
}

CudaRunClock::~CudaRunClock() = default;

uint64_t CudaRunClock::l2_flush_bytes() const { return impl_->flush.bytes(); }

void CudaRunClock::enqueue(size_t slot, const std::function<void()>& work) {
  Impl& m = *impl_;
  m.reserve(slot + 1);
  if (m.opt.l2_flush) launch_l2_flush(m.flush.get(), m.flush.bytes(), ++m.flush_counter, m.stream);
  // Every run starts on an idle stream. A forward whose launches take longer than its kernels
  // (a small shape without a graph) is then timed as the host launches it, whatever ran
  // before; otherwise its time depended on how far the host had got ahead while the previous
  // run executed (a graph replay lets it, an eager forward does not): on the H200 one
  // reference forward of case 1 read 0.25 or 0.40 ms by its neighbour alone.
  TLB_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  TLB_CUDA_CHECK(cudaEventRecord(m.start[slot], m.stream));
  work();
  TLB_CUDA_CHECK(cudaEventRecord(m.stop[slot], m.stream));
  if (m.opt.sample_clock)
    launch_clock_probe(m.probes.as<ClockProbeSample>() + slot, kClockProbeSpinNs, m.stream);
}

void CudaRunClock::collect(size_t count, std::vector<double>& ms, std::vector<double>& mhz) {
  Impl& m = *impl_;
  ms.assign(count, kNaN);
  mhz.assign(count, kNaN);
  if (count == 0) return;
  if (m.opt.sample_clock)
    TLB_CUDA_CHECK(cudaMemcpyAsync(m.probes_host.data(), m.probes.get(),
                                   count * sizeof(ClockProbeSample), cudaMemcpyDeviceToHost,
                                   m.stream));
  TLB_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  for (size_t i = 0; i < count; ++i) {
    ms[i] = elapsed_ms(m.start[i], m.stop[i]);
    if (m.opt.sample_clock) mhz[i] = clock_probe_mhz(m.probes_host[i]);
  }
}

double CudaRunClock::now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

// ---------------------------------------------------------------- ClockTracker

void ClockTracker::observe(double mhz) {
  if (std::isfinite(mhz) && mhz > max_mhz) max_mhz = mhz;
}

bool ClockTracker::throttled(double mhz) const {
  return std::isfinite(mhz) && max_mhz > 0 && mhz < throttle_fraction * max_mhz;
}

bool ClockTracker::clocks_stray(double ref_mhz, double cand_mhz, double typical_ratio) const {
  if (!std::isfinite(ref_mhz) || !std::isfinite(cand_mhz) || !(ref_mhz > 0) ||
      !std::isfinite(typical_ratio) || !(typical_ratio > 0))
    return false;
  return std::fabs(cand_mhz / ref_mhz / typical_ratio - 1.0) > pair_clock_tolerance;
}

// ---------------------------------------------------------------- measure_paired

namespace {

struct PairSample {
  double ref_ms, cand_ms, ref_mhz, cand_mhz;
};

// Runs pairs [first, first + count) of the ABBA order as one batch.
void run_batch(RunClock& clock, const std::function<void()>& ref,
               const std::function<void()>& cand, size_t first, size_t count,
               std::vector<PairSample>& out, ClockTracker& tracker) {
  const std::vector<Side> order = abba_schedule(first, count);
  for (size_t i = 0; i < order.size(); ++i) clock.enqueue(i, order[i] == Side::ref ? ref : cand);
  std::vector<double> ms, mhz;
  clock.collect(order.size(), ms, mhz);
  for (size_t p = 0; p < count; ++p) {
    PairSample s{};
    for (size_t j = 0; j < 2; ++j) {
      const size_t i = 2 * p + j;
      tracker.observe(mhz[i]);
      if (order[i] == Side::ref) {
        s.ref_ms = ms[i];
        s.ref_mhz = mhz[i];
      } else {
        s.cand_ms = ms[i];
        s.cand_mhz = mhz[i];
      }
    }
    out.push_back(s);
  }
}

struct Usable {
  std::vector<double> ref_ms, cand_ms, ratios;
  size_t throttled_samples = 0, throttled_pairs = 0;
};

// Samples under the throttle threshold (against the run's maximum as it stands now, so early
// pairs are judged like late ones) are counted. A pair is left out only when its clock ratio
// strays from the median ratio of the point's pairs: one of its runs caught a transient and
// its time ratio would measure that, not the code. Runs slowed alike stay (heavy tensor-core
// forwards run power-capped well under the peak clock: case 10 on the H200 at 1.5-1.7 GHz
// against 1.98), and so does a steady difference between baseline and candidate.
Usable usable_pairs(const std::vector<PairSample>& pairs, const ClockTracker& tracker) {
  Usable u;
  std::vector<double> clock_ratios;
  for (const PairSample& p : pairs)
    if (std::isfinite(p.ref_mhz) && std::isfinite(p.cand_mhz) && p.ref_mhz > 0)
      clock_ratios.push_back(p.cand_mhz / p.ref_mhz);
  const double typical = clock_ratios.empty() ? std::numeric_limits<double>::quiet_NaN()
                                              : stats::median(clock_ratios);
  for (const PairSample& p : pairs) {
    const bool tr = tracker.throttled(p.ref_mhz), tc = tracker.throttled(p.cand_mhz);
    u.throttled_samples += static_cast<size_t>(tr) + static_cast<size_t>(tc);
    if (tracker.clocks_stray(p.ref_mhz, p.cand_mhz, typical)) {
      ++u.throttled_pairs;
      continue;
    }
    u.ref_ms.push_back(p.ref_ms);
    u.cand_ms.push_back(p.cand_ms);
    u.ratios.push_back(p.cand_ms > 0 ? p.ref_ms / p.cand_ms
                                     : std::numeric_limits<double>::infinity());
  }
  return u;
}

// Warm-up. The baseline has just been timed against the previous configuration (or run by the
// group's setup), so warmup_ref_runs runs bring it back; the candidate was just built:
// >= warmup_min_runs runs (its prior ones counted) and >= warmup_min_ms of device time, in
// batches sized by the first one. The first batch (two runs, or fewer where the run count
// needs fewer: a forward of 100 ms is not run twice to warm up for 5) also tells how long a
// forward takes, which sizes the rest. False when abandoned.
bool warm_up(RunClock& clock, const std::function<void()>& ref, const std::function<void()>& cand,
             const TimerOptions& opt, ClockTracker& tracker, const std::function<bool()>& abandoned,
             std::vector<double>& warm_ref, std::vector<double>& warm_cand) {
  double cand_sum = 0;
  bool first = true;
  const auto runs = [&] { return opt.warmup_prior_runs + warm_cand.size(); };
  const auto runs_missing = [&] { return opt.warmup_min_runs > runs() ? opt.warmup_min_runs - runs() : 0; };
  while (first || runs() < opt.warmup_min_runs || cand_sum < opt.warmup_min_ms) {
    if (abandoned()) return false;
    const size_t refs = first ? opt.warmup_ref_runs : 0;
    size_t cands = std::clamp<size_t>(runs_missing(), 1, 2);
    if (!first) {
      const double per_run = std::max(cand_sum / static_cast<double>(warm_cand.size()), 1e-4);
      const auto by_time =
          static_cast<size_t>(std::ceil(std::max(opt.warmup_min_ms - cand_sum, 0.0) / per_run));
      cands = std::clamp<size_t>(std::max(by_time, runs_missing()), 1, 256);
    }
    for (size_t i = 0; i < refs + cands; ++i) clock.enqueue(i, i < refs ? ref : cand);
    std::vector<double> ms, mhz;
    clock.collect(refs + cands, ms, mhz);
    for (size_t i = 0; i < refs + cands; ++i) {
      tracker.observe(mhz[i]);
      if (i < refs) {
        warm_ref.push_back(ms[i]);
      } else {
        warm_cand.push_back(ms[i]);
        cand_sum += ms[i];
      }
    }
    first = false;
  }
  return true;
}

// How many pairs the next batch times: a batch, cut to the pair limit and to the time budget
// (past the budget only what the floor still needs).
size_t next_batch(const stats::StoppingRule& rule, size_t batch_pairs, size_t attempted,
                  size_t usable, double elapsed_ms, double pair_ms) {
  size_t count = batch_pairs;
  if (attempted + count > rule.max_pairs) count = rule.max_pairs - attempted;
  if (elapsed_ms >= rule.budget_ms) {
    const size_t floor = std::min(rule.floor_pairs, rule.min_pairs);
    count = std::min(count, std::max<size_t>(floor > usable ? floor - usable : 1, 1));
  } else {
    // Do not overshoot the budget by more than a pair's worth.
    const double left = rule.budget_ms - elapsed_ms;
    const size_t fit = static_cast<size_t>(std::max(1.0, std::ceil(left / pair_ms)));
    count = std::min(count, fit);
  }
  return std::max<size_t>(count, 1);
}

// The usable pairs' statistics and the SM clock range over every pair attempted.
void summarize_pairs(const std::vector<PairSample>& pairs, const ClockTracker& tracker,
                     double confidence, PairedMeasurement& r) {
  const Usable u = usable_pairs(pairs, tracker);
  r.speedup = stats::median_interval(u.ratios, confidence);
  r.ref = stats::summarize(u.ref_ms);
  r.cand = stats::summarize(u.cand_ms);
  r.pairs = u.ratios.size();
  r.pairs_attempted = pairs.size();
  r.throttled_samples = u.throttled_samples;
  r.throttled_pairs = u.throttled_pairs;
  double mn = std::numeric_limits<double>::infinity(), mx = -mn;
  for (const PairSample& s : pairs)
    for (double f : {s.ref_mhz, s.cand_mhz})
      if (std::isfinite(f)) {
        mn = std::min(mn, f);
        mx = std::max(mx, f);
      }
  r.min_mhz = std::isfinite(mn) ? mn : kNaN;
  r.max_mhz = std::isfinite(mx) ? mx : kNaN;
  r.ref_samples = u.ref_ms;
  r.cand_samples = u.cand_ms;
  r.ratio_samples = u.ratios;
}

}  // namespace

PairedMeasurement measure_paired(RunClock& clock, const std::function<void()>& ref,
                                 const std::function<void()>& cand, const TimerOptions& opt,
                                 ClockTracker& tracker, const std::function<bool()>& abandon) {
  PairedMeasurement r;
  const double t0 = clock.now_ms();
  const std::function<bool()> abandoned = [&] { return abandon && abandon(); };

  std::vector<double> warm_ref, warm_cand;
  if (!warm_up(clock, ref, cand, opt, tracker, abandoned, warm_ref, warm_cand)) {
    r.stop = stats::StopReason::interrupted;
    r.elapsed_ms = clock.now_ms() - t0;
    return r;
  }
  r.warmup_runs = opt.warmup_prior_runs + warm_cand.size();
  r.warmup_ref_runs = warm_ref.size();

  // Pairs per batch: about batch_target_ms of device work, an even count so each batch is
  // whole ABBA blocks. Without a baseline warm-up run its time is the one the group measured,
  // or, where none is known, taken as the candidate's.
  const double cand_ms = stats::median(warm_cand);
  const double ref_ms = !warm_ref.empty()     ? stats::median(warm_ref)
                        : opt.baseline_ms > 0 ? opt.baseline_ms
                                              : cand_ms;
  const double pair_ms = std::max(ref_ms + cand_ms, 1e-4);
  size_t batch_pairs = static_cast<size_t>(std::llround(opt.batch_target_ms / pair_ms));
  batch_pairs = std::clamp<size_t>(batch_pairs + (batch_pairs % 2), 2, 256);

  std::vector<PairSample> pairs;
  size_t usable = 0;
  for (;;) {
    if (abandoned()) {
      r.stop = stats::StopReason::interrupted;
      break;
    }
    const size_t count =
        next_batch(opt.stop, batch_pairs, pairs.size(), usable, clock.now_ms() - t0, pair_ms);
    run_batch(clock, ref, cand, pairs.size(), count, pairs, tracker);
    const Usable u = usable_pairs(pairs, tracker);
    usable = u.ratios.size();
    r.speedup = stats::median_interval(u.ratios, opt.confidence);
    r.stop = stats::should_stop(opt.stop, r.speedup, usable, pairs.size(), clock.now_ms() - t0);
    if (r.stop != stats::StopReason::running) break;
  }

  summarize_pairs(pairs, tracker, opt.confidence, r);
  r.elapsed_ms = clock.now_ms() - t0;
  return r;
}

PairedMeasurement pool_blocks(const std::vector<PairedMeasurement>& blocks, double confidence) {
  PairedMeasurement r;
  if (blocks.empty()) return r;
  if (blocks.size() == 1) return blocks.front();
  double mn = std::numeric_limits<double>::infinity(), mx = -mn;
  r.stop = stats::StopReason::converged;
  for (const PairedMeasurement& b : blocks) {
    r.ref_samples.insert(r.ref_samples.end(), b.ref_samples.begin(), b.ref_samples.end());
    r.cand_samples.insert(r.cand_samples.end(), b.cand_samples.begin(), b.cand_samples.end());
    r.ratio_samples.insert(r.ratio_samples.end(), b.ratio_samples.begin(), b.ratio_samples.end());
    r.pairs += b.pairs;
    r.pairs_attempted += b.pairs_attempted;
    r.throttled_samples += b.throttled_samples;
    r.throttled_pairs += b.throttled_pairs;
    r.warmup_runs += b.warmup_runs;
    r.warmup_ref_runs += b.warmup_ref_runs;
    r.elapsed_ms += b.elapsed_ms;
    if (std::isfinite(b.min_mhz)) mn = std::min(mn, b.min_mhz);
    if (std::isfinite(b.max_mhz)) mx = std::max(mx, b.max_mhz);
    if (r.stop == stats::StopReason::converged) r.stop = b.stop;
  }
  r.speedup = stats::median_interval(r.ratio_samples, confidence);
  r.ref = stats::summarize(r.ref_samples);
  r.cand = stats::summarize(r.cand_samples);
  r.min_mhz = std::isfinite(mn) ? mn : kNaN;
  r.max_mhz = std::isfinite(mx) ? mx : kNaN;
  return r;
}

std::vector<double> block_medians(const std::vector<PairedMeasurement>& blocks) {
  std::vector<double> m;
  for (const PairedMeasurement& b : blocks) m.push_back(b.pairs > 0 ? b.speedup.median : kNaN);
  return m;
}

double block_spread(const std::vector<PairedMeasurement>& blocks) {
  return stats::block_log_sd(block_medians(blocks));
}

}  // namespace tlb
