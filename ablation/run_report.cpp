#include "run_report.hpp"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

#include "run_document.hpp"
#include "text.hpp"

namespace tlb {

using json = nlohmann::json;

double wall_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

void print_header(const Schedule& s, size_t pending, const std::string& out_dir) {
  std::set<size_t> case_set;
  std::set<int> dtype_set;
  for (const SchedPoint& p : s.points) {
    case_set.insert(p.case_index);
    dtype_set.insert(static_cast<int>(p.dtype));
  }
  auto count = [](size_t n, const char* what) { return fmt::format("{} {}{}", n, what, n == 1 ? "" : "s"); };
  const std::string configs = s.info.auto_points == 0
                                  ? count(s.info.configs, "configuration")
                                  : fmt::format("({} + auto)", count(s.info.configs, "configuration"));
  fmt::print(stderr, "tlbench run: {} x {} x {} = {}, {} to measure, into {}{}\n",
             count(case_set.size(), "case"), configs, count(dtype_set.size(), "dtype"),
             count(s.points.size(), "point"), pending, out_dir,
             s.info.narrowed.empty() ? "" : "; " + s.info.narrowed);
}

ProgressLine::ProgressLine(size_t to_measure, double start_s)
    : to_measure_(to_measure), start_s_(start_s), tty_(::isatty(STDERR_FILENO) != 0) {}

void ProgressLine::show(const PointRow& r, size_t written) {
  if (!tty_) return;
  const double elapsed = wall_seconds() - start_s_;
  const double eta = elapsed / static_cast<double>(written) * static_cast<double>(to_measure_ - written);
  std::string what = r.status.str();
  if (r.speedup && (r.status.ran() || r.is_aa()))
    what = fmt::format("{:.3f}x [{:.3f}, {:.3f}]", *r.speedup, r.speedup_ci_low.value_or(NAN),
                       r.speedup_ci_high.value_or(NAN));
  fmt::print(stderr, "\r\033[K[{:>5}/{}] case {} {} {} {}: {}  elapsed {}  ETA {}", written, to_measure_,
             r.case_id, r.case_name, r.dtype, r.config, what, human_duration(elapsed), human_duration(eta));
  std::fflush(stderr);
  shown_ = true;
}

void ProgressLine::end() const {
  if (shown_) fmt::print(stderr, "\n");
}

void print_aa_table(std::FILE* out, const std::vector<PointRow>& rows) {
  fmt::print(out, "A/A noise floor: reference against itself, median of paired ratios and its "
                  "interval\n");
  fmt::print(out, "{:>4}  {:<20} {:<5} {:>8}  {:<21} {:>6}\n", "case", "name", "dtype", "ratio",
             "interval", "pairs");
  double worst = 0, widest = 0;
  std::string worst_where;
  for (const PointRow& r : rows) {
    if (!r.is_aa() || !r.speedup) {
      const StatusKind k = r.status.kind();
      if (k == StatusKind::nonviable || k == StatusKind::oom || k == StatusKind::error)
        fmt::print(out, "{:>4}  {:<20} {:<5} {:>8}  {}\n", r.case_id, r.case_name, r.dtype, r.status.str(),
                   r.note.substr(0, 100));
      continue;
    }
    const double lo = r.speedup_ci_low.value_or(NAN), hi = r.speedup_ci_high.value_or(NAN);
    fmt::print(out, "{:>4}  {:<20} {:<5} {:>8.4f}  [{:.4f}, {:.4f}]     {:>6}\n", r.case_id, r.case_name,
               r.dtype, *r.speedup, lo, hi, r.reps.value_or(0));
    if (std::fabs(*r.speedup - 1) > worst) {
      worst = std::fabs(*r.speedup - 1);
      worst_where = fmt::format("case {} {}", r.case_id, r.dtype);
    }
    widest = std::max(widest, std::max(hi - *r.speedup, *r.speedup - lo));
  }
  if (!worst_where.empty())
    fmt::print(out, "worst |ratio - 1|: {:.2f} % ({}); widest half-interval: {:.2f} %\n", 100 * worst,
               worst_where, 100 * widest);
}

int run_exit_code(const std::string& state, const std::vector<PointRow>& rows) {
  if (state == "interrupted") return 130;
  if (state == kTimeLimitState) return kTimeLimitExit;
  if (state == "device-fault") return 3;
  // A point that could not run (status error: a device or library failure that did not
  // poison the context) is a device failure for CI, ahead of an accuracy failure.
  int rc = 0;
  for (const PointRow& r : rows) {
    if (r.status == StatusKind::error) rc = 3;
    else if (r.golden_pass && !*r.golden_pass && rc == 0) rc = 1;
  }
  return rc;
}

void print_outcome(const RunOutcome& o, const std::vector<PointRow>& rows, const std::string& message) {
  std::string counts;
  for (const auto& [k, n] : status_counts(rows))
    counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", n, k);
  if (o.aa) print_aa_table(stderr, rows);
  fmt::print(stderr, "{} of {} points on disk ({}); {} measured now in {}; results in {}\n", rows.size(),
             o.scheduled, counts.empty() ? "none" : counts, o.written_now, human_duration(o.elapsed_s),
             o.out_dir);
  int failed = 0, errors = 0;
  for (const PointRow& r : rows) {
    failed += r.golden_pass && !*r.golden_pass;
    errors += r.status == StatusKind::error;
  }
  if (failed > 0)
    fmt::print(stderr, "{} point(s) failed the golden accuracy criterion (see note in points.csv)\n", failed);
  if (errors > 0)
    fmt::print(stderr, "{} point(s) could not run (status error; see note in points.csv)\n", errors);
  if (!message.empty()) fmt::print(stderr, "{}\n", message);
}

json aa_noise_floor(const std::vector<PointRow>& rows) {
  json aa = json::array();
  for (const PointRow& r : rows)
    if (r.is_aa() && r.speedup)
      aa.push_back({{"case_id", r.case_id},
                    {"dtype", r.dtype},
                    {"ratio", *r.speedup},
                    {"ci_low", r.speedup_ci_low.value_or(0)},
                    {"ci_high", r.speedup_ci_high.value_or(0)},
                    {"pairs", r.reps.value_or(0)},
                    {"blocks", r.blocks.value_or(1)},
                    {"block_spread", r.block_spread.value_or(0)}});
  return aa;
}

json summary_json(const RunOutcome& o, const std::vector<PointRow>& rows, int exit_code) {
  json failures = json::array();
  for (const PointRow& r : rows)
    if (r.golden_pass && !*r.golden_pass)
      failures.push_back({{"case_id", r.case_id},
                          {"dtype", r.dtype},
                          {"config", r.config},
                          {"golden_rel_l2", r.golden_rel_l2 && std::isfinite(*r.golden_rel_l2)
                                                ? json(*r.golden_rel_l2)
                                                : json(nullptr)},
                          {"golden_threshold", r.golden_threshold.value_or(0)},
                          {"nan_count", r.nan_count.value_or(0)}});
  json s = {{"out_dir", o.out_dir},
            {"state", o.state},
            {"exit_code", exit_code},
            {"points_scheduled", o.scheduled},
            {"points_on_disk", rows.size()},
            {"points_written_now", o.written_now},
            {"by_status", status_counts(rows)},
            {"golden_failures", failures},
            {"elapsed_s", o.elapsed_s}};
  if (o.state != "complete" && !o.resume_command.empty()) s["resume_command"] = o.resume_command;
  if (o.aa) s["aa_noise_floor"] = aa_noise_floor(rows);
  return s;
}

}  // namespace tlb
