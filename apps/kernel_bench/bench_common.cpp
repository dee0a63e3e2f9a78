#include "bench_common.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <stdexcept>

#include "common/cuda_check.hpp"
#include "common/cuda_event.hpp"
#include "common/rounding.hpp"
#include "common/stream_graph.hpp"
#include "timing/clock_probe.hpp"
#include "timing/event_timer.hpp"
#include "timing/launch_hold.hpp"

namespace tlb::bench {

DeviceBuffer random_buffer(size_t elems, DType dt, float scale, uint64_t seed) {
  const size_t esz = static_cast<size_t>(tlb::dtype_bytes(dt));
  std::vector<uint8_t> host(elems * esz);
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < elems; ++i) {
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    const float v = scale * (static_cast<float>(s >> 40) / static_cast<float>(1ull << 24) * 2.0f - 1.0f);
    if (dt == DType::fp32) {
      std::memcpy(&host[i * 4], &v, 4);
    } else {
      const uint16_t b = dt == DType::fp16 ? tlb::f32_to_f16_bits(v) : tlb::f32_to_bf16_bits(v);
      std::memcpy(&host[i * 2], &b, 2);
    }
  }
  DeviceBuffer d(host.size());
  TLB_CUDA_CHECK(cudaMemcpy(d.get(), host.data(), host.size(), cudaMemcpyHostToDevice));
  return d;
}

MedianTimes median_ms_each(const std::vector<Timed>& fns, cudaStream_t st, int reps,
                           const std::vector<HostLaunches>& launches, const std::vector<Timed>& setups) {
  if (launches.size() != fns.size()) throw std::logic_error("median_ms_each: one HostLaunches per function");
  if (!setups.empty() && setups.size() != fns.size())
    throw std::logic_error("median_ms_each: no setups, or one (maybe empty) per function");
  for (const Timed& fn : fns)
    for (int i = 0; i < 3; ++i) fn(st);
  TLB_CUDA_CHECK(cudaStreamSynchronize(st));
  MedianTimes out;
  std::optional<LaunchHold> hold;
  if (std::find(launches.begin(), launches.end(), HostLaunches::hidden) != launches.end()) {
    hold.emplace();
    out.held = hold->works(st);
    if (!out.held) {
      static bool said = false;
      if (!said) {
        fmt::print("note: launches synchronise here (TLBENCH_SYNC_LAUNCHES, a debug build or a profiler): "
                   "the work meant to be timed behind a launch hold is timed with its launches\n");
        said = true;
      }
      hold.reset();
    }
  }
  EventTimer timer(st);
  std::vector<std::vector<double>> t(fns.size());
  for (int i = 0; i < reps; ++i) {
    for (size_t j = 0; j < fns.size(); ++j) {
      const size_t f = i % 2 == 0 ? j : fns.size() - 1 - j;
      if (!setups.empty() && setups[f]) setups[f](st);
      const auto work = [&] { fns[f](st); };
      t[f].push_back(timer.ms(work, hold && launches[f] == HostLaunches::hidden ? &*hold : nullptr));
    }
  }
  for (std::vector<double>& v : t) {
    std::sort(v.begin(), v.end());
    out.ms.push_back(v[v.size() / 2]);
  }
  return out;
}

std::vector<double> median_ms_each(const std::vector<Timed>& fns, cudaStream_t st, int reps) {
  return median_ms_each(fns, st, reps, std::vector<HostLaunches>(fns.size(), HostLaunches::timed)).ms;
}

double median_ms(const Timed& fn, cudaStream_t st, int reps) { return median_ms_each({fn}, st, reps)[0]; }

void warm_up(const Timed& fn, cudaStream_t st, double seconds) {
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds) {
    for (int i = 0; i < 4; ++i) fn(st);
    TLB_CUDA_CHECK(cudaStreamSynchronize(st));
  }
}

Sustained sustained_run(const Timed& fn, cudaStream_t st, double seconds, const EnergyMeter* meter) {
  warm_up(fn, st, seconds / 2);
  EventTimer timer(st);
  const double est_ms = std::max(timer.ms([&] { fn(st); }), 1e-3);
  const int batch = std::max(1, static_cast<int>(std::ceil(2.0 / est_ms)));
  // One probe slot per batch; a run of more batches than slots keeps the last ones.
  constexpr int kSlots = 1024;
  DeviceBuffer probes(kSlots * sizeof(ClockProbeSample));
  auto* slots = static_cast<ClockProbeSample*>(probes.get());
  const CudaEvent start, stop, done[2];
  TLB_CUDA_CHECK(cudaStreamSynchronize(st));
  // The counter in mJ, or -1 without one.
  const auto read_mj = [&]() -> long long {
    const std::optional<unsigned long long> e = meter ? meter->energy_mj() : std::nullopt;
    return e ? static_cast<long long>(*e) : -1;
  };
  const long long e0 = read_mj();
  const auto wall0 = std::chrono::steady_clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count(); };
  TLB_CUDA_CHECK(cudaEventRecord(start, st));
  Sustained out;
  int batches = 0;
  // Two batches in flight: the host queues one while the GPU runs the other.
  while (batches < 2 || elapsed() < seconds) {
    for (int i = 0; i < batch; ++i) fn(st);
    launch_clock_probe(slots + batches % kSlots, kClockProbeSpinNs, st);
    TLB_CUDA_CHECK(cudaEventRecord(done[batches % 2], st));
    if (batches > 0) {
      TLB_CUDA_CHECK(cudaEventSynchronize(done[(batches - 1) % 2]));
      // The batch just queued is running now: why the clock is where it is.
      if (const std::optional<unsigned long long> r = meter ? meter->clock_event_reasons() : std::nullopt)
        out.clock_events.add(*r);
    }
    ++batches;
  }
  TLB_CUDA_CHECK(cudaEventRecord(stop, st));
  TLB_CUDA_CHECK(cudaEventSynchronize(stop));
  const long long e1 = read_mj();
  const double wall = elapsed();
  const int calls = batches * batch;
  out.ms = elapsed_ms(start, stop) / calls;
  std::vector<ClockProbeSample> host(static_cast<size_t>(std::min(batches, kSlots)));
  TLB_CUDA_CHECK(cudaMemcpy(host.data(), slots, host.size() * sizeof(ClockProbeSample), cudaMemcpyDeviceToHost));
  std::vector<double> mhz;
  for (const ClockProbeSample& p : host)
    if (const double f = clock_probe_mhz(p); !std::isnan(f)) mhz.push_back(f);
  std::sort(mhz.begin(), mhz.end());
  out.sm_mhz = mhz.empty() ? std::nan("") : mhz[mhz.size() / 2];
  if (e0 >= 0 && e1 >= e0) {
    out.mj = static_cast<double>(e1 - e0) / calls;
    out.watts = static_cast<double>(e1 - e0) / 1000.0 / wall;
  }
  return out;
}

double graph_us_per_call(const Timed& fn, cudaStream_t st, int calls) {
  const StreamGraph graph(st, [&] {
    for (int i = 0; i < calls; ++i) fn(st);
  });
  const double ms = median_ms([&](cudaStream_t s) { graph.launch(s); }, st, 30);
  return 1000.0 * ms / calls;
}

cudaDataType_t cuda_type(DType d) {
  return d == DType::fp16 ? CUDA_R_16F : d == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F;
}

std::string dtype_name(DType dt, Fp32Math math) {
  return dt == DType::fp32 ? fmt::format("fp32-{}", to_string(math)) : std::string(to_string(dt));
}

}  // namespace tlb::bench
