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

TEST_CASE("block spread: normal quantile, the blocks' log sd and its robust pooled variance", "[stats][blocks]") {
  CHECK(normal_two_sided_quantile(0.95) == Approx(1.959964).epsilon(1e-5));
  CHECK(normal_two_sided_quantile(0.6826895) == Approx(1.0).epsilon(1e-5));
  CHECK(block_log_sd({1.0}) == 0);
  CHECK(block_log_sd({1.0, 1.1}) == Approx(std::log(1.1) / std::sqrt(2.0)));
  CHECK(block_log_sd({2.0, 2.0, 2.0}) == 0);
  CHECK(std::isnan(block_log_sd({1.0, 0.0})));
  // Median of the squares over the median of chi^2_1 (0.4549): one wild point does not move it.
  CHECK(pooled_block_log_var({0.01, 0.02, 0.03}, 2) == Approx(0.0004 / 0.454936));
  CHECK(pooled_block_log_var({0.01, 0.02, 5.0}, 2) == Approx(0.0004 / 0.454936));
  CHECK(pooled_block_log_var({0.01, NAN, 0.03}, 2) == Approx(0.0005 / 0.454936));
  CHECK(pooled_block_log_var({}, 2) == 0);
  CHECK(pooled_block_log_var({0.02}, 1) == 0);
}

TEST_CASE("widening by the blocks keeps a wider pooled interval and takes the larger variance", "[stats][blocks]") {
  MedianInterval pooled;
  pooled.n = 12;
  pooled.median = 2.0;
  pooled.lo = 1.98;
  pooled.hi = 2.03;
  pooled.confidence = 0.96;
  const double z = normal_two_sided_quantile(0.95);
  // One block, or no spread anywhere: the pooled interval as it is.
  MedianInterval one = widen_for_blocks(pooled, 0.04, 0.04, 1, 0.95);
  CHECK(one.lo == pooled.lo);
  CHECK(one.hi == pooled.hi);
  MedianInterval none = widen_for_blocks(pooled, 0, 0, 2, 0.95);
  CHECK(none.lo == pooled.lo);
  CHECK(none.hi == pooled.hi);
  // The point's own spread larger than its group's: median · exp(±z · sd / sqrt 2).
  const double sd = 0.03;
  MedianInterval own = widen_for_blocks(pooled, sd * sd, 0.0001, 2, 0.95);
  CHECK(own.lo == Approx(2.0 * std::exp(-z * sd / std::sqrt(2.0))));
  CHECK(own.hi == Approx(2.0 * std::exp(z * sd / std::sqrt(2.0))));
  CHECK(own.confidence == pooled.confidence);
  // The group's larger: it decides; a small widening leaves the wider pooled side alone.
  MedianInterval group = widen_for_blocks(pooled, 0.0001, sd * sd, 2, 0.95);
  CHECK(group.lo == Approx(own.lo));
  const double small = std::pow(std::log(2.03 / 2.0) / z * std::sqrt(2.0) * 0.5, 2);
  MedianInterval narrow = widen_for_blocks(pooled, small, 0, 2, 0.95);
  CHECK(narrow.hi == pooled.hi);
  CHECK(narrow.lo < 2.0);
}

// Two runs of the same points, each point in two blocks; every block carries an offset of its
// own (the clock state, the power cap, where the buffers landed), invisible within a block.
// Run 2's speedups land inside run 1's intervals about as often as a 95 % interval of a mean
// promises for a second estimate of it (83 %) once the intervals hold the blocks' spread, and
// far less often from the pairs alone.
TEST_CASE("intervals widened by the blocks cover a rerun's speedups, the pairs' alone do not", "[stats][blocks]") {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> block_offset(0.0, 0.02), pair_noise(0.0, 0.01);
  constexpr int kPoints = 400, kPairs = 6;
  struct Run {
    std::vector<MedianInterval> pooled;
    std::vector<double> own_var;
  };
  auto measure = [&](const std::vector<double>& truth) {
    Run r;
    for (double t : truth) {
      std::vector<double> all, medians;
      for (int b = 0; b < 2; ++b) {
        const double off = block_offset(rng);
        std::vector<double> block;
        for (int i = 0; i < kPairs / 2; ++i) block.push_back(t * std::exp(off + pair_noise(rng)));
        medians.push_back(median(block));
        all.insert(all.end(), block.begin(), block.end());
      }
      r.pooled.push_back(median_interval(all, 0.95));
      const double sd = block_log_sd(medians);
      r.own_var.push_back(sd * sd);
    }
    return r;
  };
  std::vector<double> truth(kPoints);
  std::uniform_real_distribution<double> speedups(0.8, 3.0);
  for (double& t : truth) t = speedups(rng);
  const Run first = measure(truth), second = measure(truth);
  // The group's pooled variance, as the runner pools it over a group's points.
  std::vector<double> sds;
  for (double v : first.own_var) sds.push_back(std::sqrt(v));
  const double group_var = pooled_block_log_var(sds, 2);
  int inside_widened = 0, inside_pairs = 0;
  for (int i = 0; i < kPoints; ++i) {
    const double again = second.pooled[i].median;
    const MedianInterval w = widen_for_blocks(first.pooled[i], first.own_var[i], group_var, 2, 0.95);
    inside_widened += (again >= w.lo && again <= w.hi) ? 1 : 0;
    inside_pairs += (again >= first.pooled[i].lo && again <= first.pooled[i].hi) ? 1 : 0;
  }
  INFO("inside widened " << inside_widened << ", inside the pairs' intervals " << inside_pairs << " of " << kPoints);
  CHECK(inside_widened >= 0.80 * kPoints);
  CHECK(inside_pairs < 0.65 * kPoints);
}
