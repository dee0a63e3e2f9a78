#include "common/launch.hpp"

#include <cuda_runtime.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <tuple>

#include "common/cuda_check.hpp"
#include "common/device_caps.hpp"

namespace tlb {

namespace {

// Built like every kernel of the library: its image tells which code the device runs.
__global__ void pdl_probe_kernel() {}

}  // namespace

bool pdl_enabled() {
  constexpr int kMaxDevices = 64;
  static std::array<signed char, kMaxDevices> cache{};  // 0 unknown, 1 on, -1 off
  static std::mutex mu;
  int dev = 0;
  TLB_CUDA_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  signed char& c = cache[static_cast<size_t>(dev % kMaxDevices)];
  if (c == 0) {
    const int major = device_caps().major;
    // The kernels wait for their predecessor with griddepcontrol.wait, which only sm_90+ code
    // carries: a device running PTX of an older target (a build for 80 only, or a newer GPU
    // without a matching image) has kernels that would not wait, so PDL stays off there.
    cudaFuncAttributes attr{};
    TLB_CUDA_CHECK(cudaFuncGetAttributes(&attr, pdl_probe_kernel));
    const bool code_waits = attr.binaryVersion >= 90 && attr.ptxVersion >= 90;
    const char* env = std::getenv("TLBENCH_PDL");
    const bool off = env != nullptr && std::strcmp(env, "0") == 0;
    c = (major >= 9 && code_waits && !off) ? 1 : -1;
  }
  return c > 0;
}

void allow_dynamic_smem(const void* kernel, int bytes) {
  static std::mutex mu;
  static std::set<std::tuple<const void*, int, int>> done;  // kernel, device, bytes
  int dev = 0;
  TLB_CUDA_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  if (done.emplace(kernel, dev, bytes).second) {
    TLB_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  }
}

}  // namespace tlb
