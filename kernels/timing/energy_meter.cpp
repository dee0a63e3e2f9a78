#include "timing/energy_meter.hpp"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <utility>

namespace tlb {

// The few NVML entry points the meter uses, by their C signatures (the library's ABI; the
// header is not part of the CUDA toolkit). Every one returns 0 on success.
struct EnergyMeter::Api {
  using Device = void*;
  void* lib = nullptr;
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*by_pci_bus_id)(const char*, Device*) = nullptr;
  int (*total_energy)(Device, unsigned long long*) = nullptr;
  int (*enforced_power_limit)(Device, unsigned*) = nullptr;
  int (*clock_events)(Device, unsigned long long*) = nullptr;  // optional
  Device device = nullptr;

  ~Api() {
    if (shutdown) shutdown();
    if (lib) dlclose(lib);
  }
};

namespace {

template <typename F>
bool find(void* lib, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  return f != nullptr;
}

}  // namespace

std::optional<EnergyMeter> EnergyMeter::open(int device, std::string& why) {
  auto api = std::make_unique<Api>();
  api->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!api->lib) {
    why = "NVML (libnvidia-ml.so.1) is not installed";
    return std::nullopt;
  }
  Api& a = *api;
  if (!find(a.lib, "nvmlInit_v2", a.init) || !find(a.lib, "nvmlDeviceGetHandleByPciBusId_v2", a.by_pci_bus_id) ||
      !find(a.lib, "nvmlDeviceGetTotalEnergyConsumption", a.total_energy) ||
      !find(a.lib, "nvmlDeviceGetEnforcedPowerLimit", a.enforced_power_limit)) {
    why = "NVML lacks the energy counter's entry points";
    return std::nullopt;
  }
  if (a.init() != 0) {
    why = "NVML did not start";
    return std::nullopt;
  }
  find(a.lib, "nvmlShutdown", a.shutdown);  // only now is there something to shut down
  // The reasons' entry point under its name since driver 535, else the older one (same ABI).
  if (!find(a.lib, "nvmlDeviceGetCurrentClocksEventReasons", a.clock_events))
    find(a.lib, "nvmlDeviceGetCurrentClocksThrottleReasons", a.clock_events);
  char bus_id[32] = {};
  if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device) != cudaSuccess) {
    why = "the CUDA device has no PCI bus id";
    return std::nullopt;
  }
  unsigned long long mj = 0;
  if (a.by_pci_bus_id(bus_id, &a.device) != 0 || a.total_energy(a.device, &mj) != 0) {
    why = std::string("NVML gives no energy counter for the device at ") + bus_id;
    return std::nullopt;
  }
  return EnergyMeter(std::move(api));
}

EnergyMeter::EnergyMeter(std::unique_ptr<Api> api) : api_(std::move(api)) {}
EnergyMeter::~EnergyMeter() = default;
EnergyMeter::EnergyMeter(EnergyMeter&&) noexcept = default;
EnergyMeter& EnergyMeter::operator=(EnergyMeter&&) noexcept = default;

std::optional<unsigned long long> EnergyMeter::energy_mj() const {
  unsigned long long mj = 0;
  if (api_->total_energy(api_->device, &mj) != 0) return std::nullopt;
  return mj;
}

double EnergyMeter::power_limit_w() const {
  unsigned mw = 0;
  return api_->enforced_power_limit(api_->device, &mw) == 0 ? mw / 1000.0 : 0.0;
}

std::optional<unsigned long long> EnergyMeter::clock_event_reasons() const {
  unsigned long long mask = 0;
  if (!api_->clock_events || api_->clock_events(api_->device, &mask) != 0) return std::nullopt;
  return mask;
}

void ClockEventTally::add(unsigned long long reasons) {
  ++samples_;
  for (size_t i = 0; i < active_.size(); ++i) {
    if (reasons & kClockEventReasons[i].bit) ++active_[i];
    reasons &= ~kClockEventReasons[i].bit;
  }
  if (reasons != 0) ++other_;
}

std::vector<std::pair<std::string, double>> ClockEventTally::shares() const {
  std::vector<std::pair<std::string, double>> out;
  if (samples_ == 0) return out;
  for (size_t i = 0; i < active_.size(); ++i)
    if (active_[i] > 0) out.emplace_back(kClockEventReasons[i].name, static_cast<double>(active_[i]) / samples_);
  if (other_ > 0) out.emplace_back("other", static_cast<double>(other_) / samples_);
  return out;
}

}  // namespace tlb
