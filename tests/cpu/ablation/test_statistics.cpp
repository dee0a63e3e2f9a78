// Statistics of the measurement engine: robust summaries, the distribution-free interval for
// the median (exact order statistics at small n, coverage on skewed synthetic ratios) and the
// stopping rule.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "statistics.hpp"

using namespace tlb::stats;

TEST_CASE("median, MAD and IQR of known samples", "[stats]") {
  CHECK(median({3, 1, 2}) == 2.0);
  CHECK(median({4, 1, 3, 2}) == 2.5);
  CHECK(std::isnan(median({})));
  CHECK(mad({1, 2, 3, 4, 100}) == 1.0);  // deviations from 3: 2 1 0 1 97
  CHECK(iqr({1, 2, 3, 4, 5}) == Approx(2.0));
  Summary s = summarize({2, 2, 2, 2});
  CHECK(s.median == 2.0);
  CHECK(s.rel_spread() == 0.0);
  CHECK(s.min == 2.0);
  CHECK(s.max == 2.0);
}

TEST_CASE("binomial tail probabilities are exact for small n", "[stats]") {
  CHECK(binomial_half_cdf(0, 5) == Approx(1.0 / 32));
  CHECK(binomial_half_cdf(2, 5) == Approx(0.5));
  CHECK(binomial_half_cdf(1, 10) == Approx(11.0 / 1024));
  CHECK(binomial_half_cdf(-1, 10) == 0.0);
  CHECK(binomial_half_cdf(10, 10) == 1.0);
  // Large n stays finite and symmetric: P(B <= n/2 - 1) + P(B = n/2) + P(B >= n/2 + 1) = 1.
  const double below = binomial_half_cdf(999, 2000);
  CHECK(below > 0.48);
  CHECK(below < 0.5);
}

TEST_CASE("median interval uses the binomial order statistics", "[stats]") {
  std::vector<double> v{10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
  MedianInterval ci = median_interval(v, 0.95);
  // n = 10: P(B <= 1) = 11/1024 <= 0.025 < P(B <= 2), so [x(2), x(9)].
  CHECK(ci.lo == 2.0);
  CHECK(ci.hi == 9.0);
  CHECK(ci.median == 5.5);
  CHECK(ci.confidence == Approx(1.0 - 22.0 / 1024));

  MedianInterval small = median_interval({5, 1, 3, 2, 4}, 0.95);
  CHECK(small.lo == 1.0);
  CHECK(small.hi == 5.0);
  CHECK(small.confidence == Approx(1.0 - 2.0 / 32));
  CHECK(small.rel_half_width() == Approx(2.0 / 3.0));
}

TEST_CASE("median interval covers the true median of skewed ratios", "[stats]") {
  // Timing ratios are lognormal-ish and skewed; the interval must hold its level anyway.
  std::mt19937_64 rng(12345);
  const double true_median = 1.3;
  for (size_t n : {10u, 30u, 200u}) {
    std::lognormal_distribution<double> dist(std::log(true_median), 0.08);
    const int trials = 2000;
    int covered = 0;
    double nominal = 0;
    for (int t = 0; t < trials; ++t) {
      std::vector<double> v(n);
      for (double& x : v) x = dist(rng);
      MedianInterval ci = median_interval(v, 0.95);
      nominal = ci.confidence;
      if (ci.lo <= true_median && true_median <= ci.hi) ++covered;
    }
    const double coverage = static_cast<double>(covered) / trials;
    INFO("n = " << n << " coverage " << coverage << " nominal " << nominal);
    CHECK(nominal >= 0.95);
    // Binomial sampling error of 2000 trials is ~0.5 %.
    CHECK(coverage >= nominal - 0.02);
    CHECK(coverage <= 1.0 - 0.5 * (1.0 - nominal) + 0.02);
  }
}

TEST_CASE("stopping rule: tight interval after min pairs, budget, max pairs", "[stats]") {
  StoppingRule rule;
  rule.min_pairs = 10;
  rule.max_pairs = 100;
  rule.target_rel_half_width = 0.01;
  rule.budget_ms = 100;
  rule.floor_pairs = 5;
  MedianInterval tight;
  tight.n = 10;
  tight.median = 2.0;
  tight.lo = 1.99;
  tight.hi = 2.01;
  MedianInterval wide = tight;
  wide.lo = 1.5;
  wide.hi = 2.5;

  CHECK(should_stop(rule, tight, 9, 9, 10) == StopReason::running);
  CHECK(should_stop(rule, tight, 10, 10, 10) == StopReason::converged);
  CHECK(should_stop(rule, wide, 50, 50, 10) == StopReason::running);
  CHECK(should_stop(rule, wide, 4, 4, 500) == StopReason::running);  // below the floor
  CHECK(should_stop(rule, wide, 5, 5, 500) == StopReason::budget);
  CHECK(should_stop(rule, wide, 100, 100, 10) == StopReason::max_pairs);
  // Throttled throughout: few usable pairs, but the attempts still end it.
  CHECK(should_stop(rule, wide, 0, 19, 500) == StopReason::running);
  CHECK(should_stop(rule, wide, 0, 20, 500) == StopReason::budget);
  CHECK(should_stop(rule, wide, 3, 100, 1) == StopReason::max_pairs);
}
