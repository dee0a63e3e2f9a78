// Where a result came from: the device, its clocks and memory, the driver, CUDA runtime and
// cuBLAS versions, and the tool's own version and commit. `tlbench info` prints it and every
// run.json records it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace tlb {

// Whether a CUDA device can be used; `why` says why not ("no CUDA device: ...").
bool cuda_device_present(std::string* why);

struct DeviceInfo {
  int index = 0;
  std::string name;
  std::string uuid;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  uint64_t memory_total = 0, memory_free = 0;
  int l2_bytes = 0;
  int sm_clock_khz = 0;       // peak SM clock
  int memory_clock_khz = 0;   // peak memory clock
  int memory_bus_bits = 0;
  int ecc = 0;
  int driver_version = 0;     // e.g. 13000
  int runtime_version = 0;
  int cublas_major = 0, cublas_minor = 0, cublas_patch = 0;
  // How our kernels launch here, which the results depend on: programmatic dependent launch
  // (off below compute capability 9.0 or with TLBENCH_PDL=0; "default": every kernel but the
  // persistent GEMM's long grids, "all" with TLBENCH_PDL=all), TLBENCH_GEMM_VARIANT and
  // TLBENCH_GEMM_STORE. run.json also says `pdl`: whether it is on at all, i.e. pdl_mode is
  // not "off".
  std::string pdl_mode = "off";
  std::string gemm_variant = "auto";
  std::string gemm_store = "auto";
};
// Throws DeviceError when the device cannot be queried.
DeviceInfo query_device(int index = 0);

// 13000 -> "13.0"; 12080 -> "12.8".
std::string cuda_version_string(int v);

nlohmann::json to_json(const DeviceInfo& d);
// {"name": "tlbench", "version": ..., "git_commit": ...}
nlohmann::json tool_json();

// The host side of a measurement, which an eager forward's launch rate depends on: the CPU
// model, the logical CPUs and how many this process may run on, the CPU it runs on now and
// that CPU's NUMA node, the NUMA node of CUDA device `device` (-1 where the platform does not
// say), and the load average when asked. Read from Linux's /proc and /sys; a field that
// cannot be read is null.
nlohmann::json host_json(int device);

}  // namespace tlb
