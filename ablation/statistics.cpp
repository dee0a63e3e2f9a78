#include "statistics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tlb::stats {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}

double median(std::vector<double> v) {
  if (v.empty()) return kNaN;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double upper = v[mid];
  if (v.size() % 2 == 1) return upper;
  const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return 0.5 * (lower + upper);
}

double quantile_sorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return kNaN;
  if (sorted.size() == 1) return sorted[0];
  q = std::clamp(q, 0.0, 1.0);
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t i = static_cast<size_t>(std::floor(pos));
  if (i + 1 >= sorted.size()) return sorted.back();
  const double f = pos - static_cast<double>(i);
  return sorted[i] + f * (sorted[i + 1] - sorted[i]);
}

double mad(const std::vector<double>& v) {
  if (v.empty()) return kNaN;
  const double m = median(v);
  std::vector<double> dev(v.size());
  for (size_t i = 0; i < v.size(); ++i) dev[i] = std::fabs(v[i] - m);
  return median(std::move(dev));
}

double iqr(const std::vector<double>& v) {
  if (v.empty()) return kNaN;
  std::vector<double> s(v);
  std::sort(s.begin(), s.end());
  return quantile_sorted(s, 0.75) - quantile_sorted(s, 0.25);
}

double Summary::rel_spread() const {
  if (n == 0 || median == 0) return kNaN;
  return 1.4826 * mad / median;
}

Summary summarize(const std::vector<double>& v) {
  Summary s;
  s.n = v.size();
  if (v.empty()) {
    s.median = s.mad = s.iqr = s.min = s.max = kNaN;
    return s;
  }
  s.median = median(v);
  s.mad = mad(v);
  s.iqr = iqr(v);
  const auto [mn, mx] = std::minmax_element(v.begin(), v.end());
  s.min = *mn;
  s.max = *mx;
  return s;
}

double binomial_half_cdf(long k, long n) {
  if (k < 0) return 0.0;
  if (k >= n) return 1.0;
  // Sum C(n, i) / 2^n for i = 0..k with log-gamma terms, scaled by the largest term so the
  // sum neither underflows (n = 2000: 2^-2000) nor loses the small tail.
  const double log2n = static_cast<double>(n) * std::log(2.0);
  auto log_term = [&](long i) {
    return std::lgamma(static_cast<double>(n) + 1) - std::lgamma(static_cast<double>(i) + 1) -
           std::lgamma(static_cast<double>(n - i) + 1) - log2n;
  };
  const double top = log_term(k);  // terms grow with i up to n/2, and k < n/2 in our use
  double sum = 0;
  for (long i = k; i >= 0; --i) {
    const double t = std::exp(log_term(i) - top);
    sum += t;
    if (t < 1e-18 * sum) break;
  }
  return std::min(1.0, sum * std::exp(top));
}

double MedianInterval::rel_half_width() const {
  if (n == 0 || median <= 0 || !std::isfinite(median)) return std::numeric_limits<double>::infinity();
  return std::max(median - lo, hi - median) / median;
}

MedianInterval median_interval(std::vector<double> v, double level) {
  MedianInterval r;
  r.n = v.size();
  if (v.empty()) {
    r.median = r.lo = r.hi = kNaN;
    return r;
  }
  std::sort(v.begin(), v.end());
  r.median = quantile_sorted(v, 0.5);
  const long n = static_cast<long>(v.size());
  const double alpha_half = (1.0 - level) / 2.0;
  // Largest k (1-based) with P(B <= k-1) <= alpha/2: the interval [x(k), x(n+1-k)].
  // Binary search: the cdf is increasing in k.
  long lo_k = 0, hi_k = (n + 1) / 2;
  while (lo_k < hi_k) {
    const long mid = (lo_k + hi_k + 1) / 2;
    if (binomial_half_cdf(mid - 1, n) <= alpha_half) lo_k = mid;
    else hi_k = mid - 1;
  }
  long k = lo_k;
  if (k < 1) k = 1;  // too few samples for the level: the full range
  r.lo = v[static_cast<size_t>(k - 1)];
  r.hi = v[static_cast<size_t>(n - k)];
  r.confidence = 1.0 - 2.0 * binomial_half_cdf(k - 1, n);
  return r;
}

double normal_two_sided_quantile(double level) {
  // Bisection on erfc: P(|Z| > z) = erfc(z / sqrt 2) falls from 1 at z = 0.
  const double tail = 1.0 - level;
  double lo = 0, hi = 40;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    if (std::erfc(mid / std::sqrt(2.0)) > tail) lo = mid;
    else hi = mid;
  }
  return 0.5 * (lo + hi);
}

double block_log_sd(const std::vector<double>& block_medians) {
  if (block_medians.size() < 2) return 0;
  double mean = 0;
  for (double m : block_medians) {
    if (!(m > 0) || !std::isfinite(m)) return kNaN;
    mean += std::log(m);
  }
  mean /= static_cast<double>(block_medians.size());
  double ss = 0;
  for (double m : block_medians) ss += (std::log(m) - mean) * (std::log(m) - mean);
  return std::sqrt(ss / static_cast<double>(block_medians.size() - 1));
}

double pooled_block_log_var(const std::vector<double>& sds, size_t blocks) {
  if (blocks < 2) return 0;
  std::vector<double> v;
  for (double s : sds)
    if (std::isfinite(s)) v.push_back(s * s);
  if (v.empty()) return 0;
  // Median of chi^2_nu / nu: exact for one degree of freedom, Wilson-Hilferty beyond.
  const double nu = static_cast<double>(blocks - 1);
  const double chi2_median = blocks == 2 ? 0.454936 : std::pow(1.0 - 2.0 / (9.0 * nu), 3.0);
  return median(std::move(v)) / chi2_median;
}

MedianInterval widen_for_blocks(const MedianInterval& pooled, double own_log_var, double group_log_var,
                                size_t blocks, double level) {
  MedianInterval r = pooled;
  if (blocks < 2 || !(pooled.median > 0) || !std::isfinite(pooled.median)) return r;
  const double v = std::max(std::isfinite(own_log_var) ? own_log_var : 0.0,
                            std::isfinite(group_log_var) ? group_log_var : 0.0);
  const double half = normal_two_sided_quantile(level) * std::sqrt(v / static_cast<double>(blocks));
  r.lo = std::min(pooled.lo, pooled.median * std::exp(-half));
  r.hi = std::max(pooled.hi, pooled.median * std::exp(half));
  return r;
}

std::string_view to_string(StopReason r) {
  switch (r) {
    case StopReason::running: return "running";
    case StopReason::converged: return "converged";
    case StopReason::max_pairs: return "max_pairs";
    case StopReason::budget: return "budget";
    case StopReason::interrupted: return "interrupted";
  }
  return "?";
}

StopReason should_stop(const StoppingRule& rule, const MedianInterval& interval, size_t pairs,
                       size_t attempted, double elapsed_ms) {
  if (pairs >= rule.max_pairs || attempted >= rule.max_pairs) return StopReason::max_pairs;
  const size_t min_pairs = std::max(rule.min_pairs, size_t{1});
  if (pairs >= min_pairs && interval.rel_half_width() <= rule.target_rel_half_width)
    return StopReason::converged;
  const size_t floor_pairs = std::min(rule.floor_pairs, min_pairs);
  // A GPU throttling throughout leaves few usable pairs; the attempted count still ends it.
  if (elapsed_ms >= rule.budget_ms && (pairs >= floor_pairs || attempted >= 4 * floor_pairs))
    return StopReason::budget;
  return StopReason::running;
}

}  // namespace tlb::stats
