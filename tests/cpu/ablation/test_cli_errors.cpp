// The tlbench binary on bad input: exit code 2, exactly one line on stderr naming the file and
// the JSON path (or the option), nothing on stdout and nothing written to disk.
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "ablation_test_util.hpp"

namespace fs = std::filesystem;

namespace {

struct Result {
  int exit_code = -1;
  std::string out, err;
  double seconds = 0;      // wall clock
  double cpu_seconds = 0;  // user + system of the child processes (robust to a loaded machine)
};

double children_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_CHILDREN, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

using tlb::test::shell_quote;
using tlb::test::slurp;

// A scratch folder per test, removed afterwards.
struct Scratch : tlb::test::Scratch {
  explicit Scratch(const std::string& name) : tlb::test::Scratch("tlbench-cli", name) {}
};

// `env`: assignments put before the command ("NAME=value ...").
Result run_tlbench(const std::string& args, const Scratch& s, const std::string& env = "") {
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = children_cpu_seconds();
  tlb::test::CommandResult c =
      tlb::test::run_command((env.empty() ? "" : env + " ") + shell_quote(TLBENCH_BINARY) + " " + args, s.dir);
  Result r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.cpu_seconds = children_cpu_seconds() - cpu_start;
  r.exit_code = c.exit_code;
  r.out = std::move(c.out);
  r.err = std::move(c.err);
  return r;
}

// Exit 2, one stderr line "tlbench: <prefix>..." containing `phrase`, empty stdout.
void check_config_failure(const Result& r, const std::string& prefix, const std::string& phrase) {
  INFO("stderr: " << r.err);
  INFO("stdout: " << r.out);
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  REQUIRE(!r.err.empty());
  CHECK(r.err.back() == '\n');
  CHECK(r.err.find('\n') == r.err.size() - 1);
  CHECK(r.err.rfind("tlbench: " + prefix, 0) == 0);
  CHECK(r.err.find(phrase) != std::string::npos);
}

const char* kGoodCase =
    R"({"id": 1, "name": "a", "batch": 2, "seq": 16, "d_model": 64, "heads": 4, "d_ff": 128, "layers": 2, "mask": "none"})";

std::string cases_with(const std::string& second_case) {
  return std::string("{\"cases\": [") + kGoodCase + ",\n  " + second_case + "]}";
}

bool has_subcommand(const std::string& name) {
  Scratch s("help");
  const Result r = run_tlbench("--help", s);
  return r.out.find("\n  " + name + " ") != std::string::npos;
}

}  // namespace

TEST_CASE("tlbench plan on bad cases files: exit 2, one line with file and JSON path", "[cli]") {
  Scratch s("plan-cases");
  struct Bad {
    const char* name;
    std::string text;
    const char* path;
    const char* phrase;
  };
  const Bad bad[] = {
      {"heads.json",
       cases_with(R"({"id": 2, "name": "b", "batch": 1, "seq": 8, "d_model": 768, "heads": 7, "d_ff": 64, "layers": 1, "mask": "none"})"),
       "$.cases[1].heads", "7 does not divide d_model 768"},
      {"unknown.json",
       cases_with(R"({"id": 2, "name": "b", "batch": 1, "seq": 8, "d_model": 64, "heads": 4, "d_ff": 64, "layers": 1, "mask": "none", "dropout": 0})"),
       "$.cases[1].dropout", "unknown key"},
      {"lens.json",
       cases_with(R"({"id": 2, "name": "b", "batch": 2, "seq": 8, "d_model": 64, "heads": 4, "d_ff": 64, "layers": 1, "mask": "padding", "valid_lens": [8, 9]})"),
       "$.cases[1].valid_lens[1]", "9 is outside 1..8"},
      {"seq.json",
       cases_with(R"({"id": 2, "name": "b", "batch": 1, "seq": 0, "d_model": 64, "heads": 4, "d_ff": 64, "layers": 1, "mask": "none"})"),
       "$.cases[1].seq", "positive integer, got 0"},
      {"type.json",
       cases_with(R"({"id": 2, "name": "b", "batch": "1", "seq": 8, "d_model": 64, "heads": 4, "d_ff": 64, "layers": 1, "mask": "none"})"),
       "$.cases[1].batch", "got string \"1\""},
  };
  for (const auto& b : bad) {
    INFO(b.name);
    const std::string file = s.write(b.name, b.text);
    check_config_failure(run_tlbench("plan --mem-gib 80 --config " + shell_quote(file), s),
                         file + ": " + b.path + ": ", b.phrase);
  }

  const std::string broken = s.write("broken.json", "{\"cases\": [\n  {\"id\": 1\n  \"name\": \"x\"}]}");
  check_config_failure(run_tlbench("plan --config " + shell_quote(broken), s),
                       broken + ": line 3, column 8: malformed JSON",
                       "unexpected string literal");

  const std::string missing = (s.dir / "missing.json").string();
  check_config_failure(run_tlbench("plan --config " + shell_quote(missing), s),
                       missing + ": cannot read", "No such file");
}

TEST_CASE("tlbench plan on a bad techniques file or selection: exit 2, one line", "[cli]") {
  Scratch s("plan-tech");
  const std::string cases = s.write("cases.json", cases_with(
      R"({"id": 2, "name": "b", "batch": 1, "seq": 8, "d_model": 64, "heads": 4, "d_ff": 64, "layers": 1, "mask": "none"})"));
  const std::string tech = s.write(
      "t.json", R"({"techniques": [{"name": "qkv", "description": "x"}, {"name": "flash", "description": "y"}]})");
  check_config_failure(
      run_tlbench("plan --config " + shell_quote(cases) + " --techniques " + shell_quote(tech), s),
      tech + ": $.techniques[1].name: ", "unknown technique \"flash\"");

  // techniques.json beside the cases file is picked up when --techniques is not given.
  s.write("techniques.json", R"({"techniques": [{"name": "attn", "description": ""}]})");
  check_config_failure(run_tlbench("plan --config " + shell_quote(cases), s),
                       (s.dir / "techniques.json").string() + ": $.techniques[0].description: ",
                       "is empty");
  fs::remove(s.dir / "techniques.json");

  check_config_failure(run_tlbench("plan --config " + shell_quote(cases) + " --cases 3-1", s),
                       "--cases: '3-1' is not a valid range", "range");
  check_config_failure(run_tlbench("plan --config " + shell_quote(cases) + " --cases 7", s),
                       "--cases: no case with id 7", "ids: 1-2");
  check_config_failure(run_tlbench("plan --config " + shell_quote(cases) + " --configs 1x0", s),
                       "--configs: '1x0' has 3 characters", "needs 5");
  check_config_failure(run_tlbench("plan --config " + shell_quote(cases) + " --dtypes fp8", s),
                       "--dtypes: unknown dtype 'fp8'", "fp16");
  check_config_failure(run_tlbench("plan --config " + shell_quote(cases) + " --mem-gib -3", s),
                       "--mem-gib", "positive");
  check_config_failure(run_tlbench("plan --config " + shell_quote(cases) + " --fp32-math fast", s),
                       "--fp32-math: unknown mode 'fast'", "tf32 or ieee");
  check_config_failure(run_tlbench("plan", s), "", "--config");
}

TEST_CASE("tlbench plan on the official configs: 448 points per dtype in well under a second", "[cli]") {
  Scratch s("plan-official");
  const std::string cfg = std::string(TLBENCH_SOURCE_DIR) + "/configs/cases.json";
  const Result r = run_tlbench("plan --mem-gib 80 --config " + shell_quote(cfg), s);
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.err.empty());
  // CPU time, not wall time: CI machines run tests side by side.
  CHECK(r.cpu_seconds < 1.0);
  CHECK(r.seconds < 10.0);
  CHECK(r.out.find("= 1344 points (per dtype: fp16 448, bf16 448, fp32 448)") != std::string::npos);
  CHECK(r.out.find("case 14 fp16: 16 nonviable point(s) (16 without attn, 0 with attn)") !=
        std::string::npos);
  CHECK(r.out.find(cfg.substr(0, cfg.size() - 10) + "techniques.json") != std::string::npos);

  const Result j = run_tlbench("plan --json --mem-gib 80 --seed 5 --dtypes fp32 --config " + shell_quote(cfg), s);
  CHECK(j.exit_code == 0);
  CHECK(j.out.rfind("{", 0) == 0);
  CHECK(j.out.find("\"total_points\": 448") != std::string::npos);
  CHECK(j.out.find("\"seed\": 5") != std::string::npos);
}

TEST_CASE("tlbench run on a bad config: exit 2, one line, output folder not created", "[cli]") {
  REQUIRE(has_subcommand("run"));
  Scratch s("run");
  const std::string file = s.write("heads.json", cases_with(
      R"({"id": 2, "name": "b", "batch": 1, "seq": 8, "d_model": 768, "heads": 7, "d_ff": 64, "layers": 1, "mask": "none"})"));
  const fs::path out = s.dir / "results";
  check_config_failure(
      run_tlbench("run --config " + shell_quote(file) + " --out " + shell_quote(out.string()), s),
      file + ": $.cases[1].heads: ", "does not divide");
  CHECK_FALSE(fs::exists(out));

  const std::string good = s.write("good.json", cases_with(
      R"({"id": 2, "name": "b", "batch": 1, "seq": 8, "d_model": 64, "heads": 4, "d_ff": 64, "layers": 1, "mask": "none"})"));
  check_config_failure(run_tlbench("run --config " + shell_quote(good) + " --cases 3-1 --out " +
                                       shell_quote(out.string()), s),
                       "--cases: '3-1' is not a valid range", "range");
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("tlbench under an unknown TLBENCH_PDL value: exit 2, one line naming it, nothing written", "[cli]") {
  REQUIRE(has_subcommand("run"));
  Scratch s("pdl");
  const std::string good = s.write("good.json", std::string("{\"cases\": [") + kGoodCase + "]}");
  const fs::path out = s.dir / "results";
  for (const char* value : {"1", "off", "ALL", "default "}) {
    INFO(value);
    check_config_failure(run_tlbench("run --config " + shell_quote(good) + " --out " + shell_quote(out.string()), s,
                                     std::string("TLBENCH_PDL=") + shell_quote(value)),
                         "TLBENCH_PDL: unknown value", "expected 0, all or default");
    CHECK_FALSE(fs::exists(out));
  }
  // The values it knows pass this check (plan touches no device).
  for (const char* value : {"0", "all", "default", ""}) {
    INFO(value);
    const Result r = run_tlbench("plan --mem-gib 80 --config " + shell_quote(good), s,
                                 std::string("TLBENCH_PDL=") + shell_quote(value));
    CHECK(r.exit_code == 0);
  }
}

TEST_CASE("tlbench under an unknown TLBENCH_GEMM_STORE value: exit 2, one line naming it, nothing written", "[cli]") {
  REQUIRE(has_subcommand("run"));
  Scratch s("gemm-store");
  const std::string good = s.write("good.json", std::string("{\"cases\": [") + kGoodCase + "]}");
  const fs::path out = s.dir / "results";
  for (const char* value : {"TMA", "staged ", "automatic"}) {
    INFO(value);
    check_config_failure(run_tlbench("run --config " + shell_quote(good) + " --out " + shell_quote(out.string()), s,
                                     std::string("TLBENCH_GEMM_STORE=") + shell_quote(value)),
                         "TLBENCH_GEMM_STORE: unknown value", "expected auto, staged, tma or copy");
    CHECK_FALSE(fs::exists(out));
  }
  for (const char* value : {"auto", "staged", "tma", "copy", ""}) {
    INFO(value);
    const Result r = run_tlbench("plan --mem-gib 80 --config " + shell_quote(good), s,
                                 std::string("TLBENCH_GEMM_STORE=") + shell_quote(value));
    CHECK(r.exit_code == 0);
  }
}

TEST_CASE("tlbench run on out-of-range numeric options: exit 2, one line naming the option", "[cli]") {
  REQUIRE(has_subcommand("run"));
  Scratch s("run-ranges");
  const std::string good = s.write("good.json", cases_with(
      R"({"id": 2, "name": "b", "batch": 1, "seq": 8, "d_model": 64, "heads": 4, "d_ff": 64, "layers": 1, "mask": "none"})"));
  const fs::path out = s.dir / "results";
  struct Bad {
    std::string option, phrase;
  };
  for (const Bad& b : {Bad{"--min-reps -5", "--min-reps -5: expected a positive integer"},
                       Bad{"--min-reps 0", "--min-reps 0: expected a positive integer"},
                       Bad{"--max-reps 0", "--max-reps 0: expected a positive integer"},
                       Bad{"--point-budget-ms 0", "--point-budget-ms 0: expected"},
                       Bad{"--point-budget-ms 1e300", "--point-budget-ms 1e+300: expected"},
                       Bad{"--atol nan", "--atol nan: expected a finite number >= 0"},
                       Bad{"--rtol inf", "--rtol inf: expected a finite number >= 0"},
                       Bad{"--atol -1", "--atol -1: expected"},
                       Bad{"--mem-reserve-mib 1e300", "--mem-reserve-mib 1e+300: expected"},
                       Bad{"--seed -1", "--seed -1: expected an integer in 0 .. 18446744073709551615"},
                       Bad{"--seed 123456789012345678901234", "--seed 123456789012345678901234: expected"}}) {
    INFO(b.option);
    const Result r = run_tlbench("run --config " + shell_quote(good) + " " + b.option + " --out " +
                                     shell_quote(out.string()), s);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(b.phrase) != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK_FALSE(fs::exists(out));
  }
}
