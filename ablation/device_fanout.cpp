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
#include <cerrno>
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
#include "results_reader.hpp"
#include "run_report.hpp"

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
  int64_t points = 0;         // lines of its points.jsonl counted so far,
  std::streamoff counted = 0;  // over its first `counted` bytes
};

bool is_complete(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_regular_file(dir / "run.json", ec)) return false;
  try {
    const json run = json_fields::parse_document(json_fields::read_input_file((dir / "run.json").string()),
                                                 (dir / "run.json").string());
    return run.is_object() && run.value("state", "") == "complete";
  } catch (const std::exception&) {  // unreadable, or not the shape of a run.json: not complete
    return false;
  }
}

// Brings s.points up to date, reading only what was appended to points.jsonl since the last
// count (the progress line asks twice a second); a file that shrank is counted again.
void count_points(Shard& s) {
  std::ifstream in(s.dir / "points.jsonl", std::ios::binary);
  if (!in) return;
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < s.counted) s.points = s.counted = 0;
  in.seekg(s.counted);
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    s.points += std::count(buf, buf + in.gcount(), '\n');
    s.counted += in.gcount();
  }
}

int64_t planned_points(const fs::path& dir) {
  try {
    const json run = json_fields::parse_document(json_fields::read_input_file((dir / "run.json").string()),
                                                 (dir / "run.json").string());
    return run.is_object() && run.contains("grid") && run["grid"].is_object() ? run["grid"].value("points", int64_t{0}) : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

// Appends the command a shard runs to its log, so the log says what it is the output of.
void log_command(const std::vector<std::string>& args, const std::string& visible, const fs::path& log) {
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error(fmt::format("cannot write {}: {}", log.string(), std::strerror(errno)));
  std::string line = "tlbench: CUDA_VISIBLE_DEVICES=" + visible + " tlbench";
  for (size_t i = 1; i < args.size(); ++i) line += " " + args[i];
  line += "\n";
  const ssize_t wrote = ::write(fd, line.data(), line.size());
  const int write_errno = errno;
  ::close(fd);
  if (wrote != static_cast<ssize_t>(line.size()))
    throw std::runtime_error(fmt::format("cannot write {}: {}", log.string(), std::strerror(write_errno)));
}

// Starts `args` with CUDA_VISIBLE_DEVICES=visible, stdin from /dev/null, stdout and stderr
// appended to `log` (not through a symlink) after a line naming the command, in a process
// group of its own: a terminal's Ctrl-C reaches only this process, which passes one SIGINT on
// (a second one would kill a child that is stopping cleanly).
pid_t spawn_child(const std::vector<std::string>& args, const std::string& visible, const fs::path& log) {
  log_command(args, visible, log);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "CUDA_VISIBLE_DEVICES=", 21) != 0) env.emplace_back(*e);
  env.push_back("CUDA_VISIBLE_DEVICES=" + visible);
  std::vector<char*> argv, envp;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int err = posix_spawn(&pid, args[0].c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (err != 0) throw std::runtime_error(fmt::format("cannot start {}: {}", args[0], std::strerror(err)));
  return pid;
}

std::string duration(double s) {
  const int t = static_cast<int>(s + 0.5);
  return t >= 60 ? fmt::format("{}m{:02d}s", t / 60, t % 60) : fmt::format("{}s", t);
}

// "devices 0: 123/700, 1: 98/690 | 221/1390 points, 2m10s, ETA 1m55s". A shard whose run.json
// is not written yet has no plan to count against: "1: starting", and the total reads "?".
std::string progress_line(std::vector<Shard>& shards, int64_t done_at_start, double elapsed_s) {
  int64_t done = 0, planned = 0;
  bool plans_known = true;
  std::string per;
  for (Shard& s : shards) {
    count_points(s);
    done += s.points;
    planned += s.planned;
    plans_known = plans_known && s.planned > 0;
    if (s.pid > 0) {
      per += per.empty() ? "" : ", ";
      per += s.planned > 0 ? fmt::format("{}: {}/{}", s.device, s.points, s.planned) : fmt::format("{}: starting", s.device);
    }
  }
  std::string line = fmt::format("devices {} | {}/{} points, {}", per.empty() ? "none running" : per, done,
                                 plans_known ? std::to_string(planned) : "?", duration(elapsed_s));
  const int64_t now = done - done_at_start;
  if (plans_known && now > 0 && planned > done)
    line += ", ETA " + duration(elapsed_s / static_cast<double>(now) * (planned - done));
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

std::string child_visible_devices(int d, const char* parent_visible) {
  if (!parent_visible) return std::to_string(d);
  std::vector<std::string> entries(1);
  for (const char* c = parent_visible; *c; ++c) {
    if (*c == ',') entries.emplace_back();
    else if (*c != ' ') entries.back().push_back(*c);
  }
  if (d < 0 || static_cast<size_t>(d) >= entries.size() || entries[static_cast<size_t>(d)].empty())
    throw ConfigError(fmt::format("--devices: device {} is not among the {} this process may use "
                                  "(CUDA_VISIBLE_DEVICES={})", d, entries.size(), parent_visible));
  return entries[static_cast<size_t>(d)];
}

std::string shards_dir_of(const std::string& out_dir) {
  std::string s = fs::path(out_dir).lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s + "-shards";
}

namespace {

// The shards of a run: which to run and how, read from <out>-shards (a resume) or made (a new run).
struct ShardSet {
  fs::path root;
  json fanout;  // fanout.json: shards, devices, child_args, command_line
  int n = 0;
};

ShardSet open_shards(const FanoutOptions& opt) {
  ShardSet set;
  set.root = shards_dir_of(opt.out_dir);
  const fs::path out = fs::path(opt.out_dir).lexically_normal();
  std::error_code ec;
  const bool root_exists = fs::exists(fs::symlink_status(set.root, ec));
  if (fs::exists(fs::symlink_status(out, ec))) {
    if (!opt.resume) throw ConfigError(fmt::format("--out {}: exists; choose a new folder", opt.out_dir));
    throw ConfigError(root_exists ? fmt::format("--resume {} --devices: its shards are merged already", opt.out_dir)
                                  : fmt::format("--resume {} --devices: a run without --devices; resume it without "
                                                "--devices", opt.out_dir));
  }
  if (!opt.resume) {
    if (root_exists)
      throw ConfigError(fmt::format("--out {}: {} exists already (the shards of another run?)", opt.out_dir,
                                    set.root.string()));
    set.n = static_cast<int>(opt.devices.size());
    set.fanout = {{"shards", set.n}, {"devices", opt.devices}, {"child_args", opt.child_args},
                  {"command_line", opt.command_line}};
    return set;
  }
  if (!fs::is_directory(set.root, ec))
    throw ConfigError(fmt::format("--resume {} --devices: no {} (the shards of a run with --devices)", opt.out_dir,
                                  set.root.string()));
  const fs::path file = set.root / kFanoutFile;
  if (fs::exists(fs::symlink_status(file, ec))) {
    set.fanout = json_fields::parse_document(json_fields::read_input_file(file.string()), file.string());
    if (!set.fanout.is_object()) throw ConfigError(file.string() + ": $: expected an object");
    set.n = static_cast<int>(json_fields::get_integer(set.fanout.value("shards", json()), 1, 4096, "a shard count",
                                                      file.string(), "$.shards"));
    const json args = set.fanout.value("child_args", json());
    if (!args.is_array() || !std::all_of(args.begin(), args.end(), [](const json& a) { return a.is_string(); }))
      throw ConfigError(file.string() + ": $.child_args: expected an array of strings");
  } else {
    while (fs::is_directory(set.root / fmt::format("shard{}", set.n + 1), ec)) ++set.n;
    if (set.n == 0)
      throw ConfigError(fmt::format("--resume {}: {} holds no shard folder", opt.out_dir, set.root.string()));
  }
  return set;
}

// The child command of one shard: a resume where it has a run.json, else the plan's own
// arguments with its shard and folder.
std::vector<std::string> shard_command(const FanoutOptions& opt, const ShardSet& set, const Shard& s) {
  std::vector<std::string> a = {opt.self, "run"};
  std::error_code ec;
  if (fs::is_regular_file(s.dir / "run.json", ec)) {
    a.insert(a.end(), {"--resume", s.dir.string()});
    a.insert(a.end(), opt.resume_files.begin(), opt.resume_files.end());
    return a;
  }
  if (!set.fanout.contains("child_args"))
    throw ConfigError(fmt::format("--resume {}: {} has no run.json and {} is missing, so how it was to be run is "
                                  "unknown", opt.out_dir, s.dir.string(), (set.root / kFanoutFile).string()));
  std::vector<std::string> args;
  for (const json& v : set.fanout["child_args"]) args.push_back(v.get<std::string>());
  // Where the files are now, in place of where they were.
  for (size_t i = 0; i + 1 < opt.resume_files.size(); i += 2) {
    const auto it = std::find(args.begin(), args.end(), opt.resume_files[i]);
    if (it != args.end() && it + 1 != args.end()) *(it + 1) = opt.resume_files[i + 1];
    else args.insert(args.end(), {opt.resume_files[i], opt.resume_files[i + 1]});
  }
  a.insert(a.end(), args.begin(), args.end());
  a.insert(a.end(), {"--shard", fmt::format("{}/{}", s.index, set.n), "--out", s.dir.string()});
  return a;
}

void signal_children(const std::vector<Shard>& shards, int sig) {
  for (const Shard& s : shards)
    if (s.pid > 0) ::kill(s.pid, sig);
}

}  // namespace

int run_fanout(const FanoutOptions& opt) {
  if (opt.devices.empty()) throw ConfigError("--devices: no device to run on");
  // Everything that can be refused is, before the first file or child.
  std::vector<std::string> visible;
  for (int d : opt.devices) visible.push_back(child_visible_devices(d, std::getenv("CUDA_VISIBLE_DEVICES")));
  ShardSet set = open_shards(opt);
  const int n = set.n;
  std::vector<Shard> shards(static_cast<size_t>(n));
  std::vector<std::vector<std::string>> commands(static_cast<size_t>(n));
  std::deque<size_t> pending;
  for (int i = 1; i <= n; ++i) {
    Shard& s = shards[static_cast<size_t>(i - 1)];
    s.index = i;
    s.dir = set.root / fmt::format("shard{}", i);
    s.log = set.root / fmt::format("shard{}.log", i);
    s.was_complete = is_complete(s.dir);
    s.planned = planned_points(s.dir);
    if (!s.was_complete) {
      commands[static_cast<size_t>(i - 1)] = shard_command(opt, set, s);
      pending.push_back(static_cast<size_t>(i - 1));
    }
  }
  if (!opt.resume) {
    fs::create_directories(set.root);
    write_file_atomic((set.root / kFanoutFile).string(), set.fanout.dump(2) + "\n");
  }

  // A terminal's Ctrl-C reaches this process alone (each child has its own process group); the
  // first SIGINT or SIGTERM is passed on to the children as one SIGINT, which stops them
  // resumably; a second one kills them.
  g_stop_signal = 0;
  auto old_int = std::signal(SIGINT, on_stop_signal);
  auto old_term = std::signal(SIGTERM, on_stop_signal);
  int signals_passed = 0;
  bool out_of_time = false;  // --time-limit left too little to start the pending shards
  int started = 0;           // shards started by this invocation
  std::set<int> busy;
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  const auto start = Clock::now();
  auto last_line = start;  // off a terminal, the first line comes 30 s in, when there is something to say
  int64_t done_at_start = 0;
  for (Shard& s : shards) {
    count_points(s);
    done_at_start += s.points;
  }
  fmt::print(stderr, "tlbench: {} shard{} on device{} {} ({} to run); logs in {}\n", n, n == 1 ? "" : "s",
             opt.devices.size() == 1 ? "" : "s", fmt::join(opt.devices, ","), pending.size(), set.root.string());
  try {
    for (;;) {
      for (size_t k = 0; k < opt.devices.size() && !pending.empty() && !g_stop_signal && !out_of_time; ++k) {
        const int d = opt.devices[k];
        if (busy.count(d)) continue;
        std::vector<std::string> command = commands[pending.front()];
        if (opt.time_limit_s > 0) {
          const double left = opt.time_limit_s - std::chrono::duration<double>(Clock::now() - start).count();
          if (left < kFanoutMinShardSeconds) {
            out_of_time = true;
            break;
          }
          command.insert(command.end(), {"--time-limit", fmt::format("{:.1f}", left)});
        }
        Shard& s = shards[pending.front()];
        s.device = d;
        s.pid = spawn_child(command, visible[k], s.log);
        ++started;
        pending.pop_front();
        busy.insert(d);
      }
      if (g_stop_signal && signals_passed == 0) {
        signal_children(shards, SIGINT);
        signals_passed = 1;
        g_stop_signal = 0;
      } else if (g_stop_signal && signals_passed == 1) {
        signal_children(shards, SIGKILL);
        signals_passed = 2;
      }
      bool running = false;
      for (Shard& s : shards) {
        if (s.pid <= 0) continue;
        int status = 0;
        const pid_t r = ::waitpid(s.pid, &status, WNOHANG);
        if (r == 0) {
          running = true;
          if (s.planned == 0) s.planned = planned_points(s.dir);
          continue;
        }
        // Exited, or gone without a status to read (r == -1): its folder says how far it got.
        s.exit_code = r == s.pid ? (WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)) : 128;
        s.pid = -1;
        busy.erase(s.device);
        s.planned = planned_points(s.dir);
        if (!is_complete(s.dir))
          fmt::print(stderr, "{}tlbench: shard {}/{} on device {} exited {} (its log: {})\n", tty ? "\n" : "",
                     s.index, n, s.device, *s.exit_code, s.log.string());
      }
      if (!running && (pending.empty() || signals_passed || out_of_time)) break;
      const auto now = Clock::now();
      if (tty || now - last_line > std::chrono::seconds(30)) {
        const std::string line =
            progress_line(shards, done_at_start, std::chrono::duration<double>(now - start).count());
        if (tty) fmt::print(stderr, "\r{}\033[K", line);
        else fmt::print(stderr, "tlbench: {}\n", line);
        last_line = now;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  } catch (...) {
    // Nothing is left running behind an error.
    signal_children(shards, SIGINT);
    for (Shard& s : shards)
      if (s.pid > 0) ::waitpid(s.pid, nullptr, 0);
    std::signal(SIGINT, old_int);
    std::signal(SIGTERM, old_term);
    throw;
  }
  std::signal(SIGINT, old_int);
  std::signal(SIGTERM, old_term);
  const std::string last =
      progress_line(shards, done_at_start, std::chrono::duration<double>(Clock::now() - start).count());
  if (tty) fmt::print(stderr, "\r{}\033[K\n", last);
  else fmt::print(stderr, "tlbench: {}\n", last);

  std::vector<std::string> devices;
  for (int d : opt.devices) devices.push_back(std::to_string(d));
  const std::string again = fmt::format("tlbench run --resume {} --devices {}", opt.out_dir, fmt::join(devices, ","));
  std::vector<int> incomplete;
  // The exit code of the incomplete shards together: a failure (3, 2, ...) ahead of a stop that
  // a resume continues (75 where --time-limit stopped a shard or left it unstarted, 130).
  std::optional<int> failed;
  bool timed_out = false;
  for (const Shard& s : shards) {
    if (is_complete(s.dir)) continue;
    incomplete.push_back(s.index);
    const int code = s.exit_code.value_or(out_of_time && !signals_passed ? kTimeLimitExit : 130);
    if (code == kTimeLimitExit) timed_out = true;
    else if (!failed && code != 130) failed = code;  // 0 or 1 from an incomplete shard: it could not finish
  }
  if (out_of_time && started == 0) {
    // Nothing can progress under this limit: not a reason to be resumed with it.
    fmt::print(stderr, "tlbench: --time-limit {:.0f} s: under the {:.0f} s a shard needs to start, so none started; "
                       "continue with a longer one: {} --time-limit ...\n",
               opt.time_limit_s, kFanoutMinShardSeconds, again);
    return 2;
  }
  if (out_of_time)
    fmt::print(stderr, "tlbench: --time-limit: under {:.0f} s left, so the shards still waiting for a device were "
                       "not started\n", kFanoutMinShardSeconds);
  if (!incomplete.empty()) {
    fmt::print(stderr, "tlbench: shard{} {} of {} not complete; the other shards' points are kept. Continue with: "
                       "{}\n", incomplete.size() == 1 ? "" : "s", fmt::join(incomplete, ", "), n, again);
    if (signals_passed) return 130;
    if (failed) return *failed == 0 || *failed == 1 ? 3 : *failed;
    return timed_out ? kTimeLimitExit : 130;
  }
  MergeOptions m;
  for (const Shard& s : shards) m.shard_dirs.push_back(s.dir.string());
  m.out_dir = opt.out_dir;
  m.command_line = opt.command_line;
  const MergeOutcome merged = merge_shards(m);
  // The exit code of the merged points, as one run's would be (a shard complete before this
  // invocation counts with its own rows).
  const results::Results r = results::read_results(opt.out_dir);
  std::vector<PointRow> rows(r.points.begin(), r.points.end());
  const int code = run_exit_code("complete", rows);
  fmt::print(stderr, "tlbench: {} shards merged into {}: {} points in {} groups{}\n", merged.shards, opt.out_dir,
             merged.points, merged.groups,
             code == 1 ? " (a point failed the golden criterion)" : code == 3 ? " (a point could not run)" : "");
  return code;
}

}  // namespace tlb
