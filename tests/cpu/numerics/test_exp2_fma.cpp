// The attention softmax's 2^x on the FMA pipe against double precision, on the host build of
// the same function (the device runs the same fp32 operations).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "common/exp2_fma.hpp"

TEST_CASE("exp2_fma is within 3e-6 of 2^x on [-126, 0] and 0 below", "[oracle][exp2]") {
  double worst = 0.0;
  float worst_x = 0.0f;
  // Every 1/4096 from 0 down to -126: each integer interval sampled 4096 times, the
  // polynomial's range [-0.5, 0.5] around each integer covered edge to edge.
  for (int i = 0; i <= 126 * 4096; ++i) {
    const float x = -static_cast<float>(i) / 4096.0f;
    const double want = std::exp2(static_cast<double>(x));
    const double err = std::fabs(tlb::exp2_fma(x) - want) / want;
    if (err > worst) {
      worst = err;
      worst_x = x;
    }
  }
  INFO("worst relative error " << worst << " at x = " << worst_x);
  CHECK(worst < 3e-6);
  CHECK(worst > 1e-7);  // the polynomial's own error, not a copy of exp2
  CHECK(tlb::exp2_fma(0.0f) == Approx(1.0).epsilon(1e-6));
  CHECK(tlb::exp2_fma(-1.0f) == Approx(0.5).epsilon(1e-6));
  // Below -126 (a masked score is -inf): exactly 0, as ex2.approx.ftz gives there.
  for (float x : {-126.5f, -200.0f, -std::numeric_limits<float>::infinity()}) {
    INFO("x = " << x);
    CHECK(tlb::exp2_fma(x) == 0.0f);
  }
}
