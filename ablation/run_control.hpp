// How a run is stopped from outside, cleanly: SIGINT/SIGTERM set a flag the runner polls
// between points and between timing batches (a second signal kills at once), --time-limit's
// deadline reads the same way once it has passed, and two
// environment variables let tests stop a run at a chosen place:
//   TLBENCH_INJECT_FAULT="<case id>:<dtype>:<bits>"  that point raises a sticky DeviceError
//                                                    before it is measured (a kernel fault)
//   TLBENCH_INJECT_SIGINT_AFTER=N                    SIGINT is raised after N rows are written
#pragma once

#include <optional>
#include <string>

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
