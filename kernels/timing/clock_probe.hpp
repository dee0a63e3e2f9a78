// Host entry of the SM clock probe: one thread reads %globaltimer (ns) and clock64 (SM cycles)
// at two timer edges about `spin_ns` apart, so cycles / ns gives the SM clock the run left the
// GPU at. Sampled after every timed run to flag throttled samples.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

namespace tlb {

struct ClockProbeSample {
  unsigned long long ns = 0;  // globaltimer advance between the two edges
  long long cycles = 0;       // clock64 advance over the same interval, on one SM
  unsigned smid = 0;
  unsigned valid = 0;         // 0 when the timer did not advance (probe gave up)
};

// Default spin: long enough that a read's latency (tens of ns) is under 1% of the interval.
constexpr unsigned kClockProbeSpinNs = 10000;

void launch_clock_probe(ClockProbeSample* out, unsigned spin_ns, cudaStream_t stream);

// SM clock in MHz, NaN for an invalid sample.
inline double clock_probe_mhz(const ClockProbeSample& s) {
  if (!s.valid || s.ns == 0) return std::nan("");
  return static_cast<double>(s.cycles) * 1000.0 / static_cast<double>(s.ns);
}

}  // namespace tlb
