#include "common/launch.hpp"

#include <cuda_runtime.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "common/cuda_check.hpp"

namespace tlb {

bool pdl_enabled() {
  constexpr int kMaxDevices = 64;
  static std::array<signed char, kMaxDevices> cache{};  // 0 unknown, 1 on, -1 off
  static std::mutex mu;
  int dev = 0;
  TLB_CUDA_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  signed char& c = cache[static_cast<size_t>(dev % kMaxDevices)];
  if (c == 0) {
    int major = 0;
    TLB_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    const char* env = std::getenv("TLBENCH_PDL");
    const bool off = env != nullptr && std::strcmp(env, "0") == 0;
    c = (major >= 9 && !off) ? 1 : -1;
  }
  return c > 0;
}

}  // namespace tlb
