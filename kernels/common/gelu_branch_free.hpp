// GELU(x) = x * Phi(x) in fp32 without a branch, for the fused GEMM epilogues. Written as
//   GELU(x) = max(x, 0) - |x| * Phi(-|x|),    Phi(-a) = 2^Q(min(a, 5.5))
// with Q a degree-8 polynomial fitting log2 Phi(-a) on [0, 5.5] (our weighted minimax fit
// against double precision): 8 FMAs, one ex2 and three more instructions an element, where
// 0.5 x (1 + erf(x / sqrt 2)) through a two-range erf took 24. The form has no cancellation
// either: for negative x the small Phi(x) comes out of the exponential directly instead of as
// 1 + erf, so the result keeps its relative accuracy (within 1.4e-5 on (-5, 0), where the erf
// form lost three digits at x = -4).
// Accuracy (tests/cpu/numerics/test_gelu.cpp, host build with an exact exp2): within
// 2.5e-7 |x| of x * Phi(x) everywhere, i.e. Phi to 2.5e-7; the device's ex2.approx adds at
// most 2 ulp of Phi(-a) (another 1.2e-7). Past |x| = 5.5 the clamped term is 5.5 Phi(-5.5),
// 1.05e-7, under half an ulp of any x >= 4: GELU(x) = x there to the bit, +inf stays +inf,
// -inf gives -1.05e-7 (the limit is 0), NaN stays NaN.
#pragma once

#include <cmath>

#include "common/host_device.hpp"

namespace tlb {

inline constexpr float kGeluClamp = 5.5f;

TLB_HD float gelu_branch_free(float x) {
  const float a = fabsf(x);
  // The clamp keeps a NaN (fminf would drop it for 5.5): on the device one min.NaN.
#if defined(__CUDA_ARCH__)
  float c;
  asm("min.NaN.f32 %0, %1, %2;\n" : "=f"(c) : "f"(a), "f"(kGeluClamp));
#else
  const float c = a > kGeluClamp ? kGeluClamp : a;
#endif
  float q = -4.77019285e-07f;
  q = fmaf(q, c, 8.11332211e-06f);
  q = fmaf(q, c, -2.16172321e-05f);
  q = fmaf(q, c, -0.00057412195f);
  q = fmaf(q, c, 0.00768086128f);
  q = fmaf(q, c, -0.0529468209f);
  q = fmaf(q, c, -0.459055364f);
  q = fmaf(q, c, -1.15112388f);
  q = fmaf(q, c, -0.999999642f);
#if defined(__CUDA_ARCH__)
  float tail;  // Phi(-c)
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(tail) : "f"(q));
#else
  const float tail = std::exp2(q);
#endif
  // c, not a: the same outside the clamp's range, and +inf keeps its value instead of
  // becoming inf - inf.
  return fmaf(-c, tail, fmaxf(x, 0.0f));
}

// The tanh-approximated GELU, 0.5 x (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715 x^3),
// written as the logistic function it is: x / (1 + 2^z), z = -2 log2(e) u = x (k1 + k3 x^2).
// Seven instructions an element (two of them ex2 and a reciprocal) where tanhf took about
// twenty, and no cancellation: for negative x, 1 + tanh(u) subtracts nearly equal numbers and
// 1 + 2^z does not. Past x = -9.3 the result is subnormal or zero (the limit is -0); -inf
// gives NaN, as the tanh form does.
TLB_HD float gelu_tanh_logistic(float x) {
  constexpr float k1 = -2.30220819814f;   // -2 sqrt(2/pi) log2(e)
  constexpr float k3 = -0.102943239580f;  // k1 * 0.044715
  const float z = x * fmaf(k3, x * x, k1);
#if defined(__CUDA_ARCH__)
  float e;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(e) : "f"(z));
  return __fdividef(x, 1.0f + e);  // 1 + e = inf (z > 128) gives x * 0
#else
  return x / (1.0f + std::exp2(z));
#endif
}

}  // namespace tlb
