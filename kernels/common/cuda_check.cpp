#include "common/cuda_check.hpp"

#include <cstdlib>
#include <cstring>

namespace tlb {

namespace {
bool is_sticky(cudaError_t e) {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorMisalignedAddress:
    case cudaErrorIllegalInstruction:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
      return true;
    default:
      return false;
  }
}
}  // namespace

void throw_cuda_error(cudaError_t e, const char* expr, const char* file, int line) {
  std::string msg = std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ") in " +
                    expr + " at " + file + ":" + std::to_string(line);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: clear it so the run can go on
    throw DeviceOutOfMemory(msg);
  }
  throw DeviceError(msg, is_sticky(e));
}

void throw_cublas_error(cublasStatus_t s, const char* expr, const char* file, int line) {
  std::string msg = std::string("cuBLAS ") + cublasGetStatusName(s) + " (" +
                    cublasGetStatusString(s) + ") in " + expr + " at " + file + ":" +
                    std::to_string(line);
  if (s == CUBLAS_STATUS_ALLOC_FAILED) throw DeviceOutOfMemory(msg);
  throw DeviceError(msg, s == CUBLAS_STATUS_EXECUTION_FAILED);
}

bool sync_launches() {
#if defined(TLBENCH_SYNC_LAUNCHES)
  return true;
#else
  static const bool on = [] {
    const char* v = std::getenv("TLBENCH_SYNC_LAUNCHES");
    return v != nullptr && std::strcmp(v, "0") != 0;
  }();
  return on;
#endif
}

void check_launch(cudaStream_t stream, const char* file, int line) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw_cuda_error(e, "kernel launch", file, line);
  if (!sync_launches()) return;
  // Synchronising is illegal while a graph is being captured; the replay is checked instead.
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  TLB_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  if (status != cudaStreamCaptureStatusNone) return;
  e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) throw_cuda_error(e, "kernel execution (synchronised check)", file, line);
}

uint64_t device_used_bytes() {
  size_t free_b = 0, total_b = 0;
  TLB_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return static_cast<uint64_t>(total_b - free_b);
}

}  // namespace tlb
