// The GELU epilogues' branch-free erf against double-precision erf, on the host build of the
// same function (the device differs only in ex2.approx, within 2 ulp on the erfc side).
#include <catch2/catch.hpp>

#include <cmath>
#include <algorithm>
#include <limits>

#include "common/erf_branch_free.hpp"

namespace {

float next_up(float x) { return std::nextafter(x, std::numeric_limits<float>::infinity()); }

}  // namespace

TEST_CASE("branch-free erf is within 2e-7 of erf over every float in [-6, 6] on a dense grid", "[oracle][erf]") {
  double worst_abs = 0.0, worst_rel = 0.0;
  float worst_x = 0.0f;
  // Every 61st float from -6 to 6 (about 30 million probes cover both ranges and the switch at
  // |x| = 1 densely), then every float right around the switch and near zero.
  auto probe = [&](float x) {
    const double want = std::erf(static_cast<double>(x));
    const double got = tlb::erf_branch_free(x);
    const double abs_err = std::fabs(got - want);
    if (abs_err > worst_abs) {
      worst_abs = abs_err;
      worst_x = x;
    }
    // Relative error where the result is a normal float (a subnormal result has fewer bits).
    if (std::fabs(want) >= std::numeric_limits<float>::min()) worst_rel = std::max(worst_rel, abs_err / std::fabs(want));
  };
  for (float x = -6.0f; x <= 6.0f;) {
    probe(x);
    for (int i = 0; i < 61; ++i) x = next_up(x);
  }
  for (float x = 0.999f; x <= 1.001f; x = next_up(x)) {
    probe(x);
    probe(-x);
  }
  for (float x = 1e-30f; x <= 1e-3f; x *= 1.001f) probe(x);
  INFO("worst at x = " << worst_x);
  CHECK(worst_abs <= 2e-7);
  CHECK(worst_rel <= 2.5e-7);
}

TEST_CASE("branch-free erf keeps erf's special values", "[oracle][erf]") {
  CHECK(tlb::erf_branch_free(0.0f) == 0.0f);
  CHECK(std::signbit(tlb::erf_branch_free(-0.0f)));
  CHECK(tlb::erf_branch_free(std::numeric_limits<float>::infinity()) == 1.0f);
  CHECK(tlb::erf_branch_free(-std::numeric_limits<float>::infinity()) == -1.0f);
  CHECK(tlb::erf_branch_free(10.0f) == 1.0f);
  CHECK(std::isnan(tlb::erf_branch_free(std::numeric_limits<float>::quiet_NaN())));
  // Odd: erf(-x) == -erf(x) bit for bit.
  for (float x : {0.1f, 0.5f, 0.99f, 1.0f, 1.5f, 2.5f, 3.9f}) CHECK(tlb::erf_branch_free(-x) == -tlb::erf_branch_free(x));
}
