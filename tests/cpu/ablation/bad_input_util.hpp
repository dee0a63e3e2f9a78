// Helpers of the bad-input CLI tests (test_bad_input_*.cpp): the tlbench binary run in a
// scratch folder, the one-line exit-2 check, broken copies of the results fixture, and a child
// measured alone for time and memory.
#pragma once

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ablation_test_util.hpp"

namespace tlb::test::bad_input {

namespace fs = std::filesystem;

struct Scratch : tlb::test::Scratch {
  explicit Scratch(const std::string& name) : tlb::test::Scratch("tlbench-badinput", name) {}
};

inline const std::string kFixture = std::string(TLBENCH_SOURCE_DIR) + "/tests/fixtures/results-small";
inline const std::string kCases = std::string(TLBENCH_SOURCE_DIR) + "/configs/cases.json";
inline const std::string kGates = std::string(TLBENCH_SOURCE_DIR) + "/configs/gates.json";

struct Result {
  int rc = -1;
  std::string out, err;
};

// tlbench with `args`, run in the scratch folder (so a stray file would show in its listing).
inline Result tlbench(const std::string& args, const Scratch& s) {
  const tlb::test::CommandResult c =
      tlb::test::run_command("cd " + shell_quote(s.dir.string()) + " && " + TLBENCH_BINARY + " " + args, s.dir);
  return Result{c.exit_code, c.out, c.err};
}

// Exit 2, nothing on stdout, exactly one line on stderr that contains every phrase.
inline void check_refused(const Result& r, std::initializer_list<std::string> phrases) {
  INFO("stderr: " << r.err);
  INFO("stdout: " << r.out);
  CHECK(r.rc == 2);
  CHECK(r.out.empty());
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.err.rfind("tlbench: ", 0) == 0);
  for (const std::string& p : phrases) CHECK(r.err.find(p) != std::string::npos);
  CHECK(r.err.find("json.exception") == std::string::npos);
}

// A copy of the small results fixture in the scratch folder, to be broken by a test.
inline std::string copy_fixture(const Scratch& s, const std::string& name = "res") {
  const fs::path d = s.dir / name;
  fs::create_directories(d);
  for (const char* f : {"points.jsonl", "run.json"}) fs::copy_file(fs::path(kFixture) / f, d / f);
  return d.string();
}

// Replaces the first occurrence of `from` in `text`.
inline std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

inline std::string nested(size_t bytes) {
  return std::string(bytes / 2, '[') + std::string(bytes / 2, ']');
}

inline const char* const kOneCase =
    R"({"cases": [{"id": 1, "name": "a", "batch": 2, "seq": 16, "d_model": 64, "heads": 4, "d_ff": 128, "layers": 2, "mask": "none"}]})";

// The child's exit code, wall and CPU seconds and peak resident memory, measured on that child
// alone.
struct Measured {
  int rc = -1;
  double seconds = 0, cpu_seconds = 0;
  long max_rss_kib = 0;
  std::string err;
};

inline Measured measure(const std::vector<std::string>& args, const Scratch& s) {
  const std::string err_file = s.path("measure-stderr.txt");
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int null_fd = ::open("/dev/null", O_WRONLY);
    ::dup2(null_fd, 1);
    ::dup2(fd, 2);
    std::vector<char*> argv;
    std::string bin = TLBENCH_BINARY;
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  int status = 0;
  rusage u{};
  ::wait4(pid, &status, 0, &u);
  Measured m;
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  m.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  m.max_rss_kib = u.ru_maxrss;
  m.cpu_seconds = static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
                  1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
  m.err = slurp(err_file);
  fs::remove(err_file);
  return m;
}

// What the binary takes just to start (its CUDA runtime and kernel images), the floor against
// which reading a file is measured.
inline long startup_rss_kib(const Scratch& s) {
  static const long rss = measure({"--version"}, s).max_rss_kib;
  return rss;
}

// A 1 MB file of nested brackets is refused quickly and cheaply: under 0.5 s of CPU (not wall
// time: tests run side by side) and under 100 MB beyond the binary's start.
inline void check_deep_refused(const std::vector<std::string>& args, const std::string& file, const Scratch& s) {
  const Measured m = measure(args, s);
  INFO("stderr: " << m.err);
  CHECK(m.rc == 2);
  CHECK(m.err.find(file) != std::string::npos);
  CHECK(m.err.find("nested deeper than 32 levels") != std::string::npos);
  CHECK(std::count(m.err.begin(), m.err.end(), '\n') == 1);
  CHECK(m.cpu_seconds < 0.5);
  CHECK(m.seconds < 5.0);
  CHECK(m.max_rss_kib - startup_rss_kib(s) < 100 * 1024);
}

}  // namespace tlb::test::bad_input
