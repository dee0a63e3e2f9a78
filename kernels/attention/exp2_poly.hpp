// 2^x on the FMA pipe, the softmax's second exponential unit: callable on host and device so
// the host tests measure it bit for bit as the kernels compute it.
#pragma once

#include <cmath>
#include <cstdint>

#include "common/host_device.hpp"
#include "common/rounding.hpp"

namespace tlb::attn {

// Coefficients of 2^f ~ 1 + f (c1 + f (c2 + f c3)) on [0, 1): the minimax fit of the relative
// error with the constant term pinned to 1 (so 2^0 and 2^-127 come out exact), below 8.6e-5.
inline constexpr float kExp2PolyC1 = 0x1.63e66ap-1f, kExp2PolyC2 = 0x1.d236c6p-3f,
                       kExp2PolyC3 = 0x1.3babb0p-4f;

// 2^x for x < 128 without the special-function unit, whose 16 results per clock per SM are as
// many as the tensor cores consume scores at head_dim 64; the attention kernels move some of
// a tile's exponentials here so both units stay busy. x = n + f with n = floor(x) and f in
// [0, 1): 2^f is the polynomial above and n is added to its exponent field. x is clamped to
// -127, where the result is exactly 0 (as ex2.approx.ftz's is, near enough: between -127 and
// -126 this gives subnormals below 2^-126 that no fp16/bf16 probability can hold), so masked
// scores (-inf) give exact zeros. Seven FMA-pipe instructions and one integer add.
TLB_HD float exp2_poly(float x) {
  constexpr float kShift = 0x1.8p23f;  // x + kShift rounded down leaves floor(x) in the low mantissa bits
  x = fmaxf(x, -127.0f);
#if defined(__CUDA_ARCH__)
  const float shifted = __fadd_rd(x, kShift);
#else
  const float shifted = std::floor(x) + kShift;  // the same bits: floor(x) + kShift is exact
#endif
  const float f = x - (shifted - kShift);
  float y = fmaf(f, kExp2PolyC3, kExp2PolyC2);
  y = fmaf(y, f, kExp2PolyC1);
  y = fmaf(y, f, 1.0f);
  return f32_from_bits(f32_bits(y) + (f32_bits(shifted) << 23));
}

}  // namespace tlb::attn
