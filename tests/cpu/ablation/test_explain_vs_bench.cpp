// scripts/explain_vs_bench.py, the check that `tlbench explain`'s attention and GEMM lines agree
// with tlbench_kernel_bench's kernels launched alone: on synthetic files, a stage within 5 %
// agrees, one 10 % off does not (exit 1), a launch-bound stage is listed but not judged, a
// stage without its kernel-bench row fails the check, stages are judged by their share of the
// forward where the bench timed one in turns with them (by time otherwise), and a file that
// is not what it should be is one line and exit 2. Skipped (exit 77) without python3.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "ablation_test_util.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* kStages[] = {"ln1", "qkv", "attn", "out_proj", "ln2", "ffn_up", "ffn_down"};

// An explain document of case `id` in `dtype` (fp32: TF32) whose auto configuration's stages
// read events[i] and marginal 0.98 * events[i], and whose forward took `forward` ms (0: a
// document without the field).
json explain_doc(int id, const std::string& dtype, const std::vector<double>& events, double forward = 0.0) {
  json stages = json::array();
  for (size_t i = 0; i < events.size(); ++i)
    stages.push_back({{"stage", kStages[i]}, {"events_ms", events[i]}, {"marginal_ms", 0.98 * events[i]}});
  json automatic = {{"config", "auto=11111"}, {"stages", stages}};
  if (forward > 0) automatic["forward_ms"] = forward;
  return {{"case_id", id},
          {"dtype", dtype},
          {"math", dtype == "fp32" ? "tf32" : "fp32-acc"},
          // The reference beside auto, as gpu-check's explain step measures them: not compared.
          {"configs", json::array({{{"config", "00000"}, {"stages", stages}}, automatic})}};
}

// The kernel-bench rows of the same case: each stage alone at alone[i] ms over `layers` layers,
// timed in turns with a forward of `in_turns` ms (0: rows without the field, as before it).
std::string stage_rows(int id, const std::string& dtype, const std::vector<double>& alone, int layers,
                       double in_turns = 0.0) {
  std::string rows;
  for (size_t i = 0; i < alone.size(); ++i) {
    json row = {{"kernel", "stage"}, {"case_id", id},       {"dtype", dtype},  {"config", "auto=11111"},
                {"stage", kStages[i]}, {"ms", alone[i]}, {"layers", layers}};
    if (in_turns > 0) row["forward_in_turns_ms"] = in_turns;
    rows += row.dump() + "\n";
  }
  return rows;
}

}  // namespace

TEST_CASE("explain_vs_bench.py: stages within 5 % of their kernels alone agree, others and missing rows fail",
          "[scripts]") {
  if (std::system("python3 -c 'import sys' >/dev/null 2>&1") != 0)
    tlb::test::skip_test(Catch::getResultCapture().getCurrentTestName().c_str(), "python3", "no python3 on the PATH");
  const tlb::test::Scratch scratch("tlbench-explain-bench", "check");
  const std::string script =
      "python3 " + tlb::test::shell_quote((fs::path(TLBENCH_SOURCE_DIR) / "scripts" / "explain_vs_bench.py").string());
  const auto run = [&](const std::string& args) {
    return tlb::test::run_command("cd " + tlb::test::shell_quote(scratch.dir.string()) + " && " + script + " " + args,
                                  scratch.dir);
  };
  // Case 12 (one layer) in fp16: every GEMM and attention stage within 4 % of its kernels
  // alone; its LayerNorms (not judged) far off. Case 9 (two layers) in fp32-tf32: its
  // attention alone takes 0.03 ms, 0.015 ms a layer, launch-bound, listed only.
  std::ofstream(scratch.dir / "c12.json") << explain_doc(12, "fp16", {0.3, 0.2, 0.81, 0.1, 0.3, 0.4, 0.4}).dump();
  std::ofstream(scratch.dir / "c9.json") << explain_doc(9, "fp32", {0.1, 0.5, 0.06, 0.2, 0.1, 0.8, 0.8}).dump();
  const std::string both = stage_rows(12, "fp16", {0.1, 0.196, 0.78, 0.104, 0.1, 0.4, 0.39}, 1) +
                           stage_rows(9, "fp32-tf32", {0.1, 0.49, 0.03, 0.2, 0.1, 0.79, 0.81}, 2);
  std::ofstream(scratch.dir / "stages.jsonl") << both;
  tlb::test::CommandResult r = run("stages.jsonl c12.json c9.json");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("9 of 9 judged attention and GEMM stages within 5 %") != std::string::npos);
  CHECK(r.out.find("not judged (launch-bound)") != std::string::npos);
  CHECK(r.out.find("ln1") == std::string::npos);

  // Case 12's attention 10 % slower in the forward than alone: exit 1, naming how far.
  std::ofstream(scratch.dir / "c12.json") << explain_doc(12, "fp16", {0.3, 0.2, 0.858, 0.1, 0.3, 0.4, 0.4}).dump();
  r = run("stages.jsonl c12.json c9.json");
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("off by +10.0 %") != std::string::npos);
  CHECK(r.out.find("8 of 9 judged") != std::string::npos);

  // Shares of the forward: the bench ran 12 % slower than explain throughout (its stages and
  // the forward in turns with them alike), which the share column takes out: all agree. The
  // same rows with case 12's attention 10 % longer than its share: exit 1.
  std::ofstream(scratch.dir / "c12.json") << explain_doc(12, "fp16", {0.3, 0.2, 0.81, 0.1, 0.3, 0.4, 0.4}, 2.5).dump();
  std::ofstream(scratch.dir / "turns.jsonl")
      << stage_rows(12, "fp16", {0.112, 0.224, 0.907, 0.112, 0.112, 0.448, 0.448}, 1, 2.8);
  r = run("turns.jsonl c12.json");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("5 of 5 judged") != std::string::npos);
  CHECK(r.out.find("(by time)") == std::string::npos);
  CHECK(r.out.find("0.893") != std::string::npos);  // the ratio by time, 11 % off, still shown
  std::ofstream(scratch.dir / "c12.json") << explain_doc(12, "fp16", {0.3, 0.2, 0.891, 0.1, 0.3, 0.4, 0.4}, 2.5).dump();
  r = run("turns.jsonl c12.json");
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("off by +10.0 %") != std::string::npos);
  CHECK(r.out.find("4 of 5 judged") != std::string::npos);
  // The earlier files' rows (no forward in turns) are judged by time, and the summary says so.
  r = run("stages.jsonl c12.json");
  CHECK(r.out.find("judged by absolute time") != std::string::npos);

  // A case the kernel bench did not time: every stage of it is unmatched.
  std::ofstream(scratch.dir / "c5.json") << explain_doc(5, "bf16", {0.1, 0.2, 0.3, 0.1, 0.1, 0.4, 0.4}).dump();
  r = run("stages.jsonl c5.json");
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("5 stage(s) without a kernel-bench row: case 5 bf16 auto=11111 qkv") != std::string::npos);

  // Only launch-bound stages: nothing judged is no pass.
  std::ofstream(scratch.dir / "tiny.json") << explain_doc(1, "fp16", {0.01, 0.02, 0.02, 0.01, 0.01, 0.02, 0.02}).dump();
  std::ofstream(scratch.dir / "tiny.jsonl") << stage_rows(1, "fp16", {0.01, 0.02, 0.02, 0.01, 0.01, 0.02, 0.02}, 4);
  r = run("tiny.jsonl tiny.json");
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("nothing judged") != std::string::npos);

  // Bad input: one line naming the file, exit 2.
  std::ofstream(scratch.dir / "broken.jsonl") << "{\"kernel\": \"stage\"}\nnot json\n";
  std::ofstream(scratch.dir / "other.json") << "{\"case\": 1}";
  std::ofstream(scratch.dir / "nostages.json")
      << "{\"case_id\": 1, \"dtype\": \"fp16\", \"configs\": [{\"config\": \"auto=11111\"}]}";
  std::ofstream(scratch.dir / "short.jsonl") << "{\"kernel\": \"stage\", \"case_id\": 1}\n";
  for (const auto& [args, names] : {std::pair<std::string, std::string>{"broken.jsonl c12.json", "broken.jsonl:2: not JSON"},
                                    {"stages.jsonl other.json", "other.json: not a tlbench explain document"},
                                    {"short.jsonl c12.json", "short.jsonl:1: a stage row without 'dtype'"},
                                    {"stages.jsonl nostages.json", "nostages.json: a configuration or stage without"},
                                    {"stages.jsonl missing.json", "missing.json"},
                                    {"stages.jsonl", "the following arguments are required: explain"},
                                    {"--tolerance 3 stages.jsonl c12.json", "unrecognized arguments: --tolerance"}}) {
    INFO(args);
    r = run(args);
    CHECK(r.exit_code == 2);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.err.find(names) != std::string::npos);
  }
}
