// The accuracy verdicts as functions of fixed numbers: strict needs zero violations and no
// NaN/Inf; golden compares with 1.25x the reference's rel-L2, falls back to the per-dtype floor
// where the reference cannot run, never drops under the fp32 allowance, and never passes NaN.
#include <catch2/catch.hpp>

#include <cmath>

#include "accuracy.hpp"

using namespace tlb;

TEST_CASE("strict criterion", "[accuracy]") {
  StrictStats s;
  s.elements = 100;
  s.max_abs = 1e-3;
  CHECK(strict_pass(s));
  s.violations = 1;
  CHECK_FALSE(strict_pass(s));
  s.violations = 0;
  s.nan = 1;
  CHECK_FALSE(strict_pass(s));
  s.nan = 0;
  s.inf = 2;
  CHECK_FALSE(strict_pass(s));
  Tolerance t;
  CHECK(t.atol == 0.002);
  CHECK(t.rtol == 0.02);
}

TEST_CASE("golden criterion against the reference's error", "[accuracy]") {
  GoldenError e;
  e.rel_l2 = 1.2e-3;
  GoldenVerdict v = golden_verdict(e, 1.0e-3, DType::fp16, Fp32Math::ieee);
  CHECK(v.pass);
  CHECK(v.threshold == Approx(1.25e-3));
  e.rel_l2 = 1.3e-3;
  CHECK_FALSE(golden_verdict(e, 1.0e-3, DType::fp16, Fp32Math::ieee).pass);
  // Exactly at the threshold passes.
  e.rel_l2 = 1.25e-3;
  CHECK(golden_verdict(e, 1.0e-3, DType::fp16, Fp32Math::ieee).pass);
}

TEST_CASE("golden criterion where the reference cannot run uses the dtype floors", "[accuracy]") {
  GoldenError e;
  e.rel_l2 = 4.9e-3;
  CHECK(golden_verdict(e, std::nullopt, DType::fp16, Fp32Math::ieee).pass);
  e.rel_l2 = 5.1e-3;
  CHECK_FALSE(golden_verdict(e, std::nullopt, DType::fp16, Fp32Math::ieee).pass);
  e.rel_l2 = 3.9e-2;
  CHECK(golden_verdict(e, std::nullopt, DType::bf16, Fp32Math::ieee).pass);
  e.rel_l2 = 4.1e-2;
  CHECK_FALSE(golden_verdict(e, std::nullopt, DType::bf16, Fp32Math::ieee).pass);
  e.rel_l2 = 0.9e-4;
  CHECK(golden_verdict(e, std::nullopt, DType::fp32, Fp32Math::ieee).pass);
  e.rel_l2 = 1.1e-4;
  CHECK_FALSE(golden_verdict(e, std::nullopt, DType::fp32, Fp32Math::ieee).pass);
  CHECK(golden_tolerance(DType::fp16, Fp32Math::tf32).floor == 5e-3);  // math ignored
  CHECK(golden_tolerance(DType::bf16, Fp32Math::ieee).floor == 4e-2);
  CHECK(golden_tolerance(DType::fp32, Fp32Math::ieee).floor == 1e-4);
}

TEST_CASE("fp32 thresholds never drop below the allowance of the math that ran", "[accuracy]") {
  GoldenError e;
  // IEEE: both errors are rounding noise; 1.25 x 1e-7 would fail a reordered sum.
  e.rel_l2 = 5e-7;
  GoldenVerdict v = golden_verdict(e, 1e-7, DType::fp32, Fp32Math::ieee);
  CHECK(v.pass);
  CHECK(v.threshold == 1e-6);
  e.rel_l2 = 2e-6;
  CHECK_FALSE(golden_verdict(e, 1e-7, DType::fp32, Fp32Math::ieee).pass);
  // TF32 against an IEEE reference: held to what TF32 gives.
  e.rel_l2 = 1e-3;
  CHECK(golden_verdict(e, 1e-7, DType::fp32, Fp32Math::tf32).pass);
  e.rel_l2 = 6e-3;
  CHECK_FALSE(golden_verdict(e, 1e-7, DType::fp32, Fp32Math::tf32).pass);
  // fp16 has no allowance: the ratio rule alone.
  e.rel_l2 = 2e-7;
  CHECK_FALSE(golden_verdict(e, 1e-7, DType::fp16, Fp32Math::ieee).pass);
}

TEST_CASE("NaN and Inf never pass the golden criterion", "[accuracy]") {
  GoldenError e;
  e.rel_l2 = std::nan("");
  e.nan = 1;
  CHECK_FALSE(golden_verdict(e, 1e-3, DType::fp16, Fp32Math::ieee).pass);
  CHECK_FALSE(golden_verdict(e, std::nullopt, DType::bf16, Fp32Math::ieee).pass);
  e.nan = 0;
  e.rel_l2 = 1e-9;
  e.inf = 1;
  CHECK_FALSE(golden_verdict(e, 1e-3, DType::fp16, Fp32Math::ieee).pass);
  // A NaN error without a counted NaN (e.g. a NaN reference error) still fails.
  GoldenError f;
  f.rel_l2 = std::nan("");
  CHECK_FALSE(golden_verdict(f, 1e-3, DType::fp16, Fp32Math::ieee).pass);
}

TEST_CASE("host rel-L2 and per-layer traces", "[accuracy]") {
  CHECK(rel_l2({1, 2, 3}, {1, 2, 3}) == 0.0);
  // ||(0.1, 0)|| / ||(1, 0)|| = 0.1 (computed in fp64 from the fp32 values)
  CHECK(rel_l2({1.1f, 0}, {1, 0}) == Approx(0.1).epsilon(1e-6));
  CHECK(std::isnan(rel_l2({1, 2}, {1, 2, 3})));
  CHECK(std::isnan(rel_l2({NAN, 0}, {1, 0})));
  auto t = layer_rel_l2({{1, 1}, {2, 0}}, {{1, 1}, {1, 0}, {5}});
  REQUIRE(t.size() == 3);
  CHECK(t[0] == 0.0);
  CHECK(t[1] == Approx(1.0));
  CHECK(std::isnan(t[2]));
}
