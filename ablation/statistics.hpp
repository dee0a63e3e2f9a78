// Robust statistics of timing samples and the stopping rule of a paired measurement.
// The speedup is the median of per-pair ratios; its confidence interval is distribution-free:
// the order statistics x(k) and x(n+1-k) bracket the population median with probability
// 1 - 2·P(Binomial(n, 1/2) <= k-1), so no assumption about the shape of the noise is needed
// (GPU timing noise is skewed and heavy-tailed; a normal-theory interval would be too narrow).
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace tlb::stats {

// Median of the values (NaN for an empty set). Takes a copy: callers keep their order.
double median(std::vector<double> v);
// Linear-interpolated quantile q in [0, 1] of already sorted values.
double quantile_sorted(const std::vector<double>& sorted, double q);
// Median absolute deviation from the median (unscaled).
double mad(const std::vector<double>& v);
// Interquartile range (q75 - q25).
double iqr(const std::vector<double>& v);

struct Summary {
  size_t n = 0;
  double median = 0;
  double mad = 0;
  double iqr = 0;
  double min = 0;
  double max = 0;
  // 1.4826·MAD / median: a robust relative standard deviation (the MAD of a normal sample
  // times 1.4826 estimates its sigma). The "spread" columns of the results.
  double rel_spread() const;
};
Summary summarize(const std::vector<double>& v);

// P(Binomial(n, 1/2) <= k), computed in log space so n in the thousands is exact enough.
double binomial_half_cdf(long k, long n);

struct MedianInterval {
  size_t n = 0;
  double median = 0;
  double lo = 0;
  double hi = 0;
  double confidence = 0;  // achieved coverage of [lo, hi] (>= the requested level when n >= 6)
  // Half-width relative to the median: max(median - lo, hi - median) / median.
  double rel_half_width() const;
};
// Distribution-free interval for the median at `level` (0.95 by default). With too few samples
// for the level (n < 6 at 95%) it returns [min, max] and the lower confidence that range has.
MedianInterval median_interval(std::vector<double> v, double level = 0.95);

// Two-sided normal quantile: the z with P(|Z| <= z) = level (1.95996 at 0.95).
double normal_two_sided_quantile(double level);

// Blocks: a point measured in several blocks separated in time (other points run between
// them). The spread of the blocks' medians is what a rerun sees and the pairs of one block do
// not: the clock state, the power cap's mood, where the buffers landed.
//
// The sample standard deviation of the logs of the block medians: their relative standard
// deviation (0.03 = 3 %). 0 for fewer than two blocks; NaN where a median is not positive.
double block_log_sd(const std::vector<double>& block_medians);
// The typical block log variance of a group of points measured in `blocks` blocks each, from
// their block_log_sd values: the median of sd^2 over the median of chi^2_(blocks-1) / (blocks -
// 1), robust to the odd disturbed point. 0 where there are none (or blocks < 2).
double pooled_block_log_var(const std::vector<double>& sds, size_t blocks);
// The pooled pairs' interval widened by the blocks: median · exp(±z · sqrt(v / blocks)), v
// the larger of the point's own block log variance and its group's, z the level's normal
// quantile, united with the pooled interval (which stays where it is wider). Its confidence
// is the pooled interval's.
MedianInterval widen_for_blocks(const MedianInterval& pooled, double own_log_var, double group_log_var,
                                size_t blocks, double level);

// When a paired measurement stops.
struct StoppingRule {
  size_t min_pairs = 10;          // never stop on a tight interval before this many pairs
  size_t max_pairs = 2000;        // stop here whatever the interval
  double target_rel_half_width = 0.01;  // ±1 % around the median speedup
  double budget_ms = 150;         // wall time of the point (warm-up included)
  // A point whose forward is so slow that the budget runs out before min_pairs still gets
  // this many, so every row has an interval ([min, max] of 5 pairs covers the median with
  // 93.75 % probability).
  size_t floor_pairs = 5;
};

enum class StopReason { running, converged, max_pairs, budget, interrupted };
std::string_view to_string(StopReason r);

// `pairs` usable (unthrottled) pairs so far, their interval, `elapsed_ms` since the point's
// warm-up began, `attempted` pairs including throttled ones (bounded by max_pairs too, so a
// GPU that throttles throughout cannot keep a point running forever).
StopReason should_stop(const StoppingRule& rule, const MedianInterval& interval, size_t pairs,
                       size_t attempted, double elapsed_ms);

}  // namespace tlb::stats
