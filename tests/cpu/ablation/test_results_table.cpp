// scripts/results_table.py, which writes the README's table, over the official results: one
// row per (case, dtype) with the auto row's choice, latency and accuracy, and a closing
// accuracy line whose counts are those of points.jsonl. Skipped (exit 77) without python3.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "ablation_test_util.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;

namespace {

// The cells of a markdown table row "| a | b |" -> {"a", "b"}.
std::vector<std::string> cells_of(const std::string& row) {
  std::vector<std::string> cells;
  std::string cell;
  for (size_t i = 1; i < row.size(); ++i) {
    if (row[i] == '|') {
      const size_t b = cell.find_first_not_of(' '), e = cell.find_last_not_of(' ');
      cells.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
      cell.clear();
    } else {
      cell += row[i];
    }
  }
  return cells;
}

}  // namespace

TEST_CASE("results_table.py: a row per case and dtype of the official results, auto's accuracy in each",
          "[scripts]") {
  if (std::system("python3 -c 'import sys' >/dev/null 2>&1") != 0) {
    tlb::test::skip_test(Catch::getResultCapture().getCurrentTestName().c_str(), "python3",
                         "no python3 on the PATH");
  }
  const fs::path src(TLBENCH_SOURCE_DIR);
  const fs::path official = src / "results" / "h200";
  REQUIRE(fs::is_regular_file(official / "points.jsonl"));
  const tlb::test::Scratch scratch("tlbench-results-table", "official");
  const tlb::test::CommandResult r = tlb::test::run_command(
      "python3 " + tlb::test::shell_quote((src / "scripts" / "results_table.py").string()) + " " +
          tlb::test::shell_quote(official.string()),
      scratch.dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);

  // What the table must agree with: the groups, auto's choices and the accuracy counts.
  std::set<std::pair<int, std::string>> groups;
  std::set<std::string> auto_choices;
  int measured = 0, golden = 0, strict = 0, nonviable = 0;
  std::ifstream in(official / "points.jsonl");
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const nlohmann::json row = nlohmann::json::parse(line);
    const std::string status = row["status"];
    if (status == "nonviable") ++nonviable;
    if (status != "ok") continue;
    ++measured;
    golden += row.value("golden_pass", false) ? 1 : 0;
    strict += row.value("strict_pass", false) ? 1 : 0;
    groups.emplace(row["case_id"].get<int>(), row["dtype"].get<std::string>());
    if (row["config"] == "auto") {
      auto_choices.insert(std::to_string(row["case_id"].get<int>()) + " " + row["dtype"].get<std::string>() + " " +
                          row["auto_choice"].get<std::string>());
    }
  }
  REQUIRE(groups.size() == 42);

  std::istringstream out(r.out);
  std::vector<std::vector<std::string>> rows;
  std::string accuracy_line;
  for (std::string line; std::getline(out, line);) {
    if (line.rfind("| ", 0) == 0 && line.rfind("| case |", 0) != 0) rows.push_back(cells_of(line));
    if (line.rfind("Accuracy:", 0) == 0) accuracy_line = line;
  }
  REQUIRE(rows.size() == groups.size());
  for (const std::vector<std::string>& c : rows) {
    REQUIRE(c.size() == 9);
    INFO(c[0] << " " << c[1]);
    const std::string case_id = c[0].substr(0, c[0].find(' '));
    CHECK(auto_choices.count(case_id + " " + c[1] + " " + c[5]) == 1);  // auto (chose)
    CHECK(c[6] != "-");                                                   // auto ms
    CHECK_THAT(c[8], Catch::Contains("golden") && !Catch::Contains("FAILS"));
    if (case_id == "14") CHECK_THAT(c[3], Catch::Contains("(vs 01000)"));
  }
  CHECK(accuracy_line == "Accuracy: " + std::to_string(golden) + " of " + std::to_string(measured) +
                             " measured points pass the golden criterion, " + std::to_string(strict) +
                             " also pass strict; " + std::to_string(nonviable) +
                             " points nonviable (never attempted).");
}
