// The waiting kernel of LaunchHold: one thread polls a host-mapped flag, sleeping between
// reads, until the host sets it or a second has passed (by %globaltimer, and by clock64 in
// case the timer is stuck, as the clock probe guards it too).
#include <atomic>

#include "common/cuda_check.hpp"
#include "common/ptx.cuh"
#include "timing/launch_hold.hpp"

namespace tlb {

namespace {

constexpr unsigned long long kHoldTimeoutNs = 1000ull * 1000 * 1000;
constexpr long long kHoldMaxCycles = 4ll * 1000 * 1000 * 1000;  // 2 s at 2 GHz, 4 s at 1 GHz

__global__ void launch_hold_kernel(volatile int* words) {
  const unsigned long long start = ptx::global_timer_ns();
  const long long start_cycles = clock64();
  while (words[0] == 0) {
    if (ptx::global_timer_ns() - start > kHoldTimeoutNs || clock64() - start_cycles > kHoldMaxCycles) {
      words[1] = 1;
      return;
    }
    __nanosleep(500);
  }
}

}  // namespace

LaunchHold::LaunchHold() {
  void* p = nullptr;
  TLB_CUDA_CHECK(cudaHostAlloc(&p, 2 * sizeof(int), cudaHostAllocMapped));
  words_ = static_cast<volatile int*>(p);
  words_[0] = 1;
  words_[1] = 0;
  const cudaError_t e = cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_words_), p, 0);
  if (e != cudaSuccess) {
    cudaFreeHost(p);
    TLB_CUDA_CHECK(e);
  }
}

// A hold still waiting (its work threw before release()) is let go, and has stopped reading
// its flag, before the page is freed.
LaunchHold::~LaunchHold() {
  release();
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  cudaFreeHost(const_cast<int*>(words_));
}

void LaunchHold::hold(cudaStream_t stream) {
  stream_ = stream;
  words_[0] = 0;
  words_[1] = 0;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  launch_hold_kernel<<<1, 1, 0, stream>>>(device_words_);
  // The launch error only: a synchronised check (TLBENCH_SYNC_LAUNCHES) would wait out the hold.
  TLB_CUDA_CHECK(cudaGetLastError());
}

void LaunchHold::release() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  words_[0] = 1;
}

bool LaunchHold::timed_out() const { return words_[1] != 0; }

bool LaunchHold::works(cudaStream_t stream) {
  if (sync_launches()) return false;
  hold(stream);
  const cudaError_t state = cudaStreamQuery(stream);
  release();
  TLB_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (state != cudaSuccess && state != cudaErrorNotReady) TLB_CUDA_CHECK(state);
  return state == cudaErrorNotReady && !timed_out();
}

}  // namespace tlb
