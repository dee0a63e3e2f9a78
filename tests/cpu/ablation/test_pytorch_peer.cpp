// scripts/pytorch_peer.py, PyTorch's side of the comparison: bad input (the cases file, the
// options, the output folder and its peer_pytorch.jsonl) is one line naming what is wrong, exit 2
// and nothing written, all decided before PyTorch is imported, so neither PyTorch nor a GPU is
// needed; PyTorch missing is one line and exit 3. Where PyTorch is installed, a CPU run over tiny
// cases writes a row per (case, dtype, math, mode). Skipped (exit 77) without python3.
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "ablation_test_util.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;

namespace {

using tlb::test::shell_quote;

const fs::path kSource(TLBENCH_SOURCE_DIR);
const std::string kScript = (kSource / "scripts" / "pytorch_peer.py").string();
const std::string kTinyCases = (kSource / "tests" / "fixtures" / "peer" / "cases-tiny.json").string();

void require_python(const char* what) {
  if (std::system("python3 -c 'import sys' >/dev/null 2>&1") != 0)
    tlb::test::skip_test(Catch::getResultCapture().getCurrentTestName().c_str(), what, "no python3 on the PATH");
}

int line_count(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// The script with site-packages and PYTHONPATH out of sight: PyTorch cannot be imported even
// where it is installed, so any run that gets past the checks stops at exit 3.
std::string without_torch() { return "env -u PYTHONPATH python3 -S " + shell_quote(kScript); }

}  // namespace

TEST_CASE("pytorch_peer.py: a bad cases file, option or output target is one line, exit 2, nothing written",
          "[scripts]") {
  require_python("python3");
  const tlb::test::Scratch scratch("tlbench-pytorch-peer", "bad-input");
  const fs::path out = scratch.dir / "out";
  fs::create_directories(out);
  // Output folders whose peer_pytorch.jsonl is a folder, a FIFO or a symlink to a file to keep.
  const fs::path as_dir = scratch.dir / "as-dir", as_fifo = scratch.dir / "as-fifo",
                 as_link = scratch.dir / "as-link", kept = scratch.dir / "kept.txt";
  fs::create_directories(as_dir / "peer_pytorch.jsonl");
  fs::create_directories(as_fifo);
  REQUIRE(::mkfifo((as_fifo / "peer_pytorch.jsonl").c_str(), 0600) == 0);
  fs::create_directories(as_link);
  std::ofstream(kept) << "keep\n";
  fs::create_symlink(kept, as_link / "peer_pytorch.jsonl");

  const std::string good_case =
      R"({"id": 1, "name": "a", "batch": 2, "seq": 8, "d_model": 16, "heads": 2, "d_ff": 32, "layers": 1, "mask": "none"})";
  auto cases_file = [&](const std::string& name, const std::string& text) {
    return shell_quote(scratch.write(name, text));
  };
  const std::string ok = cases_file("ok.json", R"({"cases": [)" + good_case + "]}");
  const std::string to_out = " --out " + shell_quote(out.string());
  auto one_case = [&](const std::string& name, const std::string& replace, const std::string& with) {
    std::string c = good_case;
    c.replace(c.find(replace), replace.size(), with);
    return cases_file(name, R"({"cases": [)" + c + "]}") + to_out;
  };
  struct Case {
    std::string args, names;
  };
  const Case cases[] = {
      {shell_quote(scratch.path("absent.json")) + to_out, "absent.json: does not exist"},
      {cases_file("not-json.json", "{\"cases\": [") + to_out, "not-json.json: not JSON"},
      {cases_file("no-cases.json", R"({"shapes": []})") + to_out, "no-cases.json: $"},
      {cases_file("empty.json", R"({"cases": []})") + to_out, "empty.json: $.cases"},
      {one_case("unknown-key.json", R"("mask": "none")", R"("mask": "none", "window": 4)"),
       "unknown-key.json: $.cases[0].window: unknown key"},
      {one_case("no-heads.json", R"("heads": 2, )", ""), "no-heads.json: $.cases[0]: missing required field \"heads\""},
      {one_case("zero-seq.json", R"("seq": 8)", R"("seq": 0)"), "zero-seq.json: $.cases[0].seq"},
      {one_case("bool-batch.json", R"("batch": 2)", R"("batch": true)"), "bool-batch.json: $.cases[0].batch"},
      {one_case("heads.json", R"("heads": 2)", R"("heads": 3)"), "heads.json: $.cases[0].heads: 3 does not divide"},
      {one_case("mask.json", R"("mask": "none")", R"("mask": "sliding")"), "mask.json: $.cases[0].mask: unknown mask"},
      {one_case("no-lens.json", R"("mask": "none")", R"("mask": "padding")"), "no-lens.json: $.cases[0]: mask \"padding\" needs"},
      {one_case("short-lens.json", R"("mask": "none")", R"("mask": "padding", "valid_lens": [8])"),
       "short-lens.json: $.cases[0].valid_lens"},
      {one_case("long-len.json", R"("mask": "none")", R"("mask": "padding", "valid_lens": [8, 9])"),
       "long-len.json: $.cases[0].valid_lens[1]"},
      {one_case("lens-none.json", R"("mask": "none")", R"("mask": "none", "valid_lens": [8, 8])"),
       "lens-none.json: $.cases[0].valid_lens: only allowed"},
      {one_case("act.json", R"("mask": "none")", R"("mask": "none", "activation": "swish")"),
       "act.json: $.cases[0].activation: unknown activation"},
      {one_case("eps.json", R"("mask": "none")", R"("mask": "none", "eps": -1)"), "eps.json: $.cases[0].eps"},
      {one_case("dtype.json", R"("mask": "none")", R"("mask": "none", "dtypes": ["fp8"])"),
       "dtype.json: $.cases[0].dtypes[0]"},
      {cases_file("dup.json", R"({"cases": [)" + good_case + ", " + good_case + "]}") + to_out,
       "dup.json: $.cases[1].id: duplicate id 1"},
      {ok + to_out + " --cases 7", "--cases: no case with id 7"},
      {ok + to_out + " --cases 3-2", "--cases: '3-2' is not a valid range"},
      {ok + to_out + " --cases 1,x", "--cases: 'x'"},
      {ok + to_out + " --dtypes fp16,fp8", "--dtypes: unknown value 'fp8'"},
      {ok + to_out + " --math fast", "--math: unknown value 'fast'"},
      {ok + to_out + " --reps 0", "--reps 0: must be at least 1"},
      {ok + to_out + " --reps many", "--reps"},
      {ok + to_out + " --settle-s -1", "--settle-s -1.0: must be between 0 and 60 seconds"},
      {ok + to_out + " --settle-s nan", "--settle-s nan: must be between 0 and 60 seconds"},
      {ok + to_out + " --settle-s slow", "--settle-s"},
      {ok + to_out + " --device tpu", "--device tpu"},
      {ok, "--out"},
      {ok + " --out " + shell_quote(scratch.path("missing")), "missing: does not exist"},
      {ok + " --out " + shell_quote(kept.string()), "kept.txt: not a folder"},
      {ok + " --out " + shell_quote(as_dir.string()), "as-dir/peer_pytorch.jsonl: exists and is not a regular file"},
      {ok + " --out " + shell_quote(as_fifo.string()), "as-fifo/peer_pytorch.jsonl: exists and is not a regular file"},
      {ok + " --out " + shell_quote(as_link.string()), "as-link/peer_pytorch.jsonl: exists and is not a regular file"},
  };
  for (const Case& c : cases) {
    const tlb::test::CommandResult r = tlb::test::run_command(without_torch() + " " + c.args, scratch.dir);
    INFO(c.args << " -> " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(line_count(r.err) == 1);
    CHECK(r.err.rfind("pytorch_peer.py: ", 0) == 0);
    CHECK(r.err.find(c.names) != std::string::npos);
    CHECK(r.out.empty());
  }
  CHECK(fs::is_empty(out));
  CHECK(fs::is_directory(as_dir / "peer_pytorch.jsonl"));
  CHECK(fs::is_fifo(fs::symlink_status(as_fifo / "peer_pytorch.jsonl")));
  CHECK(fs::is_symlink(fs::symlink_status(as_link / "peer_pytorch.jsonl")));
  CHECK(tlb::test::slurp(kept) == "keep\n");
  CHECK_FALSE(fs::exists(scratch.dir / "missing"));
}

TEST_CASE("pytorch_peer.py: good input without PyTorch is one line and exit 3, nothing written", "[scripts]") {
  require_python("python3");
  const tlb::test::Scratch scratch("tlbench-pytorch-peer", "no-torch");
  const tlb::test::CommandResult r = tlb::test::run_command(
      without_torch() + " " + shell_quote(kTinyCases) + " --out " + shell_quote(scratch.dir.string()) +
          " --cases 1-2 --dtypes fp32 --math tf32",
      scratch.dir);
  INFO(r.err);
  CHECK(r.exit_code == 3);
  CHECK(line_count(r.err) == 1);
  CHECK(r.err.find("PyTorch is not installed") != std::string::npos);
  CHECK(scratch.listing().empty());
}

TEST_CASE("pytorch_peer.py: a CPU run writes a row per case, dtype, math and mode, and a summary per group",
          "[scripts]") {
  require_python("python3");
  if (std::system("python3 -c 'import torch' >/dev/null 2>&1") != 0)
    tlb::test::skip_test(Catch::getResultCapture().getCurrentTestName().c_str(), "PyTorch",
                         "python3 cannot import torch (optional: only the peer timings need it)");
  const tlb::test::Scratch scratch("tlbench-pytorch-peer", "cpu-run");
  const fs::path out = scratch.dir / "out";
  fs::create_directories(out);
  std::ofstream(out / "peer_pytorch.jsonl") << "an older peer file, replaced\n";
  // Case 1: no mask; 3: padding; 4: three heads, which PyTorch's fast path refuses; 5: the tanh
  // GELU, which it refuses too.
  const tlb::test::CommandResult r = tlb::test::run_command(
      "python3 " + shell_quote(kScript) + " " + shell_quote(kTinyCases) + " --out " + shell_quote(out.string()) +
          " --cases 1,3-5 --dtypes bf16,fp32 --device cpu --reps 3 --settle-s 0.05",
      scratch.dir);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);

  std::map<std::string, nlohmann::json> rows;  // "case dtype math mode"
  std::ifstream in(out / "peer_pytorch.jsonl");
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json row = nlohmann::json::parse(line);
    for (const char* key : {"case_id", "dtype", "math", "mode", "status", "median_ms", "min_ms", "reps",
                            "peak_bytes", "torch", "cudnn", "gpu"})
      CHECK(row.contains(key));
    const std::string key = std::to_string(row["case_id"].get<int>()) + " " + row["dtype"].get<std::string>() + " " +
                            row["math"].get<std::string>() + " " + row["mode"].get<std::string>();
    CHECK(rows.emplace(key, row).second);
  }
  // Groups: cases 1 and 3 in bf16 (native) and fp32 (ieee, tf32); cases 4 and 5 run fp32 only.
  const std::set<std::string> groups = {"1 bf16 native", "1 fp32 ieee", "1 fp32 tf32", "3 bf16 native",
                                        "3 fp32 ieee",   "3 fp32 tf32", "4 fp32 ieee", "4 fp32 tf32",
                                        "5 fp32 ieee",   "5 fp32 tf32"};
  CHECK(rows.size() == groups.size() * 4);  // eager, fastpath, graph, fastpath_graph; no --compile
  for (const std::string& g : groups) {
    INFO(g);
    REQUIRE(rows.count(g + " eager") == 1);
    const nlohmann::json& eager = rows[g + " eager"];
    CHECK(eager["status"] == "ok");
    CHECK(eager["reps"] == 3);
    CHECK(eager["median_ms"].get<double>() > 0);
    CHECK(eager["min_ms"].get<double>() <= eager["median_ms"].get<double>());
    // The group's first mode measured has no settled time to lose to: every group has one.
    CHECK(eager["settled"].is_boolean());
    const bool one_settled =
        std::any_of(rows.begin(), rows.end(), [&](const std::pair<const std::string, nlohmann::json>& kv) {
          return kv.first.rfind(g + " ", 0) == 0 && kv.second.value("settled", false) &&
                 kv.second.value("warm_s", 0.0) >= 0.05;
        });
    CHECK(one_settled);
    CHECK(rows[g + " graph"]["status"] == "not_applicable");  // CUDA Graphs need CUDA
    const bool refused = g[0] == '4' || g[0] == '5';
    CHECK(rows[g + " fastpath"]["status"] == (refused ? "not_applicable" : "ok"));
    if (refused) CHECK(rows[g + " fastpath"]["reason"].get<std::string>().find("fast path") != std::string::npos);
    CHECK(r.out.find("case " + g.substr(0, 1)) != std::string::npos);
  }
  CHECK(rows["4 fp32 tf32 fastpath"]["reason"].get<std::string>().find("even number of heads") != std::string::npos);
  int summaries = 0;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) summaries += line.rfind("case ", 0) == 0;
  CHECK(summaries == static_cast<int>(groups.size()));
  for (const auto& e : fs::directory_iterator(out)) CHECK(e.path().filename() == "peer_pytorch.jsonl");
}

TEST_CASE("pytorch_peer.py: a mode settles unless its warm-up already loses to the group's best, and after all where "
          "its timed calls do not",
          "[scripts]") {
  require_python("python3");
  const tlb::test::Scratch scratch("tlbench-pytorch-peer", "settle");
  // Peer.measure over fake modes (sleeps) and a host clock: no PyTorch needed. settle_s 0.5.
  const fs::path probe = scratch.path("settle.py");
  std::ofstream(probe) << "import json, sys, time, types\n"
                          "sys.path.insert(0, sys.argv[1])\n"
                          "import pytorch_peer as pp\n"
                          "p = object.__new__(pp.Peer)\n"
                          "p.torch, p.cuda, p.warmed_card = None, False, True\n"
                          "p.args = types.SimpleNamespace(settle_s=0.5, reps=None)\n"
                          "p.sync = lambda: None\n"
                          "def time_one(fn):\n"
                          "    t = time.perf_counter(); fn(); return (time.perf_counter() - t) * 1e3\n"
                          "p.time_one = time_one\n"
                          "def mode(first_s, rest_s):\n"
                          "    calls = [0]\n"
                          "    def fn():\n"
                          "        calls[0] += 1\n"
                          "        time.sleep(first_s if calls[0] == 1 else rest_s)\n"
                          "    return fn\n"
                          "print(json.dumps({\n"
                          "    'first': p.measure(mode(0.002, 0.002)),\n"
                          "    'loser': p.measure(mode(0.02, 0.02), best_settled_ms=2.0),\n"
                          "    'slow_first': p.measure(mode(0.2, 0.002), best_settled_ms=2.5),\n"
                          "}))\n";
  const tlb::test::CommandResult r =
      tlb::test::run_command("env -u PYTHONPATH python3 -S " + shell_quote(probe.string()) + " " +
                                 shell_quote((kSource / "scripts").string()),
                             scratch.dir);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json out = nlohmann::json::parse(r.out);
  // The group's first mode has nothing to lose to: settled for the whole 0.5 s.
  CHECK(out["first"]["settled"] == true);
  CHECK(out["first"]["warm_s"].get<double>() >= 0.5);
  // Ten times the best settled time in its warm-up and in its timed calls: not settled.
  CHECK(out["loser"]["settled"] == false);
  CHECK(out["loser"]["warm_s"].get<double>() < 0.5);
  CHECK(out["loser"]["median_ms"].get<double>() >= 20);
  // A slow first call made its warm-up look like a loser; its timed calls are within 1.1x of the
  // best: settled after all and timed again, as many calls as 0.2 s of its own time holds.
  CHECK(out["slow_first"]["settled"] == true);
  CHECK(out["slow_first"]["warm_s"].get<double>() >= 0.5);
  CHECK(out["slow_first"]["median_ms"].get<double>() < 2.75);
  CHECK(out["slow_first"]["reps"].get<int>() > 20);
}
