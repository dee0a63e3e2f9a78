// Device time of enqueued work between two CUDA events on one stream: ms(work) records an
// event, lets `work` enqueue, records another and waits for it. Synchronises every call, so it
// times one piece of work at a time (the runner's batched, paired timing is paired_timer's).
#pragma once

#include <cuda_runtime.h>

#include <functional>

#include "common/cuda_event.hpp"

namespace tlb {

class LaunchHold;

class EventTimer {
 public:
  explicit EventTimer(cudaStream_t stream);
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  // The work's time on the stream; where `hold` is given, with the work queued behind it
  // (launch_hold.hpp): the GPU's time of it, not the host's launches. Throws a non-sticky
  // DeviceError where the hold gave up waiting for the host.
  double ms(const std::function<void()>& work, LaunchHold* hold = nullptr);

 private:
  cudaStream_t stream_;
  CudaEvent start_, stop_;
};

}  // namespace tlb
