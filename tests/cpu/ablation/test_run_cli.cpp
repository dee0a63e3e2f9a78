// `tlbench run` before it touches a device: its options survive run.json for --resume, and
// every refusal (existing --out, --resume of a folder that is not a run, an edited cases file,
// malformed fault-injection variables, --out with --resume) is exit 2 with nothing written.
// Without a GPU the run says "no CUDA device: ..." and exits 3, again writing nothing.
#include <catch2/catch.hpp>

#include <cmath>

#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ablation_test_util.hpp"
#include "config.hpp"
#include "grid.hpp"
#include "provenance.hpp"
#include "runner.hpp"

using namespace tlb;
namespace fs = std::filesystem;

namespace {

struct Result {
  int rc = -1;
  std::string out, err;
};

using test::slurp;

struct Scratch : test::Scratch {
  explicit Scratch(const std::string& name) : test::Scratch("tlbench-runcli", name) {}
};

Result tlbench(const std::string& args, const Scratch& s, const std::string& env = "") {
  const test::CommandResult c =
      test::run_command("cd " + s.dir.string() + " && " + env + " " + TLBENCH_BINARY + " " + args, s.dir);
  return Result{c.exit_code, c.out, c.err};
}

const std::string kCases = std::string(TLBENCH_SOURCE_DIR) + "/configs/cases.json";

int lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

}  // namespace

TEST_CASE("run options round-trip through run.json", "[run]") {
  RunOptions o;
  o.cases_path = "/x/cases.json";
  o.cases_sel = "1-3";
  o.configs_sel = "1xxxx";
  o.dtypes_sel = "fp16";
  o.out_dir = "runs/a";
  o.quick = true;
  o.seed = 0xfedcba9876543210ull;
  o.fp32_math = Fp32Math::ieee;
  o.l2_flush = true;
  o.aa = true;
  o.layer_trace = true;
  o.stage_times = true;
  o.stage_times_configs = "00000,auto";
  o.tol.atol = 1e-3;
  o.tol.rtol = 5e-2;
  o.min_reps = 7;
  o.max_reps = 70;
  o.point_budget_ms = 33.5;
  o.blocks = 3;
  o.memory_margin_mib = 2048;
  o.policy = "auto";
  o.dispatch_table = "/x/dispatch.json";
  const nlohmann::json j = nlohmann::json::parse(options_to_json(o).dump());
  const RunOptions b = options_from_json(j, "run.json");
  CHECK(options_to_json(b) == options_to_json(o));
  CHECK(b.seed == o.seed);
  CHECK(b.fp32_math == Fp32Math::ieee);
  CHECK(b.policy == "auto");
  CHECK(b.dispatch_table == "/x/dispatch.json");
  CHECK(b.stage_times_configs == "00000,auto");
  // A run.json written before --stage-times-configs existed times every point's stages.
  nlohmann::json before_configs = j;
  before_configs.erase("stage_times_configs");
  CHECK(options_from_json(before_configs, "run.json").stage_times_configs.empty());
  // A run.json written before auto points existed resumes with each case's own policy.
  nlohmann::json old = j;
  old.erase("policy");
  old.erase("dispatch_table");
  const RunOptions from_old = options_from_json(old, "run.json");
  CHECK(from_old.policy == "case");
  CHECK(from_old.dispatch_table.empty());
  // One before points were timed in blocks resumes timing each in one.
  old.erase("blocks");
  CHECK(options_from_json(old, "run.json").blocks == 1);
  nlohmann::json many = j;
  many["blocks"] = 17;
  CHECK_THROWS_WITH(options_from_json(many, "r.json"), Catch::Contains("$.options.blocks"));

  nlohmann::json bad = j;
  bad.erase("seed");
  CHECK_THROWS_WITH(options_from_json(bad, "r.json"), Catch::Contains("$.options.seed: missing"));
  bad = j;
  bad["aa"] = "yes";
  CHECK_THROWS_WITH(options_from_json(bad, "r.json"), Catch::Contains("$.options.aa"));
}

TEST_CASE("mode defaults: a full run fits the official sweep, --quick is a smoke run", "[run]") {
  RunOptions full;
  resolve_defaults(full);
  CHECK(full.min_reps == 10);
  CHECK(full.max_reps == 2000);
  // 1344 points in 8 minutes leave ~0.36 s a point; the budget covers warm-up and timing.
  CHECK(full.point_budget_ms * 1344 / 1000.0 < 8 * 60 * 0.6);
  const TimerOptions t = timer_options(full);
  CHECK(t.warmup_min_runs == 3);
  CHECK(t.warmup_min_ms == 25);
  CHECK(t.stop.target_rel_half_width == 0.01);
  CHECK(t.stop.floor_pairs == 5);
  // Two blocks a point, sharing the budget and the pairs: 3 + 2 pairs where the budget runs
  // out first, the interval target met by the pooled pairs, a lighter warm-up after the first.
  CHECK(full.blocks == 2);
  const TimerOptions b0 = block_timer_options(full, 0), b1 = block_timer_options(full, 1);
  CHECK(b0.stop.budget_ms == 50);
  CHECK(b0.stop.min_pairs == 5);
  CHECK(b0.stop.max_pairs == 1000);
  CHECK(b0.stop.floor_pairs == 3);
  CHECK(b1.stop.floor_pairs == 2);
  CHECK(b0.stop.target_rel_half_width == Approx(0.01 * std::sqrt(2.0)));
  CHECK(b0.warmup_min_runs == 3);
  CHECK(b0.warmup_ref_runs == 1);
  CHECK(b1.warmup_min_runs == 1);
  CHECK(b1.warmup_min_ms == 5);
  CHECK(b1.warmup_ref_runs == 0);
  CHECK(block_floor_pairs(5, 1, 0) == 5);
  CHECK(block_floor_pairs(5, 3, 0) == 2);
  CHECK(block_floor_pairs(5, 3, 2) == 2);  // never a block of one pair
  CHECK(block_floor_pairs(7, 3, 0) == 3);
  // --max-reps 10 in three blocks: 4 + 3 + 3, never above the limit nor below --min-reps 10.
  RunOptions three;
  three.min_reps = 10;
  three.max_reps = 10;
  three.blocks = 3;
  resolve_defaults(three);
  size_t max_total = 0, min_total = 0;
  for (size_t b = 0; b < 3; ++b) {
    const TimerOptions t = block_timer_options(three, b);
    CHECK(t.stop.min_pairs <= t.stop.max_pairs);
    max_total += t.stop.max_pairs;
    min_total += t.stop.min_pairs;
  }
  CHECK(max_total == 10);
  CHECK(block_timer_options(three, 0).stop.max_pairs == 4);
  CHECK(min_total == 10);  // exactly the pairs asked for: each block's minimum is its maximum
  RunOptions quick;
  quick.quick = true;
  resolve_defaults(quick);
  CHECK(quick.min_reps == 3);
  CHECK(quick.max_reps == 200);
  CHECK(quick.point_budget_ms == 25);
  const TimerOptions q = timer_options(quick);
  CHECK(q.warmup_min_runs == 1);
  CHECK(q.stop.floor_pairs == 3);
  CHECK(q.stop.min_pairs == 3);
  CHECK(q.stop.budget_ms == 25);
  CHECK(quick.blocks == 1);
  CHECK(block_timer_options(quick, 0).stop.budget_ms == 25);
  // Without --configs, --quick keeps 6 of the 32 configurations: the official 14 cases x 3
  // dtypes are 252 points (294 with auto), whose budgets leave most of a minute for building
  // configurations, accuracy runs and the goldens.
  const CaseSet cases = load_cases(kCases);
  Selection sel = parse_selection("", "", "", cases, default_techniques());
  narrow_for_quick(sel, default_techniques());
  const size_t points = build_grid(cases, default_techniques(), sel, 1).size();
  CHECK(points == 252);
  CHECK(quick.point_budget_ms * (points + 42) / 1000.0 < 10);
  // An explicit --min-reps below the floor lowers the floor with it.
  quick.min_reps = 2;
  CHECK(timer_options(quick).stop.floor_pairs == 2);
  RunOptions bad;
  bad.min_reps = 50;
  bad.max_reps = 10;
  CHECK_THROWS_AS(resolve_defaults(bad), ConfigError);
}

TEST_CASE("tlbench run refuses bad output folders and hooks with exit 2, writing nothing", "[run][cli]") {
  Scratch s("refuse");
  fs::create_directories(s.dir / "taken");
  std::ofstream(s.dir / "taken" / "keep.txt") << "x";

  Result r = tlbench("run --config " + kCases + " --out taken", s);
  CHECK(r.rc == 2);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find("taken") != std::string::npos);
  CHECK(r.err.find("--resume") != std::string::npos);

  r = tlbench("run --resume taken", s);  // a folder without run.json
  CHECK(r.rc == 2);
  CHECK(r.err.find("run.json") != std::string::npos);

  r = tlbench("run --resume nowhere", s);
  CHECK(r.rc == 2);

  r = tlbench("run --resume taken --out other", s);
  CHECK(r.rc == 2);

  r = tlbench("run --config " + kCases + " --out fresh", s, "TLBENCH_INJECT_FAULT=1:fp64:00000");
  CHECK(r.rc == 2);
  CHECK(r.err.find("TLBENCH_INJECT_FAULT") != std::string::npos);

  r = tlbench("run --config " + kCases + " --out fresh", s, "TLBENCH_INJECT_SIGINT_AFTER=soon");
  CHECK(r.rc == 2);

  r = tlbench("run --config " + kCases + " --out fresh --fp32-math fast", s);
  CHECK(r.rc == 2);

  r = tlbench("run --config " + kCases + " --out fresh --min-reps 50 --max-reps 5", s);
  CHECK(r.rc == 2);

  r = tlbench("run --config " + kCases + " --out fresh --stage-times-configs ''", s);
  CHECK(r.rc == 2);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find("--stage-times-configs: an empty value") != std::string::npos);

  r = tlbench("run --config " + kCases + " --out fresh --stage-times-configs 00000,auto,0x", s);
  CHECK(r.rc == 2);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find("--stage-times-configs: '0x' has 2 characters; a pattern needs 5") != std::string::npos);

  r = tlbench("run --config " + kCases + " --out fresh --policy EFFF", s);
  CHECK(r.rc == 2);
  CHECK(r.err.find("--policy: unknown policy 'EFFF'") != std::string::npos);

  r = tlbench("run --config " + kCases + " --out fresh --policy auto --dispatch-table nowhere.json", s);
  CHECK(r.rc == 2);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find("nowhere.json: cannot read: No such file or directory") != std::string::npos);

  CHECK(s.listing() == std::vector<std::string>{"taken", "taken/keep.txt"});
}

TEST_CASE("tlbench run --resume refuses a cases file edited since the run began", "[run][cli]") {
  Scratch s("edited");
  const fs::path cases = s.dir / "cases.json";
  fs::copy_file(kCases, cases);
  RunOptions o;
  o.cases_path = cases.string();
  o.out_dir = (s.dir / "run").string();
  resolve_defaults(o);
  fs::create_directories(s.dir / "run");
  const std::string fingerprint = file_fingerprint(cases.string());
  nlohmann::json doc = {{"options", options_to_json(o)},
                        {"state", "interrupted"},
                        {"cases_file", {{"path", cases.string()}, {"fingerprint", fingerprint}}}};
  std::ofstream(s.dir / "run" / "run.json") << doc.dump(2);
  std::ofstream(cases, std::ios::app) << "\n";  // one byte more
  CHECK(file_fingerprint(cases.string()) != fingerprint);
  const std::string before = slurp(s.dir / "run" / "run.json");
  const Result r = tlbench("run --resume run", s);
  CHECK(r.rc == 2);
  CHECK(r.err.find("changed since the run began") != std::string::npos);
  CHECK(slurp(s.dir / "run" / "run.json") == before);
}

TEST_CASE("tlbench run without a GPU: one line and exit 3, nothing written", "[run][cli]") {
  int n = 0;
  if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0) {
    SUCCEED("a GPU is present: covered by the [gpu] runner tests");
    return;
  }
  cudaGetLastError();
  Scratch s("nogpu");
  Result r = tlbench("run --config " + kCases + " --cases 1 --dtypes fp16", s);
  CHECK(r.rc == 3);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.rfind("no CUDA device: ", 0) == 0);
  CHECK(r.out.empty());
  CHECK(s.listing().empty());  // not even runs/
  r = tlbench("info", s);
  CHECK(r.rc == 3);
  CHECK(r.err.rfind("no CUDA device: ", 0) == 0);
}

TEST_CASE("run --resume: files recorded as given, found from where the run began or named anew", "[run][cli]") {
  Scratch s("moved");
  fs::create_directories(s.dir / "old" / "run");
  fs::create_directories(s.dir / "new");
  fs::copy_file(kCases, s.dir / "new" / "cases.json");
  RunOptions o;
  o.cases_path = "old/cases.json";  // as given, relative to the folder the run began in
  o.out_dir = (s.dir / "old" / "run").string();
  resolve_defaults(o);
  const std::string fingerprint = file_fingerprint(kCases);
  const nlohmann::json recorded = {{"options", options_to_json(o)},
                                   {"state", "interrupted"},
                                   {"cases_file", {{"path", "old/cases.json"}, {"fingerprint", fingerprint}}}};
  std::ofstream(s.dir / "old" / "run" / "run.json") << recorded.dump(2);
  nlohmann::json doc;

  // Not found from here: the error names the recorded path and the option that fixes it.
  CHECK_THROWS_WITH(options_for_resume(o.out_dir, doc),
                    Catch::Contains("$.cases_file.path: old/cases.json (as the run was given it) cannot be "
                                    "read from here") &&
                        Catch::Contains("--config PATH"));

  // Named anew: checked by fingerprint, then recorded where it is now.
  const std::string moved = (s.dir / "new" / "cases.json").string();
  const RunOptions r = options_for_resume(o.out_dir, doc, ResumeFiles{moved, ""});
  CHECK(r.cases_path == moved);
  CHECK(r.resume);
  CHECK(doc["cases_file"]["path"] == moved);
  CHECK(doc["options"]["cases_path"] == moved);
  CHECK(doc["cases_file"]["fingerprint"] == fingerprint);

  // Named anew but not the same file: refused.
  std::ofstream(s.dir / "new" / "cases.json", std::ios::app) << "\n";
  CHECK_THROWS_WITH(options_for_resume(o.out_dir, doc, ResumeFiles{moved, ""}),
                    Catch::Contains("changed since the run began"));
  // Where the file is found as recorded, nothing is rewritten.
  fs::create_directories(s.dir / "cwd" / "old");
  fs::copy_file(kCases, s.dir / "cwd" / "old" / "cases.json");
  const fs::path here = fs::current_path();
  fs::current_path(s.dir / "cwd");
  nlohmann::json same;
  const RunOptions q = options_for_resume(o.out_dir, same);
  fs::current_path(here);
  CHECK(q.cases_path == "old/cases.json");
  CHECK(same == recorded);
}

TEST_CASE("host provenance: the CPU, where this thread runs and the load, null where unknown", "[run][provenance]") {
  const nlohmann::json h = host_json(0);
  for (const char* key : {"cpu_model", "logical_cpus", "cpus_allowed", "on_cpu", "cpu_numa_node", "gpu_numa_node",
                          "load_average_1min"})
    CHECK(h.contains(key));
  REQUIRE(h["logical_cpus"].is_number());
  CHECK(h["logical_cpus"].get<int>() >= 1);
  if (h["cpus_allowed"].is_number()) CHECK(h["cpus_allowed"].get<int>() <= h["logical_cpus"].get<int>());
  if (h["on_cpu"].is_number()) CHECK(h["on_cpu"].get<int>() >= 0);
  CHECK((h["load_average_1min"].is_null() || h["load_average_1min"].get<double>() >= 0));
}
