// What every benchmark of tlbench_kernel_bench times with: random device data, medians of
// event-timed runs taking turns, a sustained warm-up, per-call times inside a CUDA graph, and
// the names the tables print.
#pragma once

#include <cuda_runtime.h>
#include <library_types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/device_buffer.hpp"
#include "common/types.hpp"
#include "timing/energy_meter.hpp"

namespace tlb::bench {

// Random values in [-scale, scale), rounded to the dtype, uploaded once.
DeviceBuffer random_buffer(size_t elems, DType dt, float scale, uint64_t seed);

using Timed = std::function<void(cudaStream_t)>;

// Median event-timed milliseconds of each of `fns`, after three warm-up calls of each. The
// functions take turns, in an order reversed every round (A B, B A, ...), so that clock
// ramping and the power limit's drift land on all of them alike.
std::vector<double> median_ms_each(const std::vector<Timed>& fns, cudaStream_t st, int reps);

// What a function's timing holds besides the GPU's work: the host's launches too (`timed`:
// the events around a call, as a caller sees it), or the GPU's execution alone (`hidden`: the
// work queues behind a LaunchHold and runs back to back, as inside a replayed CUDA graph).
enum class HostLaunches { timed, hidden };
struct MedianTimes {
  std::vector<double> ms;
  // Whether the `hidden` ones were held. Not under synchronised launch checks
  // (TLBENCH_SYNC_LAUNCHES, debug builds) or launches the driver blocks on (a profiler's
  // serialised kernels, CUDA_LAUNCH_BLOCKING): there every launch would wait out the hold, so
  // they are timed with their launches, and a line says so.
  bool held = false;
};
// The same, each function timed as `launches` says (one entry per function), after its entry
// of `setups` where there is one: work on the same stream before the timing starts (and
// before a launch hold), untimed, that leaves the GPU as the function finds it in its real
// context (a stage's input just written, in L2).
MedianTimes median_ms_each(const std::vector<Timed>& fns, cudaStream_t st, int reps,
                           const std::vector<HostLaunches>& launches, const std::vector<Timed>& setups = {});
double median_ms(const Timed& fn, cudaStream_t st, int reps = 20);

// Runs fn back to back for `seconds` of wall time: a card that was idle (or busy with other
// work) reaches the clocks and temperature of sustained load before the first timing.
void warm_up(const Timed& fn, cudaStream_t st, double seconds);

// `fn` run alone, back to back, for `seconds` after a warm-up half as long, as a kernel runs
// inside a long job: its device time a call, the SM clock it holds there (the median of the
// clock probes run after every batch of calls of about 2 ms, a 10 us probe each, counted in
// the time), and with a meter the energy a call, the mean power over the run and how often
// each clock-event reason was active (NVML read while each batch runs).
struct Sustained {
  double ms = 0;
  double sm_mhz = 0;
  double mj = -1;  // per call; negative where there was no meter or it did not read
  double watts = -1;
  ClockEventTally clock_events;  // no samples where there was no meter or it does not say
};
Sustained sustained_run(const Timed& fn, cudaStream_t st, double seconds, const EnergyMeter* meter);

// Microseconds per call of `fn` when `calls` of them are captured in one CUDA graph and the
// graph is replayed: what a launch costs inside a captured stack, gaps included.
double graph_us_per_call(const Timed& fn, cudaStream_t st, int calls = 20);

cudaDataType_t cuda_type(DType d);

// A dtype as the tables print it: fp32 with its math ("fp32-tf32", "fp32-ieee").
std::string dtype_name(DType dt, Fp32Math math);

}  // namespace tlb::bench
