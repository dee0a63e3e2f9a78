// What `tlbench run` tells people and scripts: the header line, the progress line with its
// ETA (only on a terminal), the A/A noise-floor table, the closing counts and messages, the
// --json summary, and the exit code.
#pragma once

#include <cstddef>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config.hpp"
#include "run_schedule.hpp"
#include "writers.hpp"

namespace tlb {

// A steady clock, in seconds.
double wall_seconds();

// "tlbench run: 14 cases x (32 configurations + auto) x 3 dtypes = 1386 points, ... into DIR".
void print_header(const Schedule& s, size_t pending, const std::string& out_dir);

// One line, rewritten in place after each point: where the run is, the point's result, the
// elapsed time and the ETA. Silent unless stderr is a terminal.
class ProgressLine {
 public:
  ProgressLine(size_t to_measure, double start_s);
  void show(const PointRow& r, size_t written);
  void end() const;  // the newline after the last line shown

 private:
  size_t to_measure_;
  double start_s_;
  bool tty_;
  bool shown_ = false;
};

void print_aa_table(std::FILE* out, const std::vector<PointRow>& rows);

// The state and exit code of a run that --time-limit stopped: 75, sysexits' EX_TEMPFAIL
// ("try again later"), which a job script can tell from a failure and answer with --resume.
inline constexpr const char* kTimeLimitState = "time-limit";
inline constexpr int kTimeLimitExit = 75;

// 0 ok; 1 a measured point failed the golden criterion; 3 a device fault or a point that could
// not run (status error), ahead of an accuracy failure; 130 interrupted; 75 stopped by
// --time-limit.
int run_exit_code(const std::string& state, const std::vector<PointRow>& rows);

// What a finished (or stopped) run says on stderr.
struct RunOutcome {
  std::string state;  // complete | interrupted | device-fault | no-device
  std::string resume_command;  // empty where there is nothing to resume
  std::string out_dir;
  size_t scheduled = 0, written_now = 0;
  double elapsed_s = 0;
  bool aa = false;
};
void print_outcome(const RunOutcome& o, const std::vector<PointRow>& rows, const std::string& message);

// The --json summary; with aa, also the A/A ratios ($.aa_noise_floor).
nlohmann::json summary_json(const RunOutcome& o, const std::vector<PointRow>& rows, int exit_code);
nlohmann::json aa_noise_floor(const std::vector<PointRow>& rows);

}  // namespace tlb
