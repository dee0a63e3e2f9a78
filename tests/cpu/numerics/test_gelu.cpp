// The GELU epilogues' branch-free x * Phi(x) against double precision, on the host build of the
// same function (the device differs only in ex2.approx, within 2 ulp of the tail).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/gelu_branch_free.hpp"
#include "oracle/layer_oracle.hpp"

namespace {

float next_up(float x) { return std::nextafter(x, std::numeric_limits<float>::infinity()); }

double gelu_exact(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }

double gelu_tanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

}  // namespace

TEST_CASE("branch-free GELU is within 2.5e-7 |x| of x Phi(x), and keeps its relative accuracy below zero",
          "[oracle][gelu]") {
  double worst_phi = 0.0, worst_rel_negative = 0.0, worst_rel_positive = 0.0;
  float worst_x = 0.0f;
  auto probe = [&](float x) {
    const double want = gelu_exact(x), got = tlb::gelu_branch_free(x);
    const double err = std::fabs(got - want);
    // Subnormal results have fewer bits than the bound speaks of.
    if (std::fabs(want) < std::numeric_limits<float>::min()) return;
    if (err / std::fabs(x) > worst_phi) {
      worst_phi = err / std::fabs(x);
      worst_x = x;
    }
    if (x < 0.0f && x > -5.0f)
      worst_rel_negative = std::max(worst_rel_negative, err / std::fabs(want));
    if (x > 0.0f)
      worst_rel_positive = std::max(worst_rel_positive, err / std::fabs(want));
  };
  // Every 61st float on [-12, 12] (about 30 million probes: both sides of the clamp at 5.5
  // and the whole polynomial range), every float around the clamp, tiny and huge values.
  for (float x = -12.0f; x <= 12.0f;) {
    probe(x);
    for (int i = 0; i < 61; ++i) x = next_up(x);
  }
  for (float x = 5.49f; x <= 5.51f; x = next_up(x)) {
    probe(x);
    probe(-x);
  }
  for (float x = 1e-30f; x <= 1e30f; x *= 1.001f) {
    probe(x);
    probe(-x);
  }
  INFO("worst |GELU error| / |x| at x = " << worst_x);
  CHECK(worst_phi <= 2.5e-7);
  CHECK(worst_rel_negative <= 2e-5);
  CHECK(worst_rel_positive <= 4e-7);
}

TEST_CASE("branch-free GELU keeps zero, +inf and NaN", "[oracle][gelu]") {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  CHECK(tlb::gelu_branch_free(0.0f) == 0.0f);
  CHECK(tlb::gelu_branch_free(kInf) == kInf);
  CHECK(std::isnan(tlb::gelu_branch_free(std::numeric_limits<float>::quiet_NaN())));
  // -inf goes to the clamped tail, -5.5 Phi(-5.5): finite and tiny, as the limit 0 is.
  const float at_minus_inf = tlb::gelu_branch_free(-kInf);
  CHECK(at_minus_inf <= 0.0f);
  CHECK(at_minus_inf >= -1.1e-7f);
  // From the clamp on, x itself to the last bit.
  for (float x : {5.5f, 6.0f, 7.9f, 100.0f, 1e20f}) CHECK(tlb::gelu_branch_free(x) == x);
}

TEST_CASE("the logistic form of the tanh GELU keeps its relative accuracy on both sides", "[oracle][gelu]") {
  double worst = 0.0;
  float worst_x = 0.0f;
  // Every 61st float on [-9, 9] (the result stays normal), and tiny values. Below zero the
  // double tanh form itself cancels, so the reference is the oracle's, its logistic form in
  // double.
  for (float x = -9.0f; x <= 9.0f;) {
    const double z = -2.0 * std::sqrt(2.0 / M_PI) * (x + 0.044715 * double(x) * x * x);
    const double want = tlb::oracle::activate(tlb::Activation::gelu_tanh, x);
    // z rounded to fp32 carries |z| half-ulps into 2^z: the bound grows with it, as any fp32
    // evaluation's would.
    const double rel = std::fabs(tlb::gelu_tanh_logistic(x) - want) / std::fabs(want) / (1.0 + std::fabs(z) / 8.0);
    // Subnormal results have fewer bits than the bound speaks of.
    if (std::fabs(want) >= std::numeric_limits<float>::min() && rel > worst) {
      worst = rel;
      worst_x = x;
    }
    for (int i = 0; i < 61; ++i) x = next_up(x);
  }
  INFO("worst relative error / (1 + |z| / 8) at x = " << worst_x);
  CHECK(worst <= 1.5e-6);
  // Where the tanh form has no cancellation (x >= 0), the two agree in double.
  for (double x : {0.1, 0.5, 1.0, 2.0, 4.0})
    CHECK(tlb::gelu_tanh_logistic(static_cast<float>(x)) == Approx(gelu_tanh(x)).epsilon(1e-6));
  CHECK(tlb::gelu_tanh_logistic(0.0f) == 0.0f);
  CHECK(tlb::gelu_tanh_logistic(std::numeric_limits<float>::infinity()) == std::numeric_limits<float>::infinity());
  CHECK(std::isnan(tlb::gelu_tanh_logistic(std::numeric_limits<float>::quiet_NaN())));
}
