#include "common/launch.hpp"

#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>

#include "common/cuda_check.hpp"
#include "common/device_caps.hpp"

namespace tlb {

namespace {

// Built like every kernel of the library: its image tells which code the device runs.
__global__ void pdl_probe_kernel() {}

enum class PdlMode : signed char { unknown = 0, off, on, all };

// What TLBENCH_PDL asks for: "0" off, "all" every kernel, unset, empty or "default" the
// default (on); anything else is refused, as the other TLBENCH_ switches refuse theirs.
PdlMode pdl_setting() {
  const char* env = std::getenv("TLBENCH_PDL");
  if (env == nullptr || *env == '\0' || std::strcmp(env, "default") == 0) return PdlMode::on;
  if (std::strcmp(env, "0") == 0) return PdlMode::off;
  if (std::strcmp(env, "all") == 0) return PdlMode::all;
  throw std::invalid_argument(std::string("TLBENCH_PDL: unknown value '") + env + "' (expected 0, all or default)");
}

// The setting where the device and the build allow PDL at all, per device. Asked at every
// launch: after the first, a lock-free read.
PdlMode pdl_mode() {
  constexpr int kMaxDevices = 64;
  static std::array<std::atomic<PdlMode>, kMaxDevices> cache{};
  static std::mutex mu;
  int dev = 0;
  TLB_CUDA_CHECK(cudaGetDevice(&dev));
  std::atomic<PdlMode>& slot = cache[static_cast<size_t>(dev % kMaxDevices)];
  PdlMode m = slot.load(std::memory_order_acquire);
  if (m != PdlMode::unknown) return m;
  std::lock_guard<std::mutex> lock(mu);
  m = slot.load(std::memory_order_relaxed);
  if (m == PdlMode::unknown) {
    const int major = device_caps().major;
    // The kernels wait for their predecessor with griddepcontrol.wait, which only sm_90+ code
    // carries: a device running PTX of an older target (a build for 80 only, or a newer GPU
    // without a matching image) has kernels that would not wait, so PDL stays off there.
    cudaFuncAttributes attr{};
    TLB_CUDA_CHECK(cudaFuncGetAttributes(&attr, pdl_probe_kernel));
    const bool code_waits = attr.binaryVersion >= 90 && attr.ptxVersion >= 90;
    m = major >= 9 && code_waits ? pdl_setting() : PdlMode::off;
    slot.store(m, std::memory_order_release);
  }
  return m;
}

std::atomic<int> pdl_suspensions{0};

}  // namespace

void check_pdl_setting() { pdl_setting(); }

PdlSuspension::PdlSuspension() { pdl_suspensions.fetch_add(1); }
PdlSuspension::~PdlSuspension() { pdl_suspensions.fetch_sub(1); }

bool pdl_enabled() {
  const bool allowed = pdl_mode() != PdlMode::off;  // first: it checks TLBENCH_PDL
  return allowed && pdl_suspensions.load() == 0;
}

bool pdl_for_every_kernel() { return pdl_mode() == PdlMode::all; }

const char* pdl_mode_name() {
  switch (pdl_mode()) {
    case PdlMode::off: return "off";
    case PdlMode::all: return "all";
    default: return "default";
  }
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
