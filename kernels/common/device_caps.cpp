#include "common/device_caps.hpp"

#include <cuda_runtime.h>

#include <array>
#include <mutex>

#include "common/cuda_check.hpp"

namespace tlb {

const DeviceCaps& device_caps() {
  constexpr int kMaxDevices = 64;
  static std::array<DeviceCaps, kMaxDevices> cache{};
  static std::mutex mu;
  int dev = 0;
  TLB_CUDA_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  DeviceCaps& d = cache[static_cast<size_t>(dev % kMaxDevices)];
  if (d.sms == 0) {
    TLB_CUDA_CHECK(cudaDeviceGetAttribute(&d.major, cudaDevAttrComputeCapabilityMajor, dev));
    TLB_CUDA_CHECK(cudaDeviceGetAttribute(&d.minor, cudaDevAttrComputeCapabilityMinor, dev));
    TLB_CUDA_CHECK(cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, dev));
  }
  return d;
}

}  // namespace tlb
