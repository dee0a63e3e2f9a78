#include "timing/event_timer.hpp"

#include "common/cuda_check.hpp"
#include "timing/launch_hold.hpp"

namespace tlb {

EventTimer::EventTimer(cudaStream_t stream) : stream_(stream) {}

double EventTimer::ms(const std::function<void()>& work, LaunchHold* hold) {
  if (hold) hold->hold(stream_);
  TLB_CUDA_CHECK(cudaEventRecord(start_, stream_));
  work();
  TLB_CUDA_CHECK(cudaEventRecord(stop_, stream_));
  if (hold) hold->release();
  TLB_CUDA_CHECK(cudaEventSynchronize(stop_));
  if (hold && hold->timed_out()) {
    // Not sticky: the stream ran on once the hold gave up; only this timing is spoilt.
    throw DeviceError("a timing behind a launch hold waited on the host for its second (more launches "
                      "than the queue holds, or a synchronising call among them): not measured",
                      false);
  }
  return elapsed_ms(start_, stop_);
}

}  // namespace tlb
