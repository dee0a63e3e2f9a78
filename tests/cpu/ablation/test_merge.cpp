// tlbench merge: the committed official results (results/h200) cut by the shard assignment into
// shard folders merge back into the same points, byte for byte, a folder the gate passes as it
// passes the original; a missing, doubled, incomplete or foreign shard, a point missing or
// twice, and mixed GPUs are refused with exit 2 and nothing written.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ablation_test_util.hpp"
#include "device_fanout.hpp"
#include "config.hpp"
#include "grid.hpp"
#include "shard.hpp"

using namespace tlb;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const std::string kSource = TLBENCH_SOURCE_DIR;
const std::string kOfficial = kSource + "/results/h200";

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

// The official run cut into `n` shard folders shard1..shardN under `dir`, each as
// `tlbench run --shard i/n` would have left it.
void cut_official(const fs::path& dir, int n) {
  const CaseSet cases = load_cases(kSource + "/configs/cases.json");
  const TechniqueSet techniques = load_techniques(kSource + "/configs/techniques.json");
  const json run = json::parse(test::slurp(kOfficial + "/run.json"));
  Selection sel = parse_selection("", "", "", cases, techniques);
  apply_policy_option(sel, run["options"]["policy"].get<std::string>());
  const Plan plan = assignment_plan(cases, techniques, sel, run["seed"].get<uint64_t>(), {}, false, nullptr);
  const std::vector<std::string> lines = lines_of(test::slurp(kOfficial + "/points.jsonl"));
  for (int i = 1; i <= n; ++i) {
    ShardCut cut = cut_shard(ShardSpec{i, n, "slurm"}, plan);
    std::string points;
    size_t autos = 0;
    for (ShardGroup& g : cut.groups) g.points = 0;
    for (const std::string& l : lines) {
      const json row = json::parse(l);
      DType dt{};
      REQUIRE(parse_dtype(row["dtype"].get<std::string>(), dt));
      for (ShardGroup& g : cut.groups)
        if (g.case_id == row["case_id"].get<int>() && g.dtype == dt) {
          ++g.points;
          autos += row["config"] == "auto";
          points += l + "\n";
        }
    }
    json doc = run;
    doc["shard"] = to_json(cut);
    doc["grid"]["points"] = lines_of(points).size();
    doc["grid"]["auto_points"] = autos;
    // The shard's planned (case, dtype) groups and their points, as the runner records them.
    json planned = json::array();
    for (const std::string& l : lines_of(points)) {
      const json row = json::parse(l);
      if (planned.empty() || planned.back()["case_id"] != row["case_id"] || planned.back()["dtype"] != row["dtype"])
        planned.push_back({{"case_id", row["case_id"]}, {"dtype", row["dtype"]}, {"points", 0}});
      planned.back()["points"] = planned.back()["points"].get<int>() + 1;
    }
    doc["grid"]["groups"] = planned;
    doc["options"]["out_dir"] = "shard" + std::to_string(i);
    json groups = json::array();
    for (const json& g : run["groups"]) {
      DType dt{};
      REQUIRE(parse_dtype(g["dtype"].get<std::string>(), dt));
      if (cut.owns(g["case_id"].get<int>(), dt)) groups.push_back(g);
    }
    doc["groups"] = groups;
    const fs::path d = dir / ("shard" + std::to_string(i));
    fs::create_directories(d);
    std::ofstream(d / "points.jsonl") << points;
    std::ofstream(d / "run.json") << doc.dump(2) << "\n";
  }
}

struct Shards {
  test::Scratch s;
  int n;
  Shards(const std::string& name, int count) : s("tlbench-merge", name), n(count) { cut_official(s.dir, n); }
  test::CommandResult tlbench(const std::string& args) const {
    return test::run_command("cd " + s.dir.string() + " && " + TLBENCH_BINARY + " " + args, s.dir);
  }
  std::string all() const {
    std::string a;
    for (int i = 1; i <= n; ++i) a += " shard" + std::to_string(i);
    return a;
  }
  json run_json(int i) const { return json::parse(test::slurp(s.dir / ("shard" + std::to_string(i)) / "run.json")); }
  void set_run_json(int i, const json& doc) const {
    std::ofstream(s.dir / ("shard" + std::to_string(i)) / "run.json") << doc.dump(2) << "\n";
  }
};

// tlbench ARGS run in `dir`, with no CUDA_VISIBLE_DEVICES of the host's in the way.
// The number of seconds written at `at` in a shard log's command line.
double seconds_at(const std::string& log, size_t at) { return std::stod(log.substr(at, log.find('\n', at) - at)); }

test::CommandResult tlbench_in(const fs::path& dir, const std::string& args) {
  return test::run_command("cd " + dir.string() + " && env -u CUDA_VISIBLE_DEVICES " + TLBENCH_BINARY + " " + args, dir);
}

// Exit 2, one line saying `what`, and no merged folder.
void check_refused(const Shards& sh, const std::string& args, const std::string& what) {
  INFO(args);
  const test::CommandResult r = sh.tlbench("merge" + args + " --out merged");
  CHECK(r.exit_code == 2);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.err.find(what) != std::string::npos);
  CHECK_FALSE(fs::exists(sh.s.dir / "merged"));
}

}  // namespace

TEST_CASE("merging the official run's shards gives back its points, byte for byte", "[merge][cli]") {
  for (int n : {1, 3, 7}) {
    INFO("shards: " << n);
    Shards sh("back" + std::to_string(n), n);
    const test::CommandResult r = sh.tlbench("merge" + sh.all() + " --out merged");
    REQUIRE(r.exit_code == 0);
    const fs::path m = sh.s.dir / "merged";
    CHECK(test::slurp(m / "points.jsonl") == test::slurp(kOfficial + "/points.jsonl"));
    CHECK(test::slurp(m / "points.csv") == test::slurp(kOfficial + "/points.csv"));
    for (const char* dt : {"fp16", "bf16", "fp32"}) {
      const std::string name = std::string("matrix_") + dt + ".csv";
      CHECK(test::slurp(m / name) == test::slurp(kOfficial + "/" + name));
    }
    const json doc = json::parse(test::slurp(m / "run.json"));
    const json official = json::parse(test::slurp(kOfficial + "/run.json"));
    CHECK(doc["state"] == "complete");
    for (const char* k : {"points", "auto_points", "configurations"}) CHECK(doc["grid"][k] == official["grid"][k]);
    // The shards' planned groups, one plan's again: every (case, dtype) once, 1386 points.
    REQUIRE(doc["grid"]["groups"].size() == 42);
    int planned_points = 0;
    for (const json& g : doc["grid"]["groups"]) planned_points += g["points"].get<int>();
    CHECK(planned_points == 1386);
    CHECK(doc["points"] == official["points"]);
    CHECK(doc["groups"] == official["groups"]);
    CHECK(doc["shards"].size() == static_cast<size_t>(n));
    CHECK(doc["shards"][0]["device"]["name"] == "NVIDIA H200");
    CHECK_FALSE(doc.contains("shard"));
    const test::CommandResult gate =
        sh.tlbench("gate --results merged --thresholds " + kSource + "/configs/gates.json");
    CHECK(gate.exit_code == 0);
    CHECK(gate.out.find("gate: passed: 1386 points") != std::string::npos);
  }
}

TEST_CASE("run --resume --devices merges shards that are complete, starting none", "[merge][devices][cli]") {
  // The official run's two shards where `run --devices 0,1 --out out` keeps them.
  test::Scratch s("tlbench-devices", "resume");
  cut_official(s.dir / "out-shards", 2);
  const auto run = [&](const std::string& args) { return tlbench_in(s.dir, args); };
  const test::CommandResult r = run("run --resume out --devices 0,1");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.find("2 shards on devices 0,1 (0 to run)") != std::string::npos);
  // The closing progress line counts what the shards hold, against their plans.
  CHECK(r.err.find("devices none running | 1386/1386 points") != std::string::npos);
  CHECK(r.err.find("0/0") == std::string::npos);
  CHECK(r.err.find("2 shards merged into out: 1386 points in 42 groups") != std::string::npos);
  CHECK(test::slurp(s.dir / "out" / "points.jsonl") == test::slurp(kOfficial + "/points.jsonl"));
  CHECK(run("gate --results out --thresholds " + kSource + "/configs/gates.json").exit_code == 0);
  // Merged already: a second resume is refused and leaves it alone.
  const test::CommandResult again = run("run --resume out --devices 0,1");
  CHECK(again.exit_code == 2);
  CHECK(again.err.find("--resume out --devices: its shards are merged already") != std::string::npos);
  // No shards folder: refused, one line.
  const test::CommandResult none = run("run --resume elsewhere --devices 0");
  CHECK(none.exit_code == 2);
  CHECK(none.err.find("no elsewhere-shards") != std::string::npos);
}

TEST_CASE("run --resume --devices runs only the incomplete shards, with --config where the files are now",
          "[merge][devices][cli]") {
  test::Scratch s("tlbench-devices", "partial");
  cut_official(s.dir / "out-shards", 2);
  json doc = json::parse(test::slurp(s.dir / "out-shards" / "shard2" / "run.json"));
  doc["state"] = "interrupted";
  std::ofstream(s.dir / "out-shards" / "shard2" / "run.json") << doc.dump(2) << "\n";
  // The shard's resume is handed the new --config: a file that is not there makes it exit 2.
  // A --time-limit is this process's: each resumed shard takes it.
  const test::CommandResult r =
      tlbench_in(s.dir, "run --resume out --devices 60000 --config moved/cases.json --seed 5 --time-limit 5m");
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("ignoring --seed") != std::string::npos);
  CHECK(r.err.find("ignoring --time-limit") == std::string::npos);
  CHECK(r.err.find("2 shards on device 60000 (1 to run)") != std::string::npos);
  CHECK(r.err.find("shard 2/2 on device 60000 exited 2") != std::string::npos);
  const std::string log = test::slurp(s.dir / "out-shards" / "shard2.log");
  const std::string head =
      "tlbench: CUDA_VISIBLE_DEVICES=60000 tlbench run --resume out-shards/shard2 --config moved/cases.json --time-limit ";
  REQUIRE(log.rfind(head, 0) == 0);
  CHECK(seconds_at(log, head.size()) == Approx(300).margin(20));  // what was left of 5 minutes
  CHECK(log.find("moved/cases.json: ") != std::string::npos);  // the shard's own refusal
  CHECK_FALSE(fs::exists(s.dir / "out-shards" / "shard1.log"));  // complete: not started
  CHECK_FALSE(fs::exists(s.dir / "out"));
}

TEST_CASE("run --resume --devices --time-limit under a minute starts no shard and asks for a longer limit",
          "[merge][devices][cli]") {
  test::Scratch s("tlbench-devices", "late");
  cut_official(s.dir / "out-shards", 2);
  for (int i : {1, 2}) {
    json doc = json::parse(test::slurp(s.dir / "out-shards" / ("shard" + std::to_string(i)) / "run.json"));
    doc["state"] = "time-limit";
    std::ofstream(s.dir / "out-shards" / ("shard" + std::to_string(i)) / "run.json") << doc.dump(2) << "\n";
  }
  // Nothing could progress under it, so it is not "resume me" (75) but a limit too short (2).
  const test::CommandResult r = tlbench_in(s.dir, "run --resume out --devices 60000 --time-limit 30");
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--time-limit 30 s: under the 60 s a shard needs to start, so none started; continue with a "
                   "longer one: tlbench run --resume out --devices 60000 --time-limit ...") != std::string::npos);
  CHECK_FALSE(fs::exists(s.dir / "out-shards" / "shard1.log"));
  CHECK_FALSE(fs::exists(s.dir / "out"));
}

TEST_CASE("run --devices gives a child the parent's own CUDA_VISIBLE_DEVICES entry", "[merge][devices]") {
  CHECK(child_visible_devices(0, nullptr) == "0");
  CHECK(child_visible_devices(3, nullptr) == "3");
  CHECK(child_visible_devices(1, "2,3") == "3");  // a Slurm job given GPUs 2 and 3
  CHECK(child_visible_devices(1, "GPU-aa, GPU-bb") == "GPU-bb");
  CHECK(child_visible_devices(0, "MIG-1") == "MIG-1");
  CHECK_THROWS_WITH(child_visible_devices(2, "2,3"),
                    "--devices: device 2 is not among the 2 this process may use (CUDA_VISIBLE_DEVICES=2,3)");
  CHECK(shards_dir_of("runs/sweep/") == "runs/sweep-shards");
  CHECK(shards_dir_of("runs/./sweep") == "runs/sweep-shards");
}

TEST_CASE("run --devices: a shard whose device is missing fails alone, its log and the plan kept for a resume",
          "[merge][devices][cli]") {
  test::Scratch s("tlbench-devices", "fail");
  // Ordinals no host has: every child finds no device and exits 3, on any machine.
  const test::CommandResult r = tlbench_in(
      s.dir,
      "run --config " + kSource + "/configs/cases.json --cases 1 --dtypes fp16 --devices 60000,60001 --out out --time-limit 9m");
  INFO(r.err);
  CHECK(r.exit_code == 3);
  CHECK(r.err.find("shard 1/2 on device 60000 exited 3 (its log: out-shards/shard1.log)") != std::string::npos);
  CHECK(r.err.find("shard 2/2 on device 60001 exited 3") != std::string::npos);
  CHECK(r.err.find("shards 1, 2 of 2 not complete; the other shards' points are kept. Continue with: tlbench run "
                   "--resume out --devices 60000,60001") != std::string::npos);
  CHECK_FALSE(fs::exists(s.dir / "out"));
  const std::string log = test::slurp(s.dir / "out-shards" / "shard1.log");
  CHECK(log.find("no CUDA device") != std::string::npos);
  // Each shard's log opens with its command; the time limit reaches every shard, but a resume
  // of the plan (fanout.json) does not inherit it.
  const std::string head = "tlbench: CUDA_VISIBLE_DEVICES=60000 tlbench run --config " + kSource +
                           "/configs/cases.json --dtypes fp16 --cases 1 --shard 1/2 --out out-shards/shard1 --time-limit ";
  REQUIRE(log.rfind(head, 0) == 0);
  CHECK(seconds_at(log, head.size()) == Approx(540).margin(20));  // what was left of 9 minutes
  const json fanout = json::parse(test::slurp(s.dir / "out-shards" / "fanout.json"));
  CHECK(fanout["shards"] == 2);
  CHECK(fanout["devices"] == json::array({60000, 60001}));
  CHECK(fanout["child_args"] == json::array({"--config", kSource + "/configs/cases.json", "--dtypes", "fp16", "--cases", "1"}));
  // Bad --devices, and --devices with --shard or --json: one line, exit 2, nothing written.
  // The shards' own inputs are checked once, before any child or file.
  for (const char* bad : {"--devices 0,0", "--devices x", "--devices 1,", "--devices 0 --shard 1/2", "--devices 0 --json",
                          "--devices 0 --cases 99", "--devices 0 --fp32-math fast", "--devices 0 --configs 0101",
                          "--devices 0 --dispatch-table absent.json"}) {
    INFO(bad);
    const test::CommandResult b = tlbench_in(s.dir, "run --config " + kSource + "/configs/cases.json " + bad + " --out other");
    CHECK(b.exit_code == 2);
    CHECK(std::count(b.err.begin(), b.err.end(), '\n') == 1);
    CHECK_FALSE(fs::exists(s.dir / "other"));
    CHECK_FALSE(fs::exists(s.dir / "other-shards"));
  }
}

TEST_CASE("merge refuses a missing, doubled or incomplete shard, naming it", "[merge][cli]") {
  Shards sh("set", 3);
  check_refused(sh, " shard1 shard3", "shard 2/3 missing");
  check_refused(sh, " shard1 shard2 shard2 shard3", "shard 2/3 given twice");
  check_refused(sh, " shard1 shard2 nowhere", "nowhere: no run.json");
  json doc = sh.run_json(3);
  doc["state"] = "interrupted";
  sh.set_run_json(3, doc);
  check_refused(sh, sh.all(), "shard 3/3 (shard3) is not complete (state interrupted)");
  doc["state"] = "complete";
  sh.set_run_json(3, doc);
  fs::create_directories(sh.s.dir / "merged");
  const test::CommandResult r = sh.tlbench("merge" + sh.all() + " --out merged");
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("the folder exists") != std::string::npos);
  fs::remove(sh.s.dir / "merged");
  CHECK(sh.tlbench("merge" + sh.all() + " --out merged").exit_code == 0);
}

TEST_CASE("merge refuses shards of another plan: fingerprint, techniques, commit, options", "[merge][cli]") {
  Shards sh("foreign", 2);
  const json original = sh.run_json(2);
  auto refused_with = [&](const char* pointer, const json& value, const std::string& what) {
    json doc = original;
    doc[json::json_pointer(pointer)] = value;
    sh.set_run_json(2, doc);
    check_refused(sh, sh.all(), what);
  };
  refused_with("/cases_file/fingerprint", "fnv1a64:0000000000000000", "cases file fingerprint");
  refused_with("/techniques_file/fingerprint", "fnv1a64:0000000000000000", "techniques file fingerprint");
  const std::string commit = original["tool"]["git_commit"];
  refused_with("/tool/git_commit", "0123456789ab", "commit \"0123456789ab\" vs \"" + commit + "\"");
  refused_with("/techniques/0/name", "fused_qkv", "techniques");
  refused_with("/options/quick", true, "option quick");
  refused_with("/shard/count", 3, "shard count 3 vs 2");
  sh.set_run_json(2, original);
  CHECK(sh.tlbench("merge" + sh.all() + " --out merged").exit_code == 0);
}

TEST_CASE("merge refuses a point missing, doubled or outside its shard, and mixed GPUs", "[merge][cli]") {
  Shards sh("points", 2);
  const fs::path p1 = sh.s.dir / "shard1" / "points.jsonl", p2 = sh.s.dir / "shard2" / "points.jsonl";
  const std::string one = test::slurp(p1), two = test::slurp(p2);
  const std::vector<std::string> lines = lines_of(one);
  std::ofstream(p1) << one.substr(0, one.size() - lines.back().size() - 1);
  check_refused(sh, sh.all(), "holds " + std::to_string(lines.size() - 1) + " of its " +
                                  std::to_string(lines.size()) + " planned points");
  std::ofstream(p1) << one << lines.front() << "\n";
  check_refused(sh, sh.all(), "appears twice");
  std::ofstream(p1) << one;
  std::ofstream(p2) << two << lines.front() << "\n";
  check_refused(sh, sh.all(), "is outside shard 2/2 (shard2)'s groups");
  std::ofstream(p2) << two << lines.front();
  check_refused(sh, sh.all(), "torn");
  std::ofstream(p2) << two;

  json doc = sh.run_json(2);
  doc["device"]["name"] = "NVIDIA H100 80GB HBM3";
  sh.set_run_json(2, doc);
  check_refused(sh, sh.all(), "--allow-mixed-gpus");
  REQUIRE(sh.tlbench("merge" + sh.all() + " --out merged --allow-mixed-gpus").exit_code == 0);
  const json merged = json::parse(test::slurp(sh.s.dir / "merged" / "run.json"));
  CHECK(merged["merge"]["mixed_gpus"] == true);
  CHECK(merged["shards"][1]["device"]["name"] == "NVIDIA H100 80GB HBM3");
  CHECK(test::slurp(sh.s.dir / "merged" / "points.jsonl") == test::slurp(kOfficial + "/points.jsonl"));
}
