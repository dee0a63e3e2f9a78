// The k-tile ring of the Hopper GEMM kernels: STAGES buffers in shared memory, each guarded by
// a full barrier (its A and W k-tiles have landed: the producer's one arrival plus the bytes)
// and an empty barrier (its consumers are done with it), and a position in it for walking the
// stages round after round.
#pragma once

#include <cstdint>

namespace tlb::gemm_detail {

// A position in the ring: the stage, and the parity of the round of the ring it is in (what
// its barriers' phases are waited on with).
template <int kStages>
struct RingSlot {
  int stage = 0;
  uint32_t phase = 0;

  __device__ void advance(int n) {
    const int s = stage + n;
    phase ^= static_cast<uint32_t>(s / kStages) & 1u;
    stage = s % kStages;
  }
};

// Where the ring lives: the stages (C::kStageBytes each, A's k-tile first), the full barriers,
// the empty barriers.
template <class C>
struct Ring {
  uint32_t stages, full_bar, empty_bar;

  __device__ uint32_t stage(int s) const { return stages + static_cast<uint32_t>(s * C::kStageBytes); }
  __device__ uint32_t full(int s) const { return full_bar + 8u * s; }
  __device__ uint32_t empty(int s) const { return empty_bar + 8u * s; }
};

}  // namespace tlb::gemm_detail
