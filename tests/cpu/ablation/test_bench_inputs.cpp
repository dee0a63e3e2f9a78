// Bad input to the kernel benchmark and to scripts/attention_peer.py: one line on stderr
// naming the file or argument, exit 2, and the output target left as it was (a folder, FIFO or
// symlink is never replaced). All of it is decided before any device work, so no GPU is needed.
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "ablation_test_util.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;

namespace {

using tlb::test::shell_quote;

int line_count(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Special targets in `dir`: a folder, a FIFO and a symlink to a regular file whose content must
// survive.
struct Targets {
  fs::path folder, fifo, link, linked;
  explicit Targets(const fs::path& dir)
      : folder(dir / "folder"), fifo(dir / "fifo"), link(dir / "link"), linked(dir / "linked.txt") {
    fs::create_directories(folder);
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    std::ofstream(linked) << "keep\n";
    fs::create_symlink(linked, link);
  }
  void check_untouched() const {
    CHECK(fs::is_directory(folder));
    CHECK(fs::is_empty(folder));
    CHECK(fs::is_fifo(fs::symlink_status(fifo)));
    CHECK(fs::is_symlink(fs::symlink_status(link)));
    CHECK(tlb::test::slurp(linked) == "keep\n");
  }
};

}  // namespace

TEST_CASE("kernel_bench: an unknown benchmark or a special output file is one line and exit 2", "[scripts]") {
  const tlb::test::Scratch scratch("tlbench-bench-inputs", "kernel-bench");
  const fs::path work = scratch.dir / "work";
  fs::create_directories(work);
  const Targets t(work);
  const std::string bench = TLBENCH_KERNEL_BENCH;
  struct Case {
    std::string args, names;
  };
  const Case cases[] = {
      {"bogus", "'bogus'"},
      {"attn " + shell_quote(t.folder.string()), t.folder.string()},
      {"attn " + shell_quote(t.fifo.string()), t.fifo.string()},
      {"attn " + shell_quote(t.link.string()), t.link.string()},
      {"attn " + shell_quote((work / "missing" / "out.jsonl").string()), (work / "missing").string()},
  };
  for (const Case& c : cases) {
    const tlb::test::CommandResult r = tlb::test::run_command(bench + " " + c.args, scratch.dir);
    INFO(c.args << " -> " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(line_count(r.err) == 1);
    CHECK(r.err.find(c.names) != std::string::npos);
    CHECK(r.out.empty());
  }
  t.check_untouched();
  CHECK_FALSE(fs::exists(work / "missing"));

  // The stages benchmark reads configs/cases.json from where it runs and checks its selection
  // before any device work; each benchmark refuses the others' options.
  const Case stage_cases[] = {
      {"stages --cases 99", "--cases: no case with id 99"},
      {"stages --dtypes fp64", "--dtypes: unknown dtype 'fp64'"},
      {"stages --fp32-math fast", "--fp32-math \"fast\""},
      {"stages --cases", "--cases: expected a value"},
      {"stages --cases ''", "--cases: expected a value"},
      {"stages --json", "--json: unknown option"},
      {"stages --match qkv", "--match: only the gemm benchmark takes it"},
      {"gemm --cases 1", "--cases: only the stages benchmark takes it"},
      {"attn --energy", "--energy: only the gemm benchmark takes it"},
      {"small --energy-variants", "--energy-variants: only the gemm benchmark takes it"},
      {"stages " + shell_quote(t.folder.string()), t.folder.string()},
  };
  for (const Case& c : stage_cases) {
    const tlb::test::CommandResult r = tlb::test::run_command(
        "cd " + shell_quote(TLBENCH_SOURCE_DIR) + " && " + bench + " " + c.args, scratch.dir);
    INFO(c.args << " -> " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(line_count(r.err) == 1);
    CHECK(r.err.find(c.names) != std::string::npos);
  }
  const tlb::test::CommandResult elsewhere =
      tlb::test::run_command("cd " + shell_quote(scratch.dir.string()) + " && " + bench + " stages", scratch.dir);
  CHECK(elsewhere.exit_code == 2);
  CHECK(elsewhere.err.find("configs/cases.json: cannot read") != std::string::npos);
  t.check_untouched();
}

TEST_CASE("attention_peer.py: bad rows, options and output targets are one line and exit 2", "[scripts]") {
  if (std::system("python3 -c 'import sys' >/dev/null 2>&1") != 0) {
    tlb::test::skip_test(Catch::getResultCapture().getCurrentTestName().c_str(), "python3",
                         "no python3 on the PATH");
  }
  const tlb::test::Scratch scratch("tlbench-bench-inputs", "peer");
  const fs::path work = scratch.dir / "work";
  fs::create_directories(work);
  const Targets t(work);
  const std::string good =
      R"({"kernel": "attention", "dtype": "fp16", "batch": 1, "heads": 2, "seq": 64, "head_dim": 64, )"
      R"("causal": false, "ours_tflops": 1.5, "ours_ms": 0.01, "variant": "v", "commit": "c"})";
  auto rows = [&](const std::string& name, const std::string& text) {
    const fs::path p = work / name;
    std::ofstream(p) << text;
    return p.string();
  };
  const std::string ok = rows("ok.jsonl", good + "\n");
  const std::string out = (work / "out.jsonl").string();
  struct Case {
    std::string args, names;
  };
  const Case cases[] = {
      {shell_quote((work / "absent.jsonl").string()) + " " + shell_quote(out), "absent.jsonl"},
      {shell_quote(rows("not-json.jsonl", good + "\n{oops\n")) + " " + shell_quote(out), "not-json.jsonl:2"},
      {shell_quote(rows("no-seq.jsonl", R"({"dtype": "fp16", "batch": 1})" "\n")) + " " + shell_quote(out),
       "no-seq.jsonl:1"},
      {shell_quote(rows("fp32.jsonl", std::string(good).replace(good.find("fp16"), 4, "fp32") + "\n")) + " " +
           shell_quote(out),
       "fp32.jsonl:1"},
      // fp32 attention is compared in IEEE only (PyTorch's fp32 SDPA has no TF32 kernel).
      {shell_quote(rows("tf32.jsonl", std::string(good).replace(good.find("fp16"), 4, "fp32-tf32") + "\n")) + " " +
           shell_quote(out),
       "tf32.jsonl:1"},
      {shell_quote(ok) + " " + shell_quote(out) + " --reps 0", "--reps 0"},
      {shell_quote(ok) + " " + shell_quote(out) + " --rerun " + shell_quote(ok), "--rerun"},
      {shell_quote(ok) + " " + shell_quote(out) + " --rerun " + shell_quote((work / "absent-bench").string()),
       "absent-bench"},
      {shell_quote(ok) + " " + shell_quote(t.folder.string()), t.folder.string()},
      {shell_quote(ok) + " " + shell_quote(t.fifo.string()), t.fifo.string()},
      {shell_quote(ok) + " " + shell_quote(t.link.string()) + " --append", t.link.string()},
      {shell_quote(ok) + " " + shell_quote((work / "missing" / "out.jsonl").string()), "missing"},
  };
  const std::string script = (fs::path(TLBENCH_SOURCE_DIR) / "scripts" / "attention_peer.py").string();
  for (const Case& c : cases) {
    const tlb::test::CommandResult r = tlb::test::run_command("python3 " + shell_quote(script) + " " + c.args, scratch.dir);
    INFO(c.args << " -> " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(line_count(r.err) == 1);
    CHECK(r.err.find(c.names) != std::string::npos);
  }
  t.check_untouched();
  CHECK_FALSE(fs::exists(out));
  CHECK_FALSE(fs::exists(work / "missing"));
}
