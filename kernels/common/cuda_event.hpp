// RAII owner of one CUDA event (timing events unless other flags are given). Movable, so a
// vector of them holds a batch of markers; destroying one of a faulted context is not checked
// (the error would say nothing new).
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "common/cuda_check.hpp"

namespace tlb {

class CudaEvent {
 public:
  explicit CudaEvent(unsigned flags = cudaEventDefault) { TLB_CUDA_CHECK(cudaEventCreateWithFlags(&e_, flags)); }
  ~CudaEvent() {
    if (e_) cudaEventDestroy(e_);
  }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  CudaEvent(CudaEvent&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
  CudaEvent& operator=(CudaEvent&& o) noexcept {
    if (this != &o) {
      if (e_) cudaEventDestroy(e_);
      e_ = std::exchange(o.e_, nullptr);
    }
    return *this;
  }

  cudaEvent_t get() const { return e_; }
  operator cudaEvent_t() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

// The device time between two recorded events, in ms (the second must have completed).
inline double elapsed_ms(cudaEvent_t from, cudaEvent_t to) {
  float ms = 0;
  TLB_CUDA_CHECK(cudaEventElapsedTime(&ms, from, to));
  return ms;
}

}  // namespace tlb
