// The two inverse square roots of the fused LayerNorm, callable on host and device so the
// host tests can measure the bit trick's accuracy exactly as the kernel computes it.
#pragma once

#include <cmath>

#include "common/host_device.hpp"
#include "common/rounding.hpp"
#include "common/types.hpp"

namespace tlb {

// Newton-Raphson steps after the 0x5F3759DF seed. The seed is within 3.5% of 1/sqrt(x); each
// step squares the relative error (times 1.5): about 1.8e-3, then 4.7e-6, then the fp32
// rounding floor (~1e-7). fp16/bf16 outputs carry at least 2^-11 relative rounding, so two
// steps are a hundred times finer than what they can show; fp32 outputs need the third step
// to stay under a 1e-6 relative error.
constexpr int bit_trick_newton_steps(DType d) { return d == DType::fp32 ? 3 : 2; }

// 1/sqrt(x) for finite x > 0: the integer-halving seed, then `steps` Newton-Raphson steps
// y <- y (1.5 - x/2 y^2), written with one fma so each step rounds twice, not four times.
TLB_HD float rsqrt_bit_trick(float x, int steps) {
  float y = f32_from_bits(0x5F3759DFu - (f32_bits(x) >> 1));
  const float half_x = 0.5f * x;
  for (int i = 0; i < steps; ++i) y = y * fmaf(-half_x * y, y, 1.5f);
  return y;
}

}  // namespace tlb
