// The GPU's energy counter and power limit through NVML, for benchmarks that ask what a kernel
// costs in joules: on a card held at its power limit a kernel's speed follows its energy per
// call (a kernel that spends more energy on the same FLOPs runs at a lower clock), which event
// times alone do not show. NVML is loaded at run time (libnvidia-ml.so.1 comes with the
// driver), so the build needs nothing and a machine without it gets no meter, not an error.
#pragma once

#include <memory>
#include <optional>
#include <string>

namespace tlb {

class EnergyMeter {
 public:
  // The meter of CUDA device `device`, found by its PCI bus id (the CUDA and NVML orders of
  // devices may differ); nullopt with `why` set where NVML, the device or its energy counter
  // is not there.
  static std::optional<EnergyMeter> open(int device, std::string& why);
  ~EnergyMeter();
  EnergyMeter(EnergyMeter&&) noexcept;
  EnergyMeter& operator=(EnergyMeter&&) noexcept;

  // The device's energy since the driver loaded, in millijoules; nullopt where NVML fails to
  // read it. The counter advances in steps of milliseconds or more: read it over runs of a
  // good part of a second.
  std::optional<unsigned long long> energy_mj() const;
  // The power limit the card is held to now, in watts (0 where NVML does not say).
  double power_limit_w() const;

 private:
  struct Api;
  explicit EnergyMeter(std::unique_ptr<Api> api);
  std::unique_ptr<Api> api_;
};

}  // namespace tlb
