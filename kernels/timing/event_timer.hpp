// Device time of enqueued work between two CUDA events on one stream: ms(work) records an
// event, lets `work` enqueue, records another and waits for it. Synchronises every call, so it
// times one piece of work at a time (the runner's batched, paired timing is paired_timer's).
#pragma once

#include <cuda_runtime.h>

#include <functional>

namespace tlb {

class EventTimer {
 public:
  explicit EventTimer(cudaStream_t stream);
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  double ms(const std::function<void()>& work);

 private:
  cudaStream_t stream_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace tlb
