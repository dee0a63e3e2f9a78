// One child `tlbench run --shard i/n` per GPU, their progress on one line, then the merge
// (device_fanout.hpp).
#include "device_fanout.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>

#include "config.hpp"
#include "json_fields.hpp"
#include "merge.hpp"
#include "output_files.hpp"

extern char** environ;

namespace tlb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr const char* kFanoutFile = "fanout.json";  // in the shards folder: what a resume needs

volatile std::sig_atomic_t g_stop_signal = 0;
void on_stop_signal(int sig) { g_stop_signal = sig; }

struct Shard {
  int index = 0;         // 1-based
  fs::path dir, log;
  int device = -1;       // while running
  pid_t pid = -1;
  std::optional<int> exit_code;
  bool was_complete = false;  // complete before this invocation: not run again
  int64_t planned = 0;        // grid.points of its run.json, once it exists
};

bool is_complete(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_regular_file(dir / "run.json", ec)) return false;
  try {
    const json run = json_fields::parse_document(json_fields::read_input_file((dir / "run.json").string()),
                                                 (dir / "run.json").string());
    return run.value("state", "") == "complete";
  } catch (const ConfigError&) {
    return false;
  }
}

int64_t lines_in(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  int64_t n = 0;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) n += std::count(buf, buf + in.gcount(), '\n');
  return n;
}

int64_t planned_points(const fs::path& dir) {
  try {
    const json run = json_fields::parse_document(json_fields::read_input_file((dir / "run.json").string()),
                                                 (dir / "run.json").string());
    return run.contains("grid") ? run["grid"].value("points", int64_t{0}) : 0;
  } catch (const ConfigError&) {
    return 0;
  }
}

// Starts `args` with CUDA_VISIBLE_DEVICES=device and stdout, stderr appended to `log`.
pid_t spawn_child(const std::vector<std::string>& args, int device, const fs::path& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, STDIN_FILENO);
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "CUDA_VISIBLE_DEVICES=", 21) != 0) env.emplace_back(*e);
  env.push_back("CUDA_VISIBLE_DEVICES=" + std::to_string(device));
  std::vector<char*> argv, envp;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int err = posix_spawn(&pid, args[0].c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) throw std::runtime_error(fmt::format("cannot start {}: {}", args[0], std::strerror(err)));
  return pid;
}

std::string duration(double s) {
  const int t = static_cast<int>(s + 0.5);
  return t >= 60 ? fmt::format("{}m{:02d}s", t / 60, t % 60) : fmt::format("{}s", t);
}

// "devices 0: 123/700, 1: 98/690 | 221/1390 points, 2m10s, ETA 1m55s"
std::string progress_line(const std::vector<Shard>& shards, int64_t done_at_start, double elapsed_s) {
  int64_t done = 0, planned = 0;
  std::string per;
  for (const Shard& s : shards) {
    const int64_t d = lines_in(s.dir / "points.jsonl");
    done += d;
    planned += s.planned;
    if (s.pid > 0) per += fmt::format("{}{}: {}/{}", per.empty() ? "" : ", ", s.device, d, s.planned);
  }
  std::string line = fmt::format("devices {} | {}/{} points, {}", per.empty() ? "-" : per, done, planned,
                                 duration(elapsed_s));
  const int64_t now = done - done_at_start;
  if (now > 0 && planned > done) line += ", ETA " + duration(elapsed_s / static_cast<double>(now) * (planned - done));
  return line;
}

}  // namespace

std::vector<int> parse_devices(const std::string& spec, int available) {
  std::vector<int> out;
  if (spec == "all") {
    if (available <= 0) throw ConfigError("--devices all: no CUDA device is visible here");
    for (int d = 0; d < available; ++d) out.push_back(d);
    return out;
  }
  std::set<int> seen;
  std::vector<std::string> items(1);
  for (char c : spec) {
    if (c == ',') items.emplace_back();
    else items.back().push_back(c);
  }
  for (const std::string& item : items) {
    int64_t v = -1;
    if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos || item.size() > 6 ||
        (v = std::stoll(item)) > 65535)
      throw ConfigError(fmt::format("--devices \"{}\": \"{}\" is not a device ordinal (expected all, or "
                                    "ordinals like 0,1,3)", spec, item));
    if (available >= 0 && v >= available)
      throw ConfigError(fmt::format("--devices \"{}\": device {} does not exist here ({} visible)", spec, v, available));
    if (!seen.insert(static_cast<int>(v)).second)
      throw ConfigError(fmt::format("--devices \"{}\": device {} is listed twice", spec, v));
    out.push_back(static_cast<int>(v));
  }
  return out;
}

std::string shards_dir_of(const std::string& out_dir) {
  std::string s = out_dir;
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s + "-shards";
}

int run_fanout(const FanoutOptions& opt) {
  if (opt.devices.empty()) throw ConfigError("--devices: no device to run on");
  const fs::path out(opt.out_dir), root(shards_dir_of(opt.out_dir));
  std::error_code ec;
  if (fs::exists(fs::symlink_status(out, ec)))
    throw ConfigError(opt.resume ? fmt::format("--resume {}: the shards are merged already", opt.out_dir)
                                 : fmt::format("--out {}: exists; choose a new folder (or --resume it)", opt.out_dir));
  json fanout;
  int n = 0;
  if (opt.resume) {
    if (!fs::is_directory(root, ec))
      throw ConfigError(fmt::format("--resume {} --devices: no {} (the shards of a run with --devices)",
                                    opt.out_dir, root.string()));
    if (fs::is_regular_file(root / kFanoutFile, ec)) {
      const std::string path = (root / kFanoutFile).string();
      fanout = json_fields::parse_document(json_fields::read_input_file(path), path);
      n = static_cast<int>(json_fields::get_integer(fanout.value("shards", json()), 1, 4096, "a shard count",
                                                    path, "$.shards"));
    } else {
      while (fs::is_directory(root / fmt::format("shard{}", n + 1), ec)) ++n;
      if (n == 0) throw ConfigError(fmt::format("--resume {}: {} holds no shard folder", opt.out_dir, root.string()));
    }
  } else {
    if (fs::exists(fs::symlink_status(root, ec)))
      throw ConfigError(fmt::format("--out {}: {} exists already (the shards of another run?)", opt.out_dir,
                                    root.string()));
    n = static_cast<int>(opt.devices.size());
    fs::create_directories(root);
    fanout = {{"shards", n}, {"devices", opt.devices}, {"child_args", opt.child_args},
              {"command_line", opt.command_line}};
    write_file_atomic((root / kFanoutFile).string(), fanout.dump(2) + "\n");
  }

  std::vector<Shard> shards(static_cast<size_t>(n));
  std::deque<size_t> pending;
  for (int i = 1; i <= n; ++i) {
    Shard& s = shards[static_cast<size_t>(i - 1)];
    s.index = i;
    s.dir = root / fmt::format("shard{}", i);
    s.log = root / fmt::format("shard{}.log", i);
    s.was_complete = is_complete(s.dir);
    if (s.was_complete) {
      s.exit_code = 0;
      s.planned = planned_points(s.dir);
    } else {
      pending.push_back(static_cast<size_t>(i - 1));
    }
  }
  auto child_args = [&](const Shard& s) {
    std::vector<std::string> a = {opt.self, "run"};
    if (fs::is_regular_file(s.dir / "run.json", ec)) {
      a.insert(a.end(), {"--resume", s.dir.string()});
    } else {
      if (!fanout.contains("child_args"))
        throw ConfigError(fmt::format("--resume {}: {} has no run.json and {} is missing, so how it was to be "
                                      "run is unknown", opt.out_dir, s.dir.string(), (root / kFanoutFile).string()));
      for (const json& v : fanout["child_args"]) a.push_back(v.get<std::string>());
      a.insert(a.end(), {"--shard", fmt::format("{}/{}", s.index, n), "--out", s.dir.string()});
    }
    return a;
  };

  // Ctrl-C reaches the children (same process group) and stops them resumably; a signal sent
  // to this process alone is passed on to them.
  g_stop_signal = 0;
  auto old_int = std::signal(SIGINT, on_stop_signal);
  auto old_term = std::signal(SIGTERM, on_stop_signal);
  bool passed_on = false;
  std::set<int> busy;
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  const auto start = Clock::now();
  auto last_line = start - std::chrono::hours(1);
  int64_t done_at_start = 0;
  for (const Shard& s : shards) done_at_start += lines_in(s.dir / "points.jsonl");
  fmt::print(stderr, "tlbench: {} shard{} on device{} {} ({} to run); logs in {}\n", n, n == 1 ? "" : "s",
             opt.devices.size() == 1 ? "" : "s", fmt::join(opt.devices, ","), pending.size(), root.string());
  for (;;) {
    // Start what a free device can take (none once stopping).
    for (int d : opt.devices) {
      if (pending.empty() || g_stop_signal) break;
      if (busy.count(d)) continue;
      Shard& s = shards[pending.front()];
      pending.pop_front();
      s.device = d;
      s.pid = spawn_child(child_args(s), d, s.log);
      busy.insert(d);
    }
    if (g_stop_signal && !passed_on) {
      for (const Shard& s : shards)
        if (s.pid > 0) ::kill(s.pid, SIGINT);
      passed_on = true;
    }
    bool running = false;
    for (Shard& s : shards) {
      if (s.pid <= 0) continue;
      int status = 0;
      const pid_t r = ::waitpid(s.pid, &status, WNOHANG);
      if (r == s.pid) {
        s.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        s.pid = -1;
        busy.erase(s.device);
        s.planned = planned_points(s.dir);
        if (*s.exit_code != 0 && *s.exit_code != 1)
          fmt::print(stderr, "{}tlbench: shard {}/{} on device {} exited {} (its log: {})\n", tty ? "\n" : "",
                     s.index, n, s.device, *s.exit_code, s.log.string());
      } else {
        running = true;
        if (s.planned == 0) s.planned = planned_points(s.dir);
      }
    }
    if (!running && (pending.empty() || g_stop_signal)) break;
    const auto now = Clock::now();
    if (tty || now - last_line > std::chrono::seconds(30)) {
      const std::string line = progress_line(shards, done_at_start, std::chrono::duration<double>(now - start).count());
      if (tty) fmt::print(stderr, "\r{}\033[K", line);
      else fmt::print(stderr, "tlbench: {}\n", line);
      last_line = now;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  std::signal(SIGINT, old_int);
  std::signal(SIGTERM, old_term);
  if (tty) fmt::print(stderr, "\n");

  std::vector<std::string> devices;
  for (int d : opt.devices) devices.push_back(std::to_string(d));
  const std::string again = fmt::format("tlbench run --resume {} --devices {}", opt.out_dir, fmt::join(devices, ","));
  int worst = 0, failed = 0;
  std::vector<int> incomplete;
  for (const Shard& s : shards) {
    const int c = s.exit_code.value_or(130);
    if (c == 0 || c == 1) {
      worst = std::max(worst, c);
    } else {
      incomplete.push_back(s.index);
      if (!failed) failed = c;
    }
  }
  if (!incomplete.empty()) {
    fmt::print(stderr, "tlbench: shard{} {} of {} not complete; the other shards' points are kept. Continue with: "
                       "{}\n", incomplete.size() == 1 ? "" : "s", fmt::join(incomplete, ", "), n, again);
    return g_stop_signal || failed == 130 ? 130 : failed;
  }
  MergeOptions m;
  for (const Shard& s : shards) m.shard_dirs.push_back(s.dir.string());
  m.out_dir = opt.out_dir;
  m.command_line = opt.command_line;
  const MergeOutcome merged = merge_shards(m);
  fmt::print(stderr, "tlbench: {} shards merged into {}: {} points in {} groups{}\n", merged.shards, opt.out_dir,
             merged.points, merged.groups, worst == 1 ? " (some points failed the golden criterion)" : "");
  return worst;
}

}  // namespace tlb
