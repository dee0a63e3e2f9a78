// The one way to check CUDA and cuBLAS calls: every call goes through TLB_CUDA_CHECK /
// TLB_CUBLAS_CHECK, every launch is followed by TLB_LAUNCH_CHECK. Failures throw
// tlb::DeviceError, which the runner turns into a clean stop (exit code 3).
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace tlb {

class DeviceError : public std::runtime_error {
 public:
  DeviceError(const std::string& what, bool sticky) : std::runtime_error(what), sticky_(sticky) {}
  // A sticky error (illegal address, launch failure) poisons the context: nothing more can run.
  bool sticky() const { return sticky_; }

 private:
  bool sticky_;
};

// An allocation that failed: the runner marks the point `oom` and goes on.
class DeviceOutOfMemory : public DeviceError {
 public:
  explicit DeviceOutOfMemory(const std::string& what) : DeviceError(what, false) {}
};

[[noreturn]] void throw_cuda_error(cudaError_t e, const char* expr, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t s, const char* expr, const char* file, int line);
void check_launch(cudaStream_t stream, const char* file, int line);
// True when synchronising after each launch is wanted: debug builds, or TLBENCH_SYNC_LAUNCHES=1
// in the environment (the tests set it).
bool sync_launches();
// Bytes in use on the current device, every allocation of every user (cudaMemGetInfo).
uint64_t device_used_bytes();

}  // namespace tlb

#define TLB_CUDA_CHECK(expr)                                                  \
  do {                                                                        \
    cudaError_t tlb_err_ = (expr);                                            \
    if (tlb_err_ != cudaSuccess) ::tlb::throw_cuda_error(tlb_err_, #expr, __FILE__, __LINE__); \
  } while (0)

#define TLB_CUBLAS_CHECK(expr)                                                \
  do {                                                                        \
    cublasStatus_t tlb_st_ = (expr);                                          \
    if (tlb_st_ != CUBLAS_STATUS_SUCCESS)                                     \
      ::tlb::throw_cublas_error(tlb_st_, #expr, __FILE__, __LINE__);          \
  } while (0)

// After every kernel launch on `stream`.
#define TLB_LAUNCH_CHECK(stream) ::tlb::check_launch((stream), __FILE__, __LINE__)
