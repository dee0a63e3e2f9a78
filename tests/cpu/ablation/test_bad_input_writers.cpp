// Every writer on a target it must not replace: a FIFO, a symlink, a character device, a
// folder, a file in a missing folder. Each is exit 2 with one line naming the target, the
// target stays as it was and nothing (no temporary) is left beside it; `-` is stdout where a
// command can print its output and refused where it cannot; report writes all or none.
#include "bad_input_util.hpp"

using namespace tlb::test::bad_input;
using tlb::test::shell_quote;
using tlb::test::slurp;

TEST_CASE("dispatch -o a FIFO: exit 2, the FIFO stays, no temporary", "[bad-input][writers][cli]") {
  Scratch s("dispatch-fifo");
  REQUIRE(::mkfifo(s.path("table.json").c_str(), 0644) == 0);
  check_refused(tlbench("dispatch --results " + shell_quote(kFixture) + " -o table.json", s),
                {"table.json", "not a regular file", "nothing written"});
  CHECK(fs::is_fifo(s.path("table.json")));
  CHECK(s.listing() == std::vector<std::string>{"table.json"});
}

TEST_CASE("dispatch -o a symlink: exit 2, neither the link nor its file changes", "[bad-input][writers][cli]") {
  Scratch s("dispatch-link");
  s.write("real.json", "keep\n");
  fs::create_symlink("real.json", s.path("table.json"));
  check_refused(tlbench("dispatch --results " + shell_quote(kFixture) + " -o table.json", s),
                {"table.json", "symbolic link", "nothing written"});
  CHECK(fs::is_symlink(s.path("table.json")));
  CHECK(slurp(s.path("real.json")) == "keep\n");
  CHECK(s.listing() == std::vector<std::string>{"real.json", "table.json"});
}

TEST_CASE("dispatch -o a character device: exit 2, the device node stays", "[bad-input][writers][cli]") {
  Scratch s("dispatch-chardev");
  // mknod needs privileges a test may not have; /dev/null is then the device at hand.
  std::string target = s.path("null");
  if (::mknod(target.c_str(), S_IFCHR | 0666, ::makedev(1, 3)) != 0) target = "/dev/null";
  const Result r = tlbench("dispatch --results " + shell_quote(kFixture) + " -o " + shell_quote(target), s);
  check_refused(r, {target, "not a regular file", "nothing written"});
  struct stat st {};
  REQUIRE(::stat(target.c_str(), &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
  CHECK(!fs::exists(target + ".tmp"));
}

TEST_CASE("dispatch -o a folder: exit 2, no DIR.tmp beside it", "[bad-input][writers][cli]") {
  Scratch s("dispatch-dir");
  fs::create_directories(s.path("d"));
  check_refused(tlbench("dispatch --results " + shell_quote(kFixture) + " -o d", s), {"d: is a folder"});
  CHECK(s.listing() == std::vector<std::string>{"d"});
}

TEST_CASE("dispatch -o an empty path: exit 2, no .tmp in the working folder", "[bad-input][writers][cli]") {
  Scratch s("dispatch-empty");
  check_refused(tlbench("dispatch --results " + shell_quote(kFixture) + " -o ''", s), {"empty"});
  CHECK(s.listing().empty());
}

TEST_CASE("dispatch -o a file in a missing folder: exit 2, the folder is not created", "[bad-input][writers][cli]") {
  Scratch s("dispatch-nofolder");
  check_refused(tlbench("dispatch --results " + shell_quote(kFixture) + " -o no/t.json", s),
                {"no/t.json", "does not exist"});
  CHECK(s.listing().empty());
}

TEST_CASE("dispatch -o - writes the table to stdout and no file named -", "[bad-input][writers][cli]") {
  Scratch s("dispatch-dash");
  const Result r = tlbench("dispatch --results " + shell_quote(kFixture) + " -o -", s);
  CHECK(r.rc == 0);
  CHECK(r.out.rfind("{", 0) == 0);
  CHECK(r.out.find("\"entries\"") != std::string::npos);
  CHECK(s.listing().empty());
}

TEST_CASE("dispatch -o over a regular file replaces it whole, nothing else left", "[bad-input][writers][cli]") {
  Scratch s("dispatch-replace");
  s.write("t.json", "old\n");
  const Result r = tlbench("dispatch --quiet --results " + shell_quote(kFixture) + " -o t.json", s);
  CHECK(r.rc == 0);
  CHECK(slurp(s.path("t.json")).rfind("{", 0) == 0);
  CHECK(s.listing() == std::vector<std::string>{"t.json"});
}

TEST_CASE("export -o a folder: exit 2 naming the folder, no \"Success\"", "[bad-input][writers][cli]") {
  Scratch s("export-dir");
  fs::create_directories(s.path("d"));
  const Result r = tlbench("export --no-outputs --config " + shell_quote(kCases) + " --case 1 --dtype fp16 -o d", s);
  check_refused(r, {"d: is a folder", "nothing written"});
  CHECK(r.err.find("Success") == std::string::npos);
  CHECK(s.listing() == std::vector<std::string>{"d"});
}

TEST_CASE("export -o a character device or symlink: exit 2, untouched", "[bad-input][writers][cli]") {
  Scratch s("export-special");
  s.write("real.safetensors", "keep\n");
  fs::create_symlink("real.safetensors", s.path("link.safetensors"));
  for (const std::string& target : {std::string("/dev/null"), s.path("link.safetensors")}) {
    INFO(target);
    check_refused(tlbench("export --no-outputs --config " + shell_quote(kCases) +
                              " --case 1 --dtype fp16 -o " + shell_quote(target), s),
                  {target, "nothing written"});
  }
  CHECK(slurp(s.path("real.safetensors")) == "keep\n");
  CHECK(s.listing() == std::vector<std::string>{"link.safetensors", "real.safetensors"});
}

TEST_CASE("export -o - is refused, not a file named -", "[bad-input][writers][cli]") {
  Scratch s("export-dash");
  check_refused(tlbench("export --no-outputs --config " + shell_quote(kCases) + " --case 1 --dtype fp16 -o -", s),
                {"-o -", "not standard output"});
  CHECK(s.listing().empty());
}

TEST_CASE("report with dispatch_table.json a symlink: exit 2, no analysis file written", "[bad-input][writers][cli]") {
  Scratch s("report-link");
  fs::create_directories(s.path("out"));
  s.write("elsewhere.json", "keep\n");
  fs::create_symlink("../elsewhere.json", s.path("out/dispatch_table.json"));
  check_refused(tlbench("report " + shell_quote(kFixture) + " --out out", s),
                {"dispatch_table.json", "symbolic link", "nothing written"});
  CHECK(s.listing() == std::vector<std::string>{"elsewhere.json", "out", "out/dispatch_table.json"});
  CHECK(slurp(s.path("elsewhere.json")) == "keep\n");
}

TEST_CASE("report with one output a FIFO: exit 2, all or none", "[bad-input][writers][cli]") {
  Scratch s("report-fifo");
  fs::create_directories(s.path("out"));
  REQUIRE(::mkfifo(s.path("out/analysis.json").c_str(), 0644) == 0);
  check_refused(tlbench("report " + shell_quote(kFixture) + " --out out", s),
                {"analysis.json", "not a regular file", "nothing written"});
  CHECK(s.listing() == std::vector<std::string>{"out", "out/analysis.json"});
  CHECK(fs::is_fifo(s.path("out/analysis.json")));
}

