// What one CUDA event costs the GPU between two kernels, measured apart from any workload.
// An event between two kernels holds the second back until the event is recorded: 2-3 us on
// an H100 or H200. Stage timing (ablation/stage_timing.hpp) reads that cost off the forward it
// times, as the difference between the forward with an event before every stage and with one
// before every layer; on a forward of tens of milliseconds that difference, a few tens of
// microseconds, is inside the forward's own run-to-run noise. This probe measures it where
// nothing else moves: a CUDA graph of kEventProbeKernels one-warp kernels with an event node
// after each, replayed in turns with the same chain without them, both behind a launch hold
// (launch_hold.hpp) where one works; each pair's difference, per event (the caller takes the
// median: ablation/stage_timing.hpp). It is
// an event node's cost in a replayed graph; an eager forward's events are stream records,
// taken to cost the same (the probe is asked for long forwards, where a microsecond either
// way is far below the stages' own noise).
#pragma once

#include <cuda_runtime.h>

#include <vector>

namespace tlb {

inline constexpr int kEventProbeKernels = 64;

// One event's cost in ms as each of `pairs` (at least one) timings of the two chains in turns
// read it (noise may put one below zero). Synchronises.
std::vector<double> probe_event_costs_ms(cudaStream_t stream, int pairs = 15);

namespace detail {
// A kernel that does nothing (one warp), the chain's link.
void launch_empty_kernel(cudaStream_t stream);
}  // namespace detail

}  // namespace tlb
