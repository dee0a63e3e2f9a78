// `tlbench run --time-limit`: the wall time one process may take, so that a job with a limit of
// its own (a Slurm allocation, a CI step, a rented machine) ends cleanly and `--resume`
// continues it. A signal at the job's limit stops the group being measured: in two or more
// blocks a group's rows go to disk together, so they are all measured again. With a time limit
// the runner instead begins a (case, dtype) group only where its predicted time fits in what is
// left, and stops between groups. Past the limit itself (a group slower than predicted) the
// group is abandoned as Ctrl-C abandons it. The first group of a process is always begun (the
// model may be wrong either way): a limit in which not one group finishes cannot make progress,
// and the runner says so instead of asking to be resumed.
//
// The prediction is the plan's time model for the group (its pending points' share), scaled by
// how the model has fared on the groups this process measured, its first group left out once
// there are others (it also pays the process's start: module loading, library handles): on the
// H200 the official sweep's groups took 1.17x the model in all, most within 25 % of it one by
// one.
#pragma once

#include <string>

namespace tlb {

// "540", "540s", "9m", "1.5h": seconds. ConfigError naming `option` where the text is not a
// positive finite duration of at most a week.
double parse_duration_seconds(const std::string& text, const std::string& option);

class TimeBudget {
 public:
  // limit_s: the process's wall time, counted from start_s (both seconds of one clock).
  TimeBudget(double limit_s, double start_s) : limit_s_(limit_s), start_s_(start_s) {}

  double limit_s() const { return limit_s_; }
  double deadline_s() const { return start_s_ + limit_s_; }
  double left_s(double now_s) const { return deadline_s() - now_s; }
  // modelled_s scaled by this process's measured / modelled time: over its groups after the
  // first where there are any, else over the first, else 1.
  double predicted_s(double modelled_s) const;
  // Whether to begin a group modelled at modelled_s at now_s: the process's first group
  // whenever the limit has not passed, a later one where its prediction fits in what is left.
  bool begin(double modelled_s, double now_s) const;
  // A group modelled at modelled_s took took_s.
  void record(double modelled_s, double took_s);
  // Groups recorded so far.
  int groups() const { return groups_; }

 private:
  double limit_s_, start_s_;
  int groups_ = 0;
  double first_modelled_ = 0, first_took_ = 0;  // the first group's
  double modelled_sum_ = 0, took_sum_ = 0;      // the later groups'
};

}  // namespace tlb
