// Helpers shared by the host-side tests: reading files back, per-test scratch folders, and
// running a command line with its output captured.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

namespace tlb::test {

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// An empty folder "<prefix>-<pid>-<name>" under the temporary directory; kept after the test so
// a failure can be inspected.
inline std::filesystem::path fresh_dir(const std::string& prefix, const std::string& name) {
  namespace fs = std::filesystem;
  fs::path d = fs::temp_directory_path() / (prefix + "-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// A scratch folder "<prefix>-<name>-<pid>" per test, removed afterwards.
struct Scratch {
  std::filesystem::path dir;
  Scratch(const std::string& prefix, const std::string& name) {
    dir = std::filesystem::temp_directory_path() / (prefix + "-" + name + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  std::string path(const std::string& name) const { return (dir / name).string(); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(dir / name) << text;
    return path(name);
  }
  // Everything in the folder except captured output, for "nothing written" checks.
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
      const std::string n = e.path().filename().string();
      if (n != "stdout.txt" && n != "stderr.txt")
        names.push_back(e.path().lexically_relative(dir).string());  // a symlink by its own name
    }
    std::sort(names.begin(), names.end());
    return names;
  }
};

inline int exit_code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

struct CommandResult {
  int exit_code = -1;
  std::string out, err;
};

// Runs `cmd_line` through the shell with stdout and stderr captured in files under `dir`,
// which are read back and removed.
inline CommandResult run_command(const std::string& cmd_line, const std::filesystem::path& dir) {
  const std::filesystem::path out = dir / "stdout.txt", err = dir / "stderr.txt";
  const int status =
      std::system((cmd_line + " >" + shell_quote(out.string()) + " 2>" + shell_quote(err.string())).c_str());
  CommandResult r;
  r.exit_code = exit_code_of(status);
  r.out = slurp(out);
  r.err = slurp(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

// Runs a command line, returns its exit code; stdout+stderr go to `output` (through a file in
// `log_dir`).
inline int run_merged(const std::string& cmd_line, std::string& output, const std::filesystem::path& log_dir) {
  const std::filesystem::path log = log_dir / "out.txt";
  const int status = std::system((cmd_line + " > " + log.string() + " 2>&1").c_str());
  output = slurp(log);
  return exit_code_of(status);
}

#ifdef TLBENCH_BINARY
// Runs the tlbench binary under test with `env` prefixed (e.g. "TLBENCH_INJECT_FAULT=..."),
// stdout and stderr captured.
inline CommandResult run_tlbench(const std::string& args, const std::filesystem::path& dir,
                                 const std::string& env = "") {
  return run_command(env + " " + TLBENCH_BINARY + " " + args, dir);
}
#endif

}  // namespace tlb::test
