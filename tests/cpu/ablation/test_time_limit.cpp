// --time-limit before any device: the durations it reads and refuses, the budget's prediction
// (the model scaled by the pace measured so far), the deadline that reads as a stop request,
// and the refusals of the command line (exit 2, nothing written).
#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <thread>

#include "ablation_test_util.hpp"
#include "config.hpp"
#include "run_control.hpp"
#include "run_report.hpp"
#include "time_limit.hpp"

using namespace tlb;
namespace fs = std::filesystem;

TEST_CASE("time limits read as seconds, minutes or hours, and anything else is refused naming the option",
          "[time_limit]") {
  CHECK(parse_duration_seconds("540", "--time-limit") == 540);
  CHECK(parse_duration_seconds("540s", "--time-limit") == 540);
  CHECK(parse_duration_seconds("9m", "--time-limit") == 540);
  CHECK(parse_duration_seconds("1.5h", "--time-limit") == 5400);
  CHECK(parse_duration_seconds("0.5", "--time-limit") == 0.5);
  CHECK(parse_duration_seconds("168h", "--time-limit") == 7 * 24 * 3600);
  for (const char* bad : {"", "0", "-5", "9x", "9 m", " 9m", "m", "nan", "inf", "169h", "1e9", "9mm", "5d"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_duration_seconds(bad, "--time-limit"), ConfigError);
  }
  CHECK_THROWS_WITH(parse_duration_seconds("9x", "--time-limit"),
                    "--time-limit \"9x\": expected a duration: seconds, or a number followed by s, m or h (540, "
                    "9m, 1.5h), above 0 and at most a week");
}

TEST_CASE("a group begins only where the model, at the pace measured so far, fits in what is left",
          "[time_limit]") {
  TimeBudget b(100, 1000);  // 100 s from t = 1000
  CHECK(b.deadline_s() == 1100);
  // Before any group the model is taken as it is, and the first group begins whatever its
  // prediction, while the limit has not passed: the model may be wrong either way.
  CHECK(b.predicted_s(40) == 40);
  CHECK(b.begin(40, 1000));
  CHECK(b.begin(500, 1000));
  CHECK_FALSE(b.begin(1, 1100));
  // The first group took twice its model (it also paid the process's start): that pace stands
  // until a later group is measured.
  b.record(10, 20);
  CHECK(b.groups() == 1);
  CHECK(b.predicted_s(30) == Approx(60));
  CHECK(b.begin(30, 1030));        // 60 s of the 70 left
  CHECK_FALSE(b.begin(30, 1050));  // 60 s of 50
  // Later groups took 1.5x their model: the first is left out from now on.
  b.record(10, 14);
  b.record(20, 31);
  CHECK(b.predicted_s(30) == Approx(45));
  CHECK(b.begin(30, 1050));        // 45 s of the 50 left
  CHECK_FALSE(b.begin(30, 1060));  // 45 s of 40
  CHECK(b.left_s(1110) == -10);
  CHECK_FALSE(b.begin(0.001, 1110));
  // A faster pace is believed too, and a record that is not a time counts as a group but not
  // toward the pace.
  TimeBudget fast(100, 0);
  fast.record(0, 5);
  CHECK(fast.groups() == 1);
  CHECK(fast.predicted_s(100) == 100);
  fast.record(50, 25);
  fast.record(10, std::numeric_limits<double>::quiet_NaN());
  CHECK(fast.groups() == 3);
  CHECK(fast.predicted_s(100) == Approx(50));
}

TEST_CASE("past the deadline a stop reads as requested, without a signal", "[time_limit]") {
  clear_interrupt();
  set_stop_deadline(0);
  CHECK_FALSE(interrupt_requested());
  CHECK_FALSE(deadline_passed());
  set_stop_deadline(1e-3);  // long past on the steady clock
  CHECK(deadline_passed());
  CHECK(interrupt_requested());
  CHECK(interrupt_signal() == 0);
  set_stop_deadline(1e300);
  CHECK_FALSE(interrupt_requested());
  set_stop_deadline(0);
  // The state and exit code of a run stopped this way: a job script tells it from a failure.
  CHECK(run_exit_code(kTimeLimitState, {}) == 75);
  CHECK(run_exit_code("interrupted", {}) == 130);
}

TEST_CASE("tlbench run refuses a bad --time-limit with exit 2, writing nothing", "[time_limit][cli]") {
  test::Scratch s("tlbench-timelimit", "refuse");
  const std::string cases = std::string(TLBENCH_SOURCE_DIR) + "/configs/cases.json";
  for (const char* bad : {"0", "9x", "-1m", "nan"}) {
    INFO(bad);
    for (const std::string& where : {std::string(""), std::string(" --devices 0")}) {
      const test::CommandResult r = test::run_command(
          "cd " + s.dir.string() + " && " + TLBENCH_BINARY + " run --config " + cases + " --out out --time-limit " +
              bad + where,
          s.dir);
      CHECK(r.exit_code == 2);
      CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
      CHECK(r.err.find("--time-limit") != std::string::npos);
    }
  }
  CHECK(s.listing().empty());
}

namespace {

// What a watchdog wrote to its stream over `run_s` seconds, the deadline (a stop request)
// passed `stopped` or not set, destroyed at the end; how long its destructor took.
struct WatchdogOutput {
  std::string text;
  double destroy_s = 0;
};
// `signal`: the stop comes as that signal, caught by the run's handlers, instead of the deadline.
WatchdogOutput watch_for(double grace_s, double run_s, bool stopped, const std::string& doing, int signal = 0) {
  std::FILE* f = std::tmpfile();
  REQUIRE(f != nullptr);
  WatchdogOutput out;
  {
    std::optional<StopWatchdog> w(std::in_place, grace_s, f);
    w->doing(doing);
    if (signal != 0) {
      install_interrupt_handlers();
      std::raise(signal);
    } else {
      set_stop_deadline(stopped ? wall_seconds() - 1 : 0);
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(run_s));
    const double t0 = wall_seconds();
    w.reset();
    out.destroy_s = wall_seconds() - t0;
  }
  set_stop_deadline(0);
  clear_interrupt();
  std::rewind(f);
  char buf[512];
  while (std::fgets(buf, sizeof buf, f)) out.text += buf;
  std::fclose(f);
  return out;
}

int count_of(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("a run still short of its next poll a grace period after the stop was asked is named, once",
          "[time_limit]") {
  const WatchdogOutput o = watch_for(0.2, 0.8, true, "case 13 fp16, configuration 11010");
  INFO(o.text);
  CHECK(count_of(o.text, "tlbench run: time limit reached") == 1);
  CHECK(o.text.find("still in case 13 fp16, configuration 11010: waiting on the GPU there") != std::string::npos);
  CHECK(o.text.find("Ctrl-C twice ends the process") != std::string::npos);
  CHECK(o.text.back() == '\n');
  CHECK(o.destroy_s < 1.0);
  // After a caught SIGTERM (a scheduler's stop) Ctrl-C is still caught once.
  const WatchdogOutput term = watch_for(0.2, 0.8, true, "the stage times of case 2 bf16, configuration auto", SIGTERM);
  INFO(term.text);
  CHECK(count_of(term.text, "tlbench run: asked to stop") == 1);
  CHECK(term.text.find("still in the stage times of case 2 bf16, configuration auto") != std::string::npos);
  CHECK(term.text.find("a second SIGTERM, or Ctrl-C twice, ends the process") != std::string::npos);
}

TEST_CASE("the watchdog says nothing without a stop, or within its grace, and ends at once", "[time_limit]") {
  const WatchdogOutput quiet = watch_for(0.2, 0.6, false, "case 1 fp16, configuration 00000");
  CHECK(quiet.text.empty());
  CHECK(quiet.destroy_s < 1.0);
  // A stop asked, but the run back at a poll (the watchdog gone) before the grace is out.
  const WatchdogOutput in_grace = watch_for(10, 0.3, true, "case 1 fp16, configuration 00000");
  CHECK(in_grace.text.empty());
  CHECK(in_grace.destroy_s < 1.0);
}
