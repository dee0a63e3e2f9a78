#include "timing/event_timer.hpp"

#include "common/cuda_check.hpp"

namespace tlb {

EventTimer::EventTimer(cudaStream_t stream) : stream_(stream) {
  TLB_CUDA_CHECK(cudaEventCreate(&start_));
  TLB_CUDA_CHECK(cudaEventCreate(&stop_));
}

EventTimer::~EventTimer() {
  cudaEventDestroy(start_);
  cudaEventDestroy(stop_);
}

double EventTimer::ms(const std::function<void()>& work) {
  TLB_CUDA_CHECK(cudaEventRecord(start_, stream_));
  work();
  TLB_CUDA_CHECK(cudaEventRecord(stop_, stream_));
  TLB_CUDA_CHECK(cudaEventSynchronize(stop_));
  float t = 0;
  TLB_CUDA_CHECK(cudaEventElapsedTime(&t, start_, stop_));
  return t;
}

}  // namespace tlb
