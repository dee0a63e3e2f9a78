// The GPU's energy counter, power limit and clock-event reasons through NVML, for benchmarks
// that ask what a kernel costs in joules and what holds the clock it runs at (the power cap,
// a current or voltage limit, temperature), which event times alone do not show. NVML is
// loaded at run time (libnvidia-ml.so.1 comes with the driver), so the build needs nothing
// and a machine without it gets no meter, not an error.
#pragma once

#include <array>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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
  // Why the clocks are under their maximum now: NVML's mask of clock-event reasons (one bit a
  // reason, kClockEventReasons); nullopt where the driver does not say.
  std::optional<unsigned long long> clock_event_reasons() const;

 private:
  struct Api;
  explicit EnergyMeter(std::unique_ptr<Api> api);
  std::unique_ptr<Api> api_;
};

// NVML's clock-event reasons (nvmlClocksEventReasons; "throttle reasons" before driver 535), by
// bit and the name records give them, those that hold a loaded GPU's clock first. A clock
// under the power limit's with no power-cap bit set is held by something else: a hardware
// slowdown or power brake (current or voltage, which follow the power's swings rather than
// its mean), or temperature.
struct ClockEventReason {
  unsigned long long bit;
  const char* name;
};
inline constexpr ClockEventReason kClockEventReasons[] = {
    {0x4, "sw_power_cap"}, {0x80, "hw_power_brake"}, {0x8, "hw_slowdown"},
    {0x20, "sw_thermal"},  {0x40, "hw_thermal"},     {0x2, "applications_clocks"},
    {0x10, "sync_boost"},  {0x100, "display_clocks"}, {0x1, "gpu_idle"}};

// How often each clock-event reason was active over the samples of a run (one mask a sample).
class ClockEventTally {
 public:
  void add(unsigned long long reasons);
  int samples() const { return samples_; }
  // Each reason active in some sample, with the share of the samples it was active in, in
  // kClockEventReasons' order; bits NVML may add later count as "other".
  std::vector<std::pair<std::string, double>> shares() const;

 private:
  int samples_ = 0;
  std::array<int, std::size(kClockEventReasons)> active_{};
  int other_ = 0;
};

}  // namespace tlb
