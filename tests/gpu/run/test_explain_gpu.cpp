// tlbench explain end to end on a GPU: every stage of each configuration with its FLOPs and
// floor, the events' stages adding up to the same forward without PDL, the marginal costs and
// the launch gaps adding up to the forward, and the ceilings cached per device; and
// tlbench_kernel_bench stages, the same stages' kernels launched alone, which add up to about
// the forward.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cpu/ablation/ablation_test_util.hpp"
#include "gpu_test_util.hpp"
#include "stack/stage_costs.hpp"
#include "stage_timing.hpp"
#include "test_support.hpp"

using namespace tlb;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Large enough that the events' own cost is a small share of the forward (each costs 2-3 us
// of GPU time, in an eager forward and as a graph node alike: 14 of them took a 0.26 ms
// forward of 2048 tokens up by 7-14 % on an H100), small enough for a test.
const char* kCases = R"({"cases": [
  {"id": 4, "name": "explain-tiny", "batch": 1, "seq": 128, "d_model": 512, "heads": 8, "d_ff": 2048,
   "layers": 4, "mask": "none"},
  {"id": 3, "name": "explain-small", "batch": 16, "seq": 1024, "d_model": 1024, "heads": 16, "d_ff": 4096,
   "layers": 2, "mask": "causal"}
]})";

}  // namespace

TEST_CASE("tlbench explain: stages that add up to the forward, floors, cached ceilings", "[gpu][explain]") {
  TLB_REQUIRE_GPU();
  const fs::path dir = test::fresh_dir("tlbench-gpu", "explain");
  const fs::path cases = dir / "cases.json";
  std::ofstream(cases) << kCases;
  const fs::path ceilings = dir / "ceilings.json";
  for (const char* dtype : {"fp16", "fp32"}) {
    INFO(dtype);
    const test::CommandResult r = test::run_tlbench(
        "explain --config " + cases.string() + " --case 3 --dtype " + dtype +
            " --configs 00000,11110,11111,auto --reps 10 --json --ceilings " + ceilings.string(),
        dir);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const json e = json::parse(r.out);
    CHECK(e["ceilings"]["tensor_tflops"].get<double>() > 1);
    CHECK(e["ceilings"]["bandwidth_gbs"].get<double>() > 100);
    REQUIRE(e["configs"].size() == 4);
    for (const json& c : e["configs"]) {
      INFO(c["config"].get<std::string>());
      REQUIRE(c["stages"].size() == kNumCostStages);
      // The qkv stage's FLOPs: 2 T d 3d per layer (T = 16384 tokens), both layers.
      CHECK(c["stages"][1]["flops"].get<double>() == Approx(2.0 * 16384 * 1024 * 3 * 1024 * 2));
      for (const json& st : c["stages"]) {
        CHECK(st["floor_ms"].get<double>() > 0);
        CHECK(st["events_ms"].get<double>() > 0);
        // A marginal cost is a difference of two timings: near zero it may dip a little below.
        CHECK(st["marginal_ms"].get<double>() > -0.02 * c["forward_ms"].get<double>());
      }
      // The events' stages against the same forward timed without them, both without PDL (a
      // graph configuration's replayed); an eager configuration's forward as run times it
      // against its uncaptured forward, the same launches timed apart.
      INFO(c.dump());
      const double serial = c["serial_ms"].get<double>(), forward = c["forward_ms"].get<double>();
      CHECK(std::fabs(c["events_sum_ms"].get<double>() / serial - 1) < 0.05);
      // One event's own cost: a few microseconds of GPU time.
      CHECK(c["event_ms"].get<double>() < 0.05);
      if (!c["graph"].get<bool>()) CHECK(std::fabs(c["eager_ms"].get<double>() / forward - 1) < 0.05);
      // Inside a graph the stages' own costs account for nearly all of the replay.
      CHECK(std::fabs(c["marginal_sum_ms"].get<double>() / c["replayed_ms"].get<double>() - 1) < 0.15);
    }
    CHECK(e["configs"][3]["config"].get<std::string>().rfind("auto=", 0) == 0);
  }
  // A launch-bound forward (case 1's shape: 0.09 ms on an H200, where 28 events cost 60 % of
  // it): its stages, less the events' own cost, still add up to the forward without events.
  {
    const test::CommandResult tiny = test::run_tlbench(
        "explain --config " + cases.string() + " --case 4 --configs 11110,11111 --reps 30 --json --ceilings " +
            ceilings.string(),
        dir);
    INFO(tiny.err);
    REQUIRE(tiny.exit_code == 0);
    for (const json& c : json::parse(tiny.out)["configs"]) {
      INFO(c.dump());
      const double event = c["event_ms"].get<double>();
      // 30 short forwards pin an event's cost down: the forward's own estimate is taken.
      CHECK(c["event_ms_source"].get<std::string>() == "forward");
      CHECK(c["event_forward_se_ms"].get<double>() < kEventCostPrecisionMs);
      CHECK(event == c["event_forward_ms"].get<double>());
      CHECK(event > 0.0005);  // events do cost: 2-3 us each where measured
      CHECK(event < 0.01);
      CHECK(std::fabs(c["events_sum_ms"].get<double>() / c["serial_ms"].get<double>() - 1) < 0.10);
    }
  }
  // With PDL off the forward as run is the forward without PDL: no overlap to speak of.
  {
    const test::CommandResult off = test::run_tlbench(
        "explain --config " + cases.string() + " --case 3 --configs 11110,11111 --reps 10 --json --ceilings " +
            ceilings.string(),
        dir, "TLBENCH_PDL=0");
    INFO(off.err);
    REQUIRE(off.exit_code == 0);
    for (const json& c : json::parse(off.out)["configs"]) {
      INFO(c.dump());
      CHECK(std::fabs(c["pdl_overlap_ms"].get<double>()) < 0.03 * c["forward_ms"].get<double>());
    }
  }
  // The ceilings file now holds both maths for this device; a second run reads them.
  const json cached = json::parse(test::slurp(ceilings));
  CHECK(cached["ceilings"].contains("fp16"));
  CHECK(cached["ceilings"].contains("fp32-tf32"));
  const test::CommandResult again = test::run_tlbench(
      "explain --config " + cases.string() + " --case 3 --configs 11111 --reps 5 --json --ceilings " + ceilings.string(),
      dir);
  REQUIRE(again.exit_code == 0);
  CHECK(json::parse(again.out)["ceilings_source"].get<std::string>() == ceilings.string());
  // And the table names every stage and the launch gaps.
  const test::CommandResult table = test::run_tlbench(
      "explain --config " + cases.string() + " --case 3 --configs 11111 --reps 5 --ceilings " + ceilings.string(), dir);
  REQUIRE(table.exit_code == 0);
  for (const char* word :
       {"ln1", "qkv", "attn", "out_proj", "ln2", "ffn_up", "ffn_down", "PDL overlap", "launch gaps", "forward"})
    CHECK_THAT(table.out, Catch::Contains(word));
  fs::remove_all(dir);
}

// The kernel benchmark this test binary was built with, or, where its binaries were built on
// another machine (scripts/prebuild-gpu.sh), the one TLBENCH_KERNEL_BENCH names.
static std::string kernel_bench() {
  const char* env = std::getenv("TLBENCH_KERNEL_BENCH");
  return test::shell_quote(env != nullptr && *env != '\0' ? env : TLBENCH_KERNEL_BENCH);
}

TEST_CASE("tlbench_kernel_bench stages: each stage of the auto configuration alone, adding up to about its forward",
          "[gpu][explain]") {
  TLB_REQUIRE_GPU();
  const fs::path dir = test::fresh_dir("tlbench-gpu", "stages");
  fs::create_directories(dir / "configs");
  std::ofstream(dir / "configs" / "cases.json") << kCases;  // the benchmark reads configs/cases.json
  const test::CommandResult r = test::run_command(
      // Launches unsynchronised, as a user runs it: the stages are then timed behind the launch
      // hold (ctest sets TLBENCH_SYNC_LAUNCHES=1 for the tests, which would switch it off).
      "cd " + test::shell_quote(dir.string()) + " && TLBENCH_SYNC_LAUNCHES=0 " + kernel_bench() +
          " stages stages.jsonl --cases 3 --dtypes fp16",
      dir);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::ifstream in(dir / "stages.jsonl");
  std::string line;
  double sum = 0, forward = 0;
  int rows = 0;
  while (std::getline(in, line)) {
    const json row = json::parse(line);
    INFO(line);
    CHECK(row["kernel"] == "stage");
    CHECK(row["case_id"] == 3);
    CHECK(row["dtype"] == "fp16");
    CHECK(row["config"].get<std::string>().rfind("auto=", 0) == 0);
    CHECK(row["stage"] == to_string(static_cast<CostStage>(rows)));
    CHECK(row["layers"] == 2);
    CHECK(row["ms"].get<double>() > 0);
    CHECK(row["forward_in_turns_ms"].get<double>() > 0);
    CHECK(row["stage_launch_hold"] == true);  // the hold applied: the stage's kernels timed behind it
    sum += row["ms"].get<double>();
    forward = row["forward_ms"].get<double>();
    ++rows;
  }
  CHECK(rows == kNumCostStages);
  // 16 384 tokens in two layers: launch gaps are a small share, and no stage's kernels run
  // much faster alone than inside the forward.
  CHECK(sum > 0.7 * forward);
  CHECK(sum < 1.5 * forward);
  fs::remove_all(dir);
}
