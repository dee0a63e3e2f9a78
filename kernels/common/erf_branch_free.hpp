// erf(x) in fp32 without a branch, for the GELU epilogues. CUDA's erff picks one of two ranges
// with a branch; in a GEMM epilogue each lane's eight elements take different sides, the warp
// runs both paths element by element and the run loses its instruction-level parallelism (on
// case 1's up projection the GELU epilogue cost 1.7 us of 5.2). Here both ranges are evaluated
// and one is selected:
//   |x| < 1:  erf(x) = x * P(x^2)                 (P of degree 5)
//   |x| >= 1: erf(x) = 1 - 2^Q(min(|x|, 4))       (Q of degree 7 fitting log2 erfc)
// The coefficients are our weighted least-squares fits against double-precision erf; the
// result is within 2e-7 of erf everywhere (tests/cpu/numerics/test_erf.cpp), as close as erff.
#pragma once

#include <cmath>

#include "common/host_device.hpp"

namespace tlb {

TLB_HD float erf_branch_free(float x) {
  const float a = fabsf(x);
  const float t = a * a;
  float p = -0.000566029106f;
  p = fmaf(p, t, 0.00492482679f);
  p = fmaf(p, t, -0.0267177448f);
  p = fmaf(p, t, 0.11280413f);
  p = fmaf(p, t, -0.376123548f);
  p = fmaf(p, t, 1.12837911f);
  const float small = a * p;
  const float c = fminf(a, 4.0f);  // erf(4) rounds to 1 in fp32
  float q = -3.12875272e-05f;
  q = fmaf(q, c, 0.000636713987f);
  q = fmaf(q, c, -0.00606590137f);
  q = fmaf(q, c, 0.0363678299f);
  q = fmaf(q, c, -0.156414941f);
  q = fmaf(q, c, -0.913543224f);
  q = fmaf(q, c, -1.62963724f);
  q = fmaf(q, c, 0.000271285215f);
#if defined(__CUDA_ARCH__)
  float e;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(e) : "f"(q));
#else
  const float e = std::exp2(q);
#endif
  const float large = 1.0f - e;
  return copysignf(a >= 1.0f ? large : small, x);  // NaN takes `small`, which stays NaN
}

}  // namespace tlb
