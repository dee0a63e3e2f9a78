// How a run is stopped from outside, cleanly: SIGINT/SIGTERM set a flag the runner polls
// between points and between timing batches (a second signal kills at once), --time-limit's
// deadline reads the same way once it has passed, and two
// environment variables let tests stop a run at a chosen place:
//   TLBENCH_INJECT_FAULT="<case id>:<dtype>:<bits>"  that point raises a sticky DeviceError
//                                                    before it is measured (a kernel fault)
//   TLBENCH_INJECT_SIGINT_AFTER=N                    SIGINT is raised after N rows are written
#pragma once

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/types.hpp"

namespace tlb {

void install_interrupt_handlers();
// A stop signal was caught, or the deadline has passed.
bool interrupt_requested();
// The signal that was caught (SIGINT, SIGTERM), 0 if none.
int interrupt_signal();
void clear_interrupt();
// From `steady_s` on (seconds of std::chrono::steady_clock, as wall_seconds() reads it)
// interrupt_requested() is true; 0 sets no deadline.
void set_stop_deadline(double steady_s);
// The deadline is set and has passed.
bool deadline_passed();

// What keeps a stopped run from stopping. The runner polls for a stop between kernels, so one
// that has not got back to a poll some time after the stop was asked (a signal, the deadline)
// is waiting on the GPU: a kernel that does not end, or one far slower than the plan. Once
// `grace_s` has passed, the watchdog's thread says so on `out`, naming what the runner was
// doing (`doing`), so that the user, or the script that signalled it, learns where it hangs.
class StopWatchdog {
 public:
  StopWatchdog(double grace_s, std::FILE* out);
  ~StopWatchdog();  // stops the thread; says nothing after
  StopWatchdog(const StopWatchdog&) = delete;
  StopWatchdog& operator=(const StopWatchdog&) = delete;
  // What the runner is about to do, e.g. "case 13 fp16, configuration 11010".
  void doing(std::string what);

 private:
  void watch(std::stop_token stop);

  double grace_s_;
  std::FILE* out_;
  std::mutex mu_;
  std::condition_variable_any wake_;
  std::string doing_;
  std::jthread thread_;  // last: it reads the members above
};

struct FaultInjection {
  bool armed = false;
  int case_id = 0;
  DType dtype = DType::fp16;
  std::string config;  // bit string
  bool matches(int case_id, DType dtype, const std::string& config) const;
};
// Reads TLBENCH_INJECT_FAULT; throws ConfigError on a malformed value.
FaultInjection fault_injection_from_env();
// Reads TLBENCH_INJECT_SIGINT_AFTER; throws ConfigError on a malformed value.
std::optional<long> sigint_after_from_env();

}  // namespace tlb
