// 2^x for x <= 0 on the FMA pipe rather than the special-function unit (MUFU.EX2, 16 a clock
// per SM), for kernels whose exponentials would otherwise wait on that unit (the attention
// softmax at head widths up to 64: attention_tile.cuh). x = j + f with j the nearest integer
// (adding 1.5 * 2^23 leaves it in the low mantissa bits) and f in [-0.5, 0.5]; 2^f is a degree-4
// minimax polynomial (our fit against double precision), and j goes into the exponent field:
// about 8 instructions, against the 2^-11 a 16-bit probability keeps, within 2.7e-6 relative
// (tests/cpu/numerics/test_exp2_fma.cpp). Below -126 the result is 0, as the special-function
// unit's flush-to-zero form gives: a masked score (-inf) contributes nothing, and a row that
// has seen only masked keys keeps a zero sum (the split-KV combine reads that as empty). NaN is
// not expected (scores are finite or -inf) and is not preserved. The host build needs strict
// IEEE arithmetic (no -ffast-math): the rounding trick is an addition and subtraction a
// reassociating compiler would cancel.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "common/host_device.hpp"

namespace tlb {

TLB_HD float exp2_fma(float x) {
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23
  const float c = fmaxf(x, -126.0f);     // keeps j + 127 a normal exponent
  const float shifted = c + kRound;
  const float f = c - (shifted - kRound);
  float p = 9.570102207e-03f;
  p = fmaf(p, f, 5.591785908e-02f);
  p = fmaf(p, f, 2.402474433e-01f);
  p = fmaf(p, f, 6.931217909e-01f);
  p = fmaf(p, f, 9.999992847e-01f);
#if defined(__CUDA_ARCH__)
  const float r = __int_as_float(__float_as_int(p) + (__float_as_int(shifted) << 23));
#else
  uint32_t pb, sb;
  std::memcpy(&pb, &p, 4);
  std::memcpy(&sb, &shifted, 4);
  const uint32_t out = pb + (sb << 23);
  float r;
  std::memcpy(&r, &out, 4);
#endif
  return x < -126.0f ? 0.0f : r;
}

}  // namespace tlb
