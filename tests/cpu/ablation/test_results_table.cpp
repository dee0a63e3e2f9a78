// scripts/results_table.py, which writes the README's table. Over the official results: one
// row per (case, dtype) with the auto row's choice, latency and accuracy, and a closing
// accuracy line whose counts are those of points.jsonl; without a peer_pytorch.jsonl there, one
// line says so and the table has no PyTorch column. Over the small fixture with its peer file:
// PyTorch's best ok mode in the sweep's fp32 math beside auto, with the ratio, and the versions
// above the table (and a note where its rows were timed in bursts, before --settle-s); a broken
// peer file is one line and exit 2. Skipped (exit 77) without python3.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <map>
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

// scripts/results_table.py run on the results folder `results`, from `cwd`.
tlb::test::CommandResult run_table(const fs::path& results, const fs::path& cwd) {
  const fs::path script = fs::path(TLBENCH_SOURCE_DIR) / "scripts" / "results_table.py";
  return tlb::test::run_command(
      "python3 " + tlb::test::shell_quote(script.string()) + " " + tlb::test::shell_quote(results.string()), cwd);
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
  const tlb::test::CommandResult r = run_table(official, scratch.dir);
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

  // With PyTorch's timings beside the sweep the table gains its best time and the ratio.
  const bool peer = fs::is_regular_file(official / "peer_pytorch.jsonl");
  const size_t columns = peer ? 10 : 8;
  std::istringstream out(r.out);
  std::vector<std::vector<std::string>> rows;
  std::string accuracy_line, first_line;
  std::getline(out, first_line);
  CHECK(first_line.rfind(peer ? "PyTorch: the best of its modes" : "No peer_pytorch.jsonl in ", 0) == 0);
  for (std::string line; std::getline(out, line);) {
    if (line.rfind("| ", 0) == 0 && line.rfind("| case |", 0) != 0) rows.push_back(cells_of(line));
    if (line.rfind("Accuracy:", 0) == 0) accuracy_line = line;
  }
  REQUIRE(rows.size() == groups.size());
  for (const std::vector<std::string>& c : rows) {
    REQUIRE(c.size() == columns);
    INFO(c[0] << " " << c[1]);
    const std::string case_id = c[0].substr(0, c[0].find(' '));
    CHECK(auto_choices.count(case_id + " " + c[1] + " " + c[5]) == 1);  // auto (chose)
    CHECK(c[6] != "-");                                                   // auto ms
    CHECK_THAT(c[columns - 1], Catch::Contains("golden") && !Catch::Contains("FAILS"));
    if (case_id == "14") CHECK_THAT(c[3], Catch::Contains("(vs 01000)"));
    if (peer && c[8] != "-") {  // PyTorch's best ms (mode), auto / PyTorch from the rounded cells
      CHECK_THAT(c[7], Catch::Contains("("));
      CHECK(std::stod(c[8]) == Approx(std::stod(c[6]) / std::stod(c[7])).epsilon(0.03));
    }
  }
  CHECK(accuracy_line == "Accuracy: " + std::to_string(golden) + " of " + std::to_string(measured) +
                             " measured points pass the golden criterion, " + std::to_string(strict) +
                             " also pass strict; " + std::to_string(nonviable) +
                             " points nonviable (never attempted).");
}

namespace {

std::string fmt_ms(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v < 10 ? "%.3f" : "%.1f", v);
  return buf;
}

// The small fixture in a scratch folder, with an auto row per (case, dtype) appended: the
// group's fastest measured row timed once more, as a run with --policy auto writes it.
void copy_fixture_with_auto_rows(const fs::path& to) {
  const fs::path fixture = fs::path(TLBENCH_SOURCE_DIR) / "tests" / "fixtures" / "results-small";
  fs::create_directories(to);
  for (const char* f : {"points.jsonl", "run.json", "peer_pytorch.jsonl"}) fs::copy_file(fixture / f, to / f);
  std::map<std::pair<int, std::string>, nlohmann::json> fastest;
  std::ifstream in(fixture / "points.jsonl");
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json row = nlohmann::json::parse(line);
    if (row["status"] != "ok") continue;
    nlohmann::json& f = fastest[{row["case_id"].get<int>(), row["dtype"].get<std::string>()}];
    if (f.is_null() || row["cand_ms"].get<double>() < f["cand_ms"].get<double>()) f = row;
  }
  std::ofstream points(to / "points.jsonl", std::ios::app);
  for (auto& [key, row] : fastest) {
    nlohmann::json a = row;
    a["auto_choice"] = row["config"];
    a["config"] = "auto";
    a["cand_ms"] = row["cand_ms"].get<double>() * 1.01;
    points << a.dump() << "\n";
  }
}

}  // namespace

TEST_CASE("results_table.py: PyTorch's best mode in the sweep's math beside auto, with the ratio and versions",
          "[scripts]") {
  if (std::system("python3 -c 'import sys' >/dev/null 2>&1") != 0) {
    tlb::test::skip_test(Catch::getResultCapture().getCurrentTestName().c_str(), "python3",
                         "no python3 on the PATH");
  }
  const tlb::test::Scratch scratch("tlbench-results-table", "peer");
  const fs::path results = scratch.dir / "results";
  copy_fixture_with_auto_rows(results);
  // PyTorch's IEEE rows made the fastest of all, so that a table that set the fixture's TF32
  // points against them would show it.
  std::string peer_text;
  {
    std::ifstream in(results / "peer_pytorch.jsonl");
    for (std::string line; std::getline(in, line);) {
      nlohmann::json row = nlohmann::json::parse(line);
      if (row["math"] == "ieee" && row["status"] == "ok") row["median_ms"] = row["median_ms"].get<double>() / 100;
      peer_text += row.dump() + "\n";
    }
  }
  std::ofstream(results / "peer_pytorch.jsonl") << peer_text;

  // What the table must show: per (case, dtype), the fastest ok peer row of the math the
  // fixture's sweep ran (fp16 native, fp32 tf32).
  std::map<std::string, nlohmann::json> best;  // "case dtype"
  std::istringstream in(peer_text);
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json row = nlohmann::json::parse(line);
    if (row["status"] != "ok" || row["math"] == "ieee") continue;
    nlohmann::json& b = best[std::to_string(row["case_id"].get<int>()) + " " + row["dtype"].get<std::string>()];
    if (b.is_null() || row["median_ms"].get<double>() < b["median_ms"].get<double>()) b = row;
  }
  REQUIRE(best.size() == 8);

  const tlb::test::CommandResult r = run_table(results, scratch.dir);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("torch 2.11.0+cu130, cuDNN 91900, on NVIDIA H200") &&
                        Catch::Contains("fp32 in the sweep's math (tf32)"));
  CHECK_THAT(r.out, !Catch::Contains("No peer_pytorch.jsonl") && !Catch::Contains("Note: the sweep ran on"));

  std::istringstream out(r.out);
  int rows = 0;
  for (std::string line; std::getline(out, line);) {
    if (line.rfind("| case |", 0) == 0) {
      CHECK_THAT(line, Catch::Contains("| auto ms | PyTorch best ms (mode) | auto / PyTorch |"));
      continue;
    }
    if (line.rfind("| ", 0) != 0) continue;
    const std::vector<std::string> c = cells_of(line);
    REQUIRE(c.size() == 10);
    const std::string key = c[0].substr(0, c[0].find(' ')) + " " + c[1];
    INFO(key);
    REQUIRE(best.count(key) == 1);
    const nlohmann::json& b = best[key];
    CHECK(c[7] == fmt_ms(b["median_ms"].get<double>()) + " (" + b["mode"].get<std::string>() + ")");
    const double auto_ms = std::stod(c[6]);
    CHECK(std::fabs(std::stod(c[8]) - auto_ms / b["median_ms"].get<double>()) < 0.01);  // both rounded
    if (key == "2 fp16") CHECK(b["mode"] == "fastpath");  // its graph modes failed: not ok, not chosen
    if (key == "14 fp16") CHECK(b["mode"] == "graph");    // its fast path ran out of memory
    ++rows;
  }
  CHECK(rows == 8);

  // The fixture's peer rows predate --settle-s (no "settled" field): the table says PyTorch
  // was timed in bursts. Rows that say how they were timed get no such note.
  CHECK_THAT(r.out, Catch::Contains("Note: PyTorch was timed in bursts"));
  std::string settled_text;
  {
    std::istringstream rows_in(peer_text);
    for (std::string line; std::getline(rows_in, line);) {
      nlohmann::json row = nlohmann::json::parse(line);
      if (row["status"] == "ok") row["settled"] = true;
      settled_text += row.dump() + "\n";
    }
  }
  std::ofstream(results / "peer_pytorch.jsonl") << settled_text;
  const tlb::test::CommandResult settled = run_table(results, scratch.dir);
  INFO(settled.out << settled.err);
  REQUIRE(settled.exit_code == 0);
  CHECK_THAT(settled.out, !Catch::Contains("timed in bursts"));
}

TEST_CASE("results_table.py: a peer file that is not JSON lines, or not a file, is one line and exit 2", "[scripts]") {
  if (std::system("python3 -c 'import sys' >/dev/null 2>&1") != 0) {
    tlb::test::skip_test(Catch::getResultCapture().getCurrentTestName().c_str(), "python3",
                         "no python3 on the PATH");
  }
  const tlb::test::Scratch scratch("tlbench-results-table", "bad-peer");
  struct Case {
    std::string name, text, names;
  };
  const Case cases[] = {
      {"not-json", "{\"case_id\": 1, \"dtype\": \"fp16\", \"math\": \"native\", \"mode\": \"eager\", "
                   "\"status\": \"oom\"}\n{oops\n",
       "peer_pytorch.jsonl:2: not JSON"},
      {"no-mode", "{\"case_id\": 1, \"dtype\": \"fp16\", \"math\": \"native\", \"status\": \"ok\"}\n",
       "peer_pytorch.jsonl:1: \"mode\" missing"},
      {"no-time", "{\"case_id\": 1, \"dtype\": \"fp16\", \"math\": \"native\", \"mode\": \"eager\", "
                  "\"status\": \"ok\", \"median_ms\": null}\n",
       "peer_pytorch.jsonl:1: an ok row needs a positive \"median_ms\""},
  };
  for (const Case& c : cases) {
    const fs::path results = scratch.dir / c.name;
    copy_fixture_with_auto_rows(results);
    std::ofstream(results / "peer_pytorch.jsonl") << c.text;
    const tlb::test::CommandResult r = run_table(results, scratch.dir);
    INFO(c.name << " -> " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK_THAT(r.err, Catch::Contains(c.names));
  }
  const fs::path results = scratch.dir / "folder";
  copy_fixture_with_auto_rows(results);
  fs::remove(results / "peer_pytorch.jsonl");
  fs::create_directories(results / "peer_pytorch.jsonl");
  const tlb::test::CommandResult r = run_table(results, scratch.dir);
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("peer_pytorch.jsonl: not a regular file"));
}
