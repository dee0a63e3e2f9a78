#include "run_control.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <optional>

#include <unistd.h>

#include "config.hpp"

namespace tlb {

namespace {

// Written by the handler, read by the runner and the stop watchdog's thread: a lock-free atomic
// is safe in a handler and between threads alike.
std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);
std::atomic<double> g_deadline{0.0};

extern "C" void on_stop_signal(int sig) { g_signal = sig; }

}  // namespace

void install_interrupt_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  // One-shot: the first Ctrl-C asks for a clean stop, a second one kills the process.
  sa.sa_flags = SA_RESETHAND;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool interrupt_requested() { return g_signal != 0 || deadline_passed(); }
int interrupt_signal() { return g_signal; }
void clear_interrupt() { g_signal = 0; }

void set_stop_deadline(double steady_s) { g_deadline = steady_s; }

bool deadline_passed() {
  const double d = g_deadline;
  if (d <= 0) return false;
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count() >= d;
}

StopWatchdog::StopWatchdog(double grace_s, std::FILE* out)
    : grace_s_(grace_s), out_(out), thread_([this](std::stop_token stop) { watch(stop); }) {}

StopWatchdog::~StopWatchdog() {
  thread_.request_stop();
  thread_.join();
}

void StopWatchdog::doing(std::string what) {
  std::lock_guard<std::mutex> lock(mu_);
  doing_ = std::move(what);
}

void StopWatchdog::watch(std::stop_token stop) {
  using Clock = std::chrono::steady_clock;
  // Polled four times a grace period (at most once a second): the notice comes at most a
  // quarter late.
  const auto tick = std::chrono::duration<double>(std::min(1.0, grace_s_ / 4));
  std::optional<Clock::time_point> asked;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop.stop_requested()) {
    wake_.wait_for(lock, stop, tick, [] { return false; });
    if (stop.stop_requested()) return;
    if (!interrupt_requested()) continue;
    const Clock::time_point now = Clock::now();
    if (!asked) asked = now;
    const double waited = std::chrono::duration<double>(now - *asked).count();
    if (waited < grace_s_) continue;
    // SA_RESETHAND resets only the caught signal's handler: after a SIGINT the next Ctrl-C
    // kills; after a SIGTERM or the deadline the first one is still caught.
    const int sig = interrupt_signal();
    const char* ends = sig == SIGINT    ? "a second Ctrl-C"
                       : sig == SIGTERM ? "a second SIGTERM, or Ctrl-C twice,"
                                        : "Ctrl-C twice";
    // On a terminal the progress line has no newline yet.
    fmt::print(out_,
               "{}tlbench run: {} {:.0f} s ago and still in {}: waiting on the GPU there (a kernel that does not "
               "end?); {} ends the process\n",
               ::isatty(::fileno(out_)) ? "\n" : "", sig != 0 ? "asked to stop" : "time limit reached", waited,
               doing_.empty() ? "its set-up" : doing_, ends);
    std::fflush(out_);
    return;
  }
}

bool FaultInjection::matches(int id, DType d, const std::string& bits) const {
  return armed && id == case_id && d == dtype && bits == config;
}

FaultInjection fault_injection_from_env() {
  FaultInjection f;
  const char* v = std::getenv("TLBENCH_INJECT_FAULT");
  if (!v || !*v) return f;
  const std::string s = v;
  const size_t a = s.find(':'), b = a == std::string::npos ? a : s.find(':', a + 1);
  auto bad = [&](const std::string& why) {
    return ConfigError(fmt::format("TLBENCH_INJECT_FAULT=\"{}\": {} (expected "
                                   "<case id>:<dtype>:<bits>, e.g. 2:fp16:11000)", s, why));
  };
  if (b == std::string::npos) throw bad("not three fields");
  try {
    size_t used = 0;
    f.case_id = std::stoi(s.substr(0, a), &used);
    if (used != a) throw bad("case id is not a number");
  } catch (const std::logic_error&) {
    throw bad("case id is not a number");
  }
  if (!parse_dtype(s.substr(a + 1, b - a - 1), f.dtype)) throw bad("unknown dtype");
  f.config = s.substr(b + 1);
  if (f.config.empty() || f.config.find_first_not_of("01") != std::string::npos)
    throw bad("bits must be 0s and 1s");
  f.armed = true;
  return f;
}

std::optional<long> sigint_after_from_env() {
  const char* v = std::getenv("TLBENCH_INJECT_SIGINT_AFTER");
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < 0)
    throw ConfigError(fmt::format("TLBENCH_INJECT_SIGINT_AFTER=\"{}\": expected a count >= 0", v));
  return n;
}

}  // namespace tlb
