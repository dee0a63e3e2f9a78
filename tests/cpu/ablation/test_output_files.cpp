// The one output module: a target that is a FIFO, a symlink, a folder, an empty path or in a
// folder that does not exist is refused with one line naming it, and nothing is written,
// replaced or left behind (no temporary); a regular file is replaced whole; a set of files is
// written all or none. The commands that write files (dispatch -o, report, export -o) inherit
// it: each refusal is exit 2 with the target untouched.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/types.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ablation_test_util.hpp"
#include "config.hpp"
#include "output_files.hpp"

using namespace tlb;
namespace fs = std::filesystem;

namespace {

using test::shell_quote;

struct Scratch : test::Scratch {
  explicit Scratch(const std::string& name) : test::Scratch("tlbench-output", name) {}
};

const std::string kFixture = std::string(TLBENCH_SOURCE_DIR) + "/tests/fixtures/results-small";
const std::string kCases = std::string(TLBENCH_SOURCE_DIR) + "/configs/cases.json";

}  // namespace

TEST_CASE("output targets: special files and folders are refused, nothing left behind", "[writers]") {
  Scratch s("targets");
  REQUIRE(::mkfifo(s.path("fifo").c_str(), 0644) == 0);
  s.write("real.txt", "keep me\n");
  fs::create_symlink(s.path("real.txt"), s.path("link"));
  fs::create_directories(s.path("folder"));
  const std::vector<std::string> before = s.listing();
  struct Bad {
    std::string path, phrase;
  };
  for (const Bad& b : {Bad{s.path("fifo"), "exists and is not a regular file; not replaced"},
                       Bad{s.path("link"), "is a symbolic link; not replaced"},
                       Bad{s.path("folder"), "is a folder"},
                       Bad{"", "an empty path"},
                       Bad{s.path("missing/x.txt"), "does not exist"}}) {
    INFO(b.path);
    CHECK(!output_target_problem(b.path).empty());
    CHECK_THROWS_AS(write_file_atomic(b.path, "new\n"), ConfigError);
    CHECK_THROWS_WITH(write_file_atomic(b.path, "new\n"),
                      Catch::Contains(b.phrase) && Catch::Contains("nothing written"));
  }
  CHECK(s.listing() == before);
  CHECK(fs::is_fifo(s.path("fifo")));
  CHECK(fs::is_symlink(s.path("link")));
  CHECK(test::slurp(s.path("real.txt")) == "keep me\n");
}

TEST_CASE("output files: a regular file is replaced whole, and a set is written all or none", "[writers]") {
  Scratch s("staged");
  s.write("a.txt", "old a\n");
  write_file_atomic(s.path("a.txt"), "new a\n");
  CHECK(test::slurp(s.path("a.txt")) == "new a\n");
  write_file_atomic(s.path("b.txt"), "b\n");
  CHECK(s.listing() == std::vector<std::string>{"a.txt", "b.txt"});

  REQUIRE(::mkfifo(s.path("fifo").c_str(), 0644) == 0);
  {
    StagedFiles f;
    f.put(s.path("c.txt"), "c\n");
    CHECK_THROWS_AS(f.put(s.path("fifo"), "x\n"), ConfigError);
  }  // never committed: the staged c.txt goes with it
  CHECK(s.listing() == std::vector<std::string>{"a.txt", "b.txt", "fifo"});
  {
    StagedFiles f;
    f.put(s.path("c.txt"), "c\n");
    f.put(s.path("a.txt"), "newer a\n");
    CHECK(!fs::exists(s.path("c.txt")));  // nothing moves before commit
    CHECK(test::slurp(s.path("a.txt")) == "new a\n");
    f.commit();
  }
  CHECK(test::slurp(s.path("c.txt")) == "c\n");
  CHECK(test::slurp(s.path("a.txt")) == "newer a\n");
  CHECK(s.listing() == std::vector<std::string>{"a.txt", "b.txt", "c.txt", "fifo"});
}

TEST_CASE("tlbench dispatch -o, report and export -o refuse special targets: exit 2, untouched",
          "[writers][cli]") {
  Scratch s("cli");
  REQUIRE(::mkfifo(s.path("fifo").c_str(), 0644) == 0);
  s.write("real.json", "keep\n");
  fs::create_symlink(s.path("real.json"), s.path("link.json"));
  const std::vector<std::string> before = s.listing();
  for (const std::string& target : {s.path("fifo"), s.path("link.json"), s.path("nowhere/t.json")}) {
    INFO(target);
    const test::CommandResult r = test::run_tlbench(
        "dispatch --results " + shell_quote(kFixture) + " -o " + shell_quote(target), s.dir);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("nothing written") != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    const test::CommandResult e = test::run_tlbench(
        "export --no-outputs --config " + shell_quote(kCases) + " --case 1 --dtype fp16 -o " + shell_quote(target),
        s.dir);
    CHECK(e.exit_code == 2);
    CHECK(e.err.find("nothing written") != std::string::npos);
  }
  const test::CommandResult dash = test::run_tlbench(
      "export --no-outputs --config " + shell_quote(kCases) + " --case 1 --dtype fp16 -o -", s.dir);
  CHECK(dash.exit_code == 2);
  CHECK(dash.err.find("not standard output") != std::string::npos);
  CHECK(s.listing() == before);
  CHECK(fs::is_fifo(s.path("fifo")));
  CHECK(test::slurp(s.path("real.json")) == "keep\n");

  // report: one of its outputs cannot be written (a folder in its place), so none is.
  fs::create_directories(s.path("analysis/matrix_fp16.csv"));
  const test::CommandResult r = test::run_tlbench(
      "report " + shell_quote(kFixture) + " --out " + shell_quote(s.path("analysis")), s.dir);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("matrix_fp16.csv: is a folder; nothing written") != std::string::npos);
  std::vector<std::string> inside;
  for (const auto& e : fs::recursive_directory_iterator(s.path("analysis")))
    inside.push_back(e.path().filename().string());
  CHECK(inside == std::vector<std::string>{"matrix_fp16.csv"});
  // And a report into a fresh folder writes every file.
  const test::CommandResult ok = test::run_tlbench(
      "report --quiet " + shell_quote(kFixture) + " --out " + shell_quote(s.path("fresh")), s.dir);
  CHECK(ok.exit_code == 0);
  CHECK(fs::exists(s.path("fresh/analysis.json")));
  CHECK(fs::exists(s.path("fresh/dispatch_table.json")));
}
