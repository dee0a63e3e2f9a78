// Every test case of this binary becomes its own CTest test by name (catch_discover_tests), and
// CTest hands the name back to Catch on the command line: a name with ';' is split by CMake
// into two tests that match nothing, and a name starting with '-' is read as an option. Both
// "pass" without running anything, so this test keeps them out. Compiled into both suites.
#include <catch2/catch.hpp>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "cpu/ablation/ablation_test_util.hpp"

TEST_CASE("every test name survives CTest: no semicolon and no leading dash", "[meta]") {
  const auto dir = tlb::test::fresh_dir("tlbench-test-names", "list");
  // This binary's own path (in the shell, /proc/self/exe would be the shell).
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const tlb::test::CommandResult r =
      tlb::test::run_command(tlb::test::shell_quote(self) + " --list-test-names-only", dir);
  // Catch2 v2 exits with the number of tests listed.
  std::istringstream lines(r.out);
  std::string name;
  int names = 0;
  while (std::getline(lines, name)) {
    if (name.empty()) continue;
    ++names;
    INFO("test name: " << name);
    CHECK(name.find(';') == std::string::npos);
    CHECK(name.front() != '-');
  }
  CHECK(names > 1);
}
