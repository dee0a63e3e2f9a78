// SM clock probe: a single thread measures clock64 cycles against %globaltimer nanoseconds.
// Both ends are aligned to a timer tick, so the interval is exact whatever the timer's update
// granularity (32 ns to 1 us across GPUs). Fuses nothing; one thread, any GPU.
#include "timing/clock_probe.hpp"

#include "common/cuda_check.hpp"
#include "common/ptx.cuh"

namespace tlb {

namespace {

__device__ __forceinline__ unsigned sm_id() {
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

// A stuck timer must not hang the stream: give up after this many cycles (~25 ms at 2 GHz).
constexpr long long kMaxSpinCycles = 50ll * 1000 * 1000;

__global__ void clock_probe_kernel(ClockProbeSample* out, unsigned spin_ns) {
  const long long guard_start = clock64();
  // Wait for a tick edge so the first reading is the start of a timer period.
  unsigned long long edge = ptx::global_timer_ns();
  unsigned long long t0;
  long long c0;
  do {
    t0 = ptx::global_timer_ns();
    c0 = clock64();
  } while (t0 == edge && c0 - guard_start < kMaxSpinCycles);
  unsigned long long t1 = t0;
  long long c1 = c0;
  while (t1 - t0 < spin_ns && c1 - guard_start < kMaxSpinCycles) {
    t1 = ptx::global_timer_ns();
    c1 = clock64();
  }
  // And end on an edge too.
  edge = t1;
  do {
    t1 = ptx::global_timer_ns();
    c1 = clock64();
  } while (t1 == edge && c1 - guard_start < kMaxSpinCycles);
  out->ns = t1 - t0;
  out->cycles = c1 - c0;
  out->smid = sm_id();
  out->valid = (t1 > t0 && c1 - guard_start < kMaxSpinCycles) ? 1u : 0u;
}

}  // namespace

void launch_clock_probe(ClockProbeSample* out, unsigned spin_ns, cudaStream_t stream) {
  clock_probe_kernel<<<1, 1, 0, stream>>>(out, spin_ns);
  TLB_LAUNCH_CHECK(stream);
}

}  // namespace tlb
