#include "provenance.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <fmt/core.h>
#include <library_types.h>
#include <sched.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "common/cuda_check.hpp"
#include "common/launch.hpp"
#include "gemm/gemm.hpp"
#include "tlbench_version.hpp"

namespace tlb {

bool cuda_device_present(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = fmt::format("no CUDA device: {} ({})", cudaGetErrorString(e), cudaGetErrorName(e));
    cudaGetLastError();
    return false;
  }
  if (n == 0) {
    if (why) *why = "no CUDA device: the driver reports none";
    return false;
  }
  return true;
}

DeviceInfo query_device(int index) {
  DeviceInfo d;
  d.index = index;
  cudaDeviceProp prop{};
  TLB_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  d.name = prop.name;
  {
    std::string u = "GPU-";
    const auto* b = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
    for (int i = 0; i < 16; ++i) {
      if (i == 4 || i == 6 || i == 8 || i == 10) u += '-';
      u += fmt::format("{:02x}", b[i]);
    }
    d.uuid = u;
  }
  d.cc_major = prop.major;
  d.cc_minor = prop.minor;
  auto attr = [&](cudaDeviceAttr a) {
    int v = 0;
    TLB_CUDA_CHECK(cudaDeviceGetAttribute(&v, a, index));
    return v;
  };
  d.sm_count = attr(cudaDevAttrMultiProcessorCount);
  d.l2_bytes = attr(cudaDevAttrL2CacheSize);
  d.sm_clock_khz = attr(cudaDevAttrClockRate);
  d.memory_clock_khz = attr(cudaDevAttrMemoryClockRate);
  d.memory_bus_bits = attr(cudaDevAttrGlobalMemoryBusWidth);
  d.ecc = attr(cudaDevAttrEccEnabled);
  int current = 0;
  TLB_CUDA_CHECK(cudaGetDevice(&current));
  TLB_CUDA_CHECK(cudaSetDevice(index));
  size_t free_b = 0, total_b = 0;
  TLB_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  d.pdl_mode = pdl_mode_name();
  TLB_CUDA_CHECK(cudaSetDevice(current));
  d.memory_free = free_b;
  d.memory_total = total_b;
  TLB_CUDA_CHECK(cudaDriverGetVersion(&d.driver_version));
  TLB_CUDA_CHECK(cudaRuntimeGetVersion(&d.runtime_version));
  TLB_CUBLAS_CHECK(cublasGetProperty(MAJOR_VERSION, &d.cublas_major));
  TLB_CUBLAS_CHECK(cublasGetProperty(MINOR_VERSION, &d.cublas_minor));
  TLB_CUBLAS_CHECK(cublasGetProperty(PATCH_LEVEL, &d.cublas_patch));
  const char* variant = std::getenv("TLBENCH_GEMM_VARIANT");
  if (variant != nullptr && *variant != '\0') d.gemm_variant = variant;
  d.gemm_store = gemm_store_mode();  // refuses an unknown TLBENCH_GEMM_STORE before any run
  return d;
}

std::string cuda_version_string(int v) {
  return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}

nlohmann::json to_json(const DeviceInfo& d) {
  return {
      {"index", d.index},
      {"name", d.name},
      {"uuid", d.uuid},
      {"compute_capability", fmt::format("{}.{}", d.cc_major, d.cc_minor)},
      {"sm_count", d.sm_count},
      {"memory_total_bytes", d.memory_total},
      {"memory_free_bytes", d.memory_free},
      {"l2_bytes", d.l2_bytes},
      {"sm_clock_peak_mhz", d.sm_clock_khz / 1000.0},
      {"memory_clock_peak_mhz", d.memory_clock_khz / 1000.0},
      {"memory_bus_bits", d.memory_bus_bits},
      // DDR: two transfers per clock.
      {"memory_bandwidth_peak_gb_s",
       2.0 * d.memory_clock_khz * 1e3 * (d.memory_bus_bits / 8.0) / 1e9},
      {"ecc", d.ecc != 0},
      {"driver_version", cuda_version_string(d.driver_version)},
      {"runtime_version", cuda_version_string(d.runtime_version)},
      {"cublas_version", fmt::format("{}.{}.{}", d.cublas_major, d.cublas_minor, d.cublas_patch)},
      {"kernel_launch", {{"pdl", d.pdl_mode != "off"}, {"pdl_mode", d.pdl_mode}, {"gemm_variant", d.gemm_variant}, {"gemm_store", d.gemm_store}}},
  };
}

namespace {

std::string first_line(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

// The NUMA node of a CPU: the nodeN entry of its sysfs folder.
std::optional<int> cpu_numa_node(int cpu) {
  std::error_code ec;
  const std::filesystem::path dir = fmt::format("/sys/devices/system/cpu/cpu{}", cpu);
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("node", 0) == 0 && name.size() > 4 && std::isdigit(static_cast<unsigned char>(name[4])))
      return std::stoi(name.substr(4));
  }
  return std::nullopt;
}

}  // namespace

nlohmann::json host_json(int device) {
  nlohmann::json h;
  h["cpu_model"] = nullptr;
  {
    std::ifstream f("/proc/cpuinfo");
    for (std::string line; std::getline(f, line);)
      if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
        h["cpu_model"] = line.substr(line.find(':') + 2);
        break;
      }
  }
  h["logical_cpus"] = std::thread::hardware_concurrency();
  cpu_set_t set;
  CPU_ZERO(&set);
  h["cpus_allowed"] = sched_getaffinity(0, sizeof(set), &set) == 0 ? nlohmann::json(CPU_COUNT(&set)) : nlohmann::json();
  const int cpu = sched_getcpu();
  h["on_cpu"] = cpu >= 0 ? nlohmann::json(cpu) : nlohmann::json();
  const std::optional<int> node = cpu >= 0 ? cpu_numa_node(cpu) : std::nullopt;
  h["cpu_numa_node"] = node ? nlohmann::json(*node) : nlohmann::json();
  char bus[32] = {};
  h["gpu_numa_node"] = nullptr;
  if (cudaDeviceGetPCIBusId(bus, sizeof(bus), device) == cudaSuccess) {
    std::string id = bus;
    for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const std::string text = first_line("/sys/bus/pci/devices/" + id + "/numa_node");
    if (!text.empty()) h["gpu_numa_node"] = std::atoi(text.c_str());
    h["gpu_pci_bus"] = id;
  } else {
    cudaGetLastError();
  }
  const std::string load = first_line("/proc/loadavg");
  h["load_average_1min"] = load.empty() ? nlohmann::json() : nlohmann::json(std::atof(load.c_str()));
  return h;
}

nlohmann::json tool_json() {
  return {{"name", "tlbench"}, {"version", TLBENCH_VERSION}, {"git_commit", TLBENCH_GIT_COMMIT}};
}

}  // namespace tlb
