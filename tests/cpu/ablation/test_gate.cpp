// The CI gate: the fixture passes, doctored copies fail with exactly the violations that were
// planted, regression against a baseline is caught, and a bad thresholds file is a one-line
// usage error (exit 2).
#include <catch2/catch.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <tuple>
#include <unistd.h>

#include "ablation_test_util.hpp"
#include "config.hpp"
#include "gate.hpp"
#include "results_reader.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using tlb::gate::GateReport;
using tlb::gate::Thresholds;

namespace {

const std::string kFixture = std::string(TLBENCH_SOURCE_DIR) + "/tests/fixtures/results-small";

// What the fixture is expected to meet: floors below every planted point, case 14's attn-off
// configurations allowed to be nonviable.
const char* kFixtureThresholds = R"({
  "$comment": "test thresholds for the fixture",
  "defaults": {"min_speedup": 0.9, "min_best_speedup": 1.5, "max_regression_pct": 10},
  "overrides": [
    {"cases": [14], "configs": "x0xxx", "allow_nonviable": true},
    {"cases": "14", "min_best_speedup": 1.0}
  ]
})";

using tlb::test::slurp;

fs::path fresh_dir(const std::string& name) { return tlb::test::fresh_dir("tlb-gate", name); }

void write(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
}

// A copy of the fixture with `edit` applied to every row (return false to drop the row).
fs::path doctored_copy(const std::string& name, const std::function<bool(json&)>& edit,
                       const fs::path& source = kFixture) {
  const fs::path dir = fresh_dir(name);
  fs::copy_file(source / "run.json", dir / "run.json");
  std::istringstream in(slurp(source / "points.jsonl"));
  std::string line, out;
  while (std::getline(in, line)) {
    json row = json::parse(line);
    if (edit(row)) out += row.dump() + "\n";
  }
  write(dir / "points.jsonl", out);
  return dir;
}

// Sets the copy's planned grid to the rows it holds, as the runner records a run narrowed to
// them: for tests that add or drop rows on purpose and check other rules than the grid's.
void replan(const fs::path& dir) {
  std::istringstream in(slurp(dir / "points.jsonl"));
  int rows = 0;
  json groups = json::array();
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    ++rows;
    const json row = json::parse(line);
    json* group = nullptr;
    for (json& g : groups)
      if (g["case_id"] == row["case_id"] && g["dtype"] == row["dtype"]) group = &g;
    if (!group) {
      groups.push_back({{"case_id", row["case_id"]}, {"dtype", row["dtype"]}, {"points", 0}});
      group = &groups.back();
    }
    (*group)["points"] = (*group)["points"].get<int>() + 1;
  }
  json run = json::parse(slurp(dir / "run.json"));
  run["grid"] = {{"points", rows}, {"groups", groups}};
  write(dir / "run.json", run.dump(1) + "\n");
}

// A row made `factor` times slower: its speedup and the interval around it move together, as
// in a real slowdown.
void slow_down(json& row, double factor) {
  for (const char* k : {"speedup", "speedup_ci_low", "speedup_ci_high"})
    if (row.contains(k) && row[k].is_number()) row[k] = row[k].get<double>() * factor;
}

bool is(const json& row, int case_id, const char* dtype, const char* config) {
  return row["case_id"] == case_id && row["dtype"] == dtype && row["config"] == config &&
         row["status"] != "aa";
}

using Found = std::set<std::tuple<int, std::string, std::string, std::string>>;
Found found(const GateReport& r) {
  Found f;
  for (const auto& v : r.violations) f.insert({v.case_id, v.dtype, v.config, v.rule});
  return f;
}

GateReport gate(const std::string& thresholds, const fs::path& results,
                const fs::path* baseline = nullptr) {
  const Thresholds t = tlb::gate::parse_thresholds(thresholds, "gates.json");
  const auto r = tlb::results::read_results(results.string());
  if (!baseline) return tlb::gate::run_gate(t, r, nullptr);
  const auto b = tlb::results::read_results(baseline->string());
  return tlb::gate::run_gate(t, r, &b);
}

int run_cli(const std::string& args, std::string& output) {
  return tlb::test::run_merged(std::string(TLBENCH_BINARY) + " " + args, output, fresh_dir("cli"));
}

std::string parse_error(const std::string& text) {
  try {
    tlb::gate::parse_thresholds(text, "g.json");
  } catch (const tlb::ConfigError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("gate: the fixture passes its thresholds", "[gate]") {
  const GateReport r = gate(kFixtureThresholds, kFixture);
  for (const auto& v : r.violations) UNSCOPED_INFO(v.case_id << " " << v.config << " " << v.rule);
  CHECK(r.passed());
  CHECK(r.points == 256);
  CHECK(r.measured == 224);
  CHECK(r.allowed_unmeasured == 32);
  CHECK(r.aa_points == 2);
  CHECK(r.cases == 4);
  CHECK(r.groups == 2);
}

TEST_CASE("gate: a doctored copy fails with exactly the planted violations", "[gate]") {
  const fs::path dir = doctored_copy("planted", [](json& row) {
    if (is(row, 2, "fp16", "01100")) row["speedup"] = 0.8;           // below min_speedup 0.9
    if (is(row, 7, "fp32", "10000")) row["golden_pass"] = false;     // accuracy
    if (is(row, 1, "fp16", "00101")) {                                // unexpected nonviable
      row["status"] = "nonviable";
      for (const char* k : {"speedup", "speedup_ci_low", "speedup_ci_high", "ref_ms", "cand_ms"})
        row.erase(k);
    }
    return true;
  });
  const GateReport r = gate(kFixtureThresholds, dir);
  CHECK(found(r) == Found{{1, "fp16", "00101", "allow_nonviable"},
                          {2, "fp16", "01100", "min_speedup"},
                          {7, "fp32", "10000", "require_golden"}});
  CHECK(r.violations.size() == 3);
  for (const auto& v : r.violations)
    if (v.rule == "min_speedup") {
      CHECK(v.measured == "0.800");
      CHECK(v.limit == ">= 0.900");
    }
}

TEST_CASE("gate: a regression against the baseline run is caught, noise is not", "[gate]") {
  const fs::path dir = doctored_copy("regression", [](json& row) {
    if (is(row, 1, "fp32", "11111")) slow_down(row, 0.85);
    if (is(row, 2, "fp16", "11000")) slow_down(row, 0.95);
    return true;
  });
  const fs::path base(kFixture);
  const GateReport r = gate(kFixtureThresholds, dir, &base);
  CHECK(found(r) == Found{{1, "fp32", "11111", "max_regression_pct"}});
  CHECK(r.compared == 224);
  CHECK(r.baseline_unmatched == 0);
  CHECK(r.worst_change_pct == Approx(-15.0).margin(0.01));
  REQUIRE(r.violations.size() == 1);
  CHECK_THAT(r.violations[0].measured, Catch::Contains("(-15.0%)"));

  // Without --baseline the same folder passes: each point is still above its floor.
  CHECK(gate(kFixtureThresholds, dir).passed());

  // The same 15 % drop whose interval still reaches the baseline's: noise either run reported.
  const fs::path noisy = doctored_copy("regression-noisy", [](json& row) {
    if (is(row, 1, "fp32", "11111")) {
      const double low = row["speedup_ci_low"].get<double>();
      slow_down(row, 0.85);
      row["speedup_ci_high"] = low;
    }
    return true;
  });
  const GateReport n = gate(kFixtureThresholds, noisy, &base);
  CHECK(n.passed());
  CHECK(n.regressions_within_noise == 1);
  CHECK(n.worst_change_pct == Approx(-15.0).margin(0.01));
}

TEST_CASE("gate: per-case rules: best configuration, missing configurations, auto", "[gate]") {
  const fs::path dir = doctored_copy("per-case", [](json& row) {
    if (is(row, 2, "fp16", "10010")) return false;  // a configuration never written
    if (row["case_id"] == 7 && row["dtype"] == "fp16" && row["status"] == "ok")
      row["speedup"] = std::min(row["speedup"].get<double>(), 1.2);
    return true;
  });
  replan(dir);
  const GateReport r = gate(kFixtureThresholds, dir);
  CHECK(found(r) == Found{{2, "fp16", "10010", "require_all_configs"},
                          {7, "fp16", "", "min_best_speedup"}});

  // An auto row that lags the best fixed configuration.
  const fs::path with_auto = doctored_copy("auto", [](json&) { return true; });
  {
    std::ofstream out(with_auto / "points.jsonl", std::ios::app);
    out << R"({"case_id": 1, "case_name": "tiny-4l", "dtype": "fp16", "config": "auto",)"
           R"( "policy": "auto", "status": "ok", "baseline": "00000", "speedup": 4.0,)"
           R"( "golden_pass": true, "golden_rel_l2": 0.003, "golden_threshold": 0.004})" "\n";
  }
  replan(with_auto);
  const std::string auto_rule = R"({"defaults": {"max_auto_shortfall_pct": 3},
      "overrides": [{"cases": [14], "configs": "x0xxx", "allow_nonviable": true}]})";
  const GateReport a = gate(auto_rule, with_auto);
  REQUIRE(found(a) == Found{{1, "fp16", "auto", "max_auto_shortfall_pct"}});
  CHECK_THAT(a.violations[0].measured, Catch::Contains("vs best 11111"));

  // The same lag when auto ran the best configuration itself: one configuration measured
  // twice, so the difference is noise and passes; another configuration that lags fails.
  for (const char* choice : {"11111", "11011"}) {
    const fs::path chose = doctored_copy(std::string("auto-") + choice, [](json&) { return true; });
    {
      std::ofstream out(chose / "points.jsonl", std::ios::app);
      out << R"({"case_id": 1, "case_name": "tiny-4l", "dtype": "fp16", "config": "auto",)"
             R"( "policy": "auto", "status": "ok", "baseline": "00000", "speedup": 4.0,)"
             R"( "golden_pass": true, "golden_rel_l2": 0.003, "golden_threshold": 0.004,)"
             R"( "auto_choice": ")" << choice << "\"}\n";
    }
    replan(chose);
    INFO("auto chose " << choice);
    const GateReport c = gate(auto_rule, chose);
    if (std::string(choice) == "11111") {
      CHECK(found(c).empty());
    } else {
      CHECK(found(c) == Found{{1, "fp16", "auto", "max_auto_shortfall_pct"}});
    }
  }
}

TEST_CASE("gate: later overrides win, rule by rule", "[gate]") {
  const Thresholds t = tlb::gate::parse_thresholds(R"({
    "defaults": {"min_speedup": 1.0, "require_strict": true},
    "overrides": [
      {"configs": "x1xxx", "min_speedup": 1.2},
      {"cases": "2-3", "dtypes": "fp16", "configs": ["x1xxx", "auto"], "min_speedup": null},
      {"cases": [3], "min_best_speedup": 2, "require_all_configs": false}
    ]})", "t.json");
  CHECK(*tlb::gate::rules_for(t, 1, "fp16", "00000").min_speedup == 1.0);
  CHECK(*tlb::gate::rules_for(t, 1, "fp16", "01000").min_speedup == 1.2);
  CHECK_FALSE(tlb::gate::rules_for(t, 2, "fp16", "01000").min_speedup.has_value());  // off
  CHECK(*tlb::gate::rules_for(t, 2, "bf16", "01000").min_speedup == 1.2);
  CHECK_FALSE(tlb::gate::rules_for(t, 3, "fp16", "auto").min_speedup.has_value());
  CHECK(tlb::gate::rules_for(t, 3, "fp16", "01000").require_strict);  // from defaults
  // Per-case lookups ignore overrides with "configs".
  const auto per_case = tlb::gate::rules_for(t, 3, "fp16", "");
  CHECK(*per_case.min_best_speedup == 2.0);
  CHECK_FALSE(per_case.require_all_configs);
  CHECK(tlb::gate::rules_for(t, 2, "fp16", "").require_all_configs);
}

TEST_CASE("gate: strict accuracy and fallbacks are opt-in rules", "[gate]") {
  // The fixture's fp32 whisper points with ffn on fail the strict check (TF32 against IEEE).
  const GateReport strict = gate(R"({"overrides": [{"cases": [14], "configs": "x0xxx",
                                    "allow_nonviable": true}],
                                    "defaults": {"require_strict": true}})", kFixture);
  CHECK(strict.violations.size() == 16);
  for (const auto& v : strict.violations) {
    CHECK(v.rule == "require_strict");
    CHECK(v.case_id == 7);
    CHECK(v.dtype == "fp32");
    CHECK(v.config[2] == '1');
  }
  const fs::path dir = doctored_copy("fallback", [](json& row) {
    if (is(row, 2, "fp16", "01000")) row["status"] = "fallback:attn";
    if (is(row, 2, "fp16", "00100")) row["status"] = "error";
    return true;
  });
  const std::string t = R"({"overrides": [{"cases": [14], "configs": "x0xxx",
                           "allow_nonviable": true}]})";
  CHECK(found(gate(t, dir)) == Found{{2, "fp16", "00100", "error"}});
  const std::string no_fallback = R"({"defaults": {"allow_fallback": false},
      "overrides": [{"cases": [14], "configs": "x0xxx", "allow_nonviable": true}]})";
  CHECK(found(gate(no_fallback, dir)) ==
        Found{{2, "fp16", "00100", "error"}, {2, "fp16", "01000", "allow_fallback"}});
}

TEST_CASE("gate: bad thresholds are one-line errors naming the JSON path", "[gate]") {
  CHECK_THAT(parse_error("{"), Catch::StartsWith("g.json: line 1, column 2: malformed JSON"));
  CHECK(parse_error("[]") == "g.json: $: expected an object with \"defaults\" and \"overrides\"");
  CHECK_THAT(parse_error(R"({"defaults": {"min_speedupp": 1}})"),
             Catch::StartsWith("g.json: $.defaults.min_speedupp: unknown key"));
  CHECK(parse_error(R"({"defaults": {"min_speedup": "1.1"}})") ==
        "g.json: $.defaults.min_speedup: expected a number or null, got \"1.1\"");
  CHECK(parse_error(R"({"defaults": {"max_regression_pct": -5}})") ==
        "g.json: $.defaults.max_regression_pct: -5 is out of range (must be >= 0)");
  CHECK(parse_error(R"({"defaults": {"require_golden": 1}})") ==
        "g.json: $.defaults.require_golden: expected true or false, got 1");
  CHECK_THAT(parse_error(R"({"defaults": {"cases": [1]}})"),
             Catch::StartsWith("g.json: $.defaults.cases: unknown key"));
  CHECK(parse_error(R"({"overrides": [{"configs": "x1z"}]})") ==
        "g.json: $.overrides[0].configs: \"x1z\" is not a pattern of 0, 1 and x (or \"auto\")");
  CHECK(parse_error(R"({"overrides": [{}, {"cases": "3-1"}]})") ==
        "g.json: $.overrides[1].cases: range \"3-1\" runs backwards");
  CHECK(parse_error(R"({"overrides": [{"dtypes": ["fp8"]}]})") ==
        "g.json: $.overrides[0].dtypes: unknown dtype \"fp8\" (fp16, bf16 or fp32)");
  CHECK(parse_error(R"({"overrides": [{"configs": "1xxxx", "min_best_speedup": 1.1}]})") ==
        "g.json: $.overrides[0].min_best_speedup: applies per case and dtype, so it cannot sit "
        "in an override with \"configs\"");
  CHECK(parse_error(R"({"default": {}})") ==
        "g.json: $.default: unknown key (expected defaults, overrides or a \"$comment\")");

  // A pattern that does not fit the results' technique count is found when gating.
  const Thresholds t =
      tlb::gate::parse_thresholds(R"({"overrides": [{"configs": "x1xx", "min_speedup": 1}]})", "g.json");
  const auto results = tlb::results::read_results(kFixture);
  CHECK_THROWS_WITH(tlb::gate::run_gate(t, results, nullptr),
                    Catch::Contains("g.json: $.overrides[0].configs: pattern \"x1xx\" has 4 "
                                    "positions but") &&
                        Catch::Contains("has 5 techniques (qkv, attn, ffn, norm, graph)"));
}

TEST_CASE("gate: configs/gates.json is valid and fits the technique set", "[gate]") {
  const Thresholds t =
      tlb::gate::load_thresholds(std::string(TLBENCH_SOURCE_DIR) + "/configs/gates.json");
  CHECK_FALSE(t.overrides.empty());
  const auto results = tlb::results::read_results(kFixture);
  CHECK_NOTHROW(tlb::gate::run_gate(t, results, nullptr));
  // Case 14's attn-off configurations are expected to be nonviable on every GPU.
  CHECK(tlb::gate::rules_for(t, 14, "fp16", "00000").allow_nonviable);
  CHECK_FALSE(tlb::gate::rules_for(t, 13, "fp16", "00000").allow_nonviable);
}

TEST_CASE("tlbench gate: exit codes 0, 1 and 2 with a table or a single line", "[gate][cli]") {
  const fs::path dir = fresh_dir("cli-thresholds");
  write(dir / "gates.json", kFixtureThresholds);
  const std::string thresholds = (dir / "gates.json").string();
  std::string out;

  REQUIRE(run_cli("gate --results " + kFixture + " --thresholds " + thresholds, out) == 0);
  CHECK_THAT(out, Catch::StartsWith("gate: passed: 256 points (224 measured, 32 allowed "
                                    "unmeasured) over 4 cases and 2 dtypes"));
  CHECK(std::count(out.begin(), out.end(), '\n') == 1);

  const fs::path bad = doctored_copy("cli-bad", [](json& row) {
    if (is(row, 2, "fp16", "01100")) {
      row["speedup"] = 0.8;
      row["speedup_ci_low"] = 0.79;
      row["speedup_ci_high"] = 0.81;
    }
    return true;
  });
  REQUIRE(run_cli("gate --results " + bad.string() + " --thresholds " + thresholds +
                      " --baseline " + kFixture, out) == 1);
  CHECK_THAT(out, Catch::StartsWith("case  name"));
  CHECK_THAT(out, Catch::Contains("   2  bert-base-128  fp16   01100   min_speedup"));
  CHECK_THAT(out, Catch::Contains("max_regression_pct"));
  CHECK_THAT(out, Catch::Contains("gate: FAILED: 2 violations in 256 points"));

  REQUIRE(run_cli("gate --results " + bad.string() + " --thresholds " + thresholds + " --json",
                  out) == 1);
  const json j = json::parse(out);
  CHECK(j["passed"] == false);
  CHECK(j["violations"].size() == 1);

  write(dir / "broken.json", R"({"defaults": {"min_speed": 1}})");
  REQUIRE(run_cli("gate --results " + kFixture + " --thresholds " + (dir / "broken.json").string(),
                  out) == 2);
  CHECK_THAT(out, Catch::StartsWith("tlbench: " + (dir / "broken.json").string() +
                                    ": $.defaults.min_speed: unknown key"));
  CHECK(std::count(out.begin(), out.end(), '\n') == 1);

  CHECK(run_cli("gate --results /nonexistent --thresholds " + thresholds, out) == 2);
}

// The committed official results and thresholds, as CI gates them.
TEST_CASE("gate: the official H200 results pass configs/gates.json and doctored copies fail",
          "[gate][cli]") {
  const fs::path official = fs::path(TLBENCH_SOURCE_DIR) / "results" / "h200";
  const std::string thresholds = std::string(TLBENCH_SOURCE_DIR) + "/configs/gates.json";
  REQUIRE(fs::is_regular_file(official / "points.jsonl"));
  std::string text;
  CHECK(run_cli("gate --results " + official.string() + " --thresholds " + thresholds, text) == 0);
  CHECK_THAT(text, Catch::Contains("gate: passed"));

  // Case 5 fp16 loses its speed (every configuration at 1.0x, the fused paths as slow as the
  // reference): its best no longer reaches the threshold and no configuration is faster.
  const fs::path slow = doctored_copy("official-slow", [](json& row) {
    if (row["case_id"] == 5 && row["dtype"] == "fp16" && !row["speedup"].is_null()) {
      row["speedup"] = 1.0;
      row["speedup_ci_low"] = 0.99;
      row["speedup_ci_high"] = 1.01;
      row["cand_ms"] = row["ref_ms"];
    }
    return true;
  }, official);
  CHECK(run_cli("gate --results " + slow.string() + " --thresholds " + thresholds, text) == 1);
  CHECK_THAT(text, Catch::Contains("min_best_speedup") && Catch::Contains("vit-l-257"));

  // A 10 % regression of one configuration against the official run as the baseline.
  const fs::path regressed = doctored_copy("official-regressed", [](json& row) {
    if (row["case_id"] == 8 && row["dtype"] == "bf16" && row["config"] == "01111")
      slow_down(row, 0.85);
    return true;
  }, official);
  CHECK(run_cli("gate --results " + regressed.string() + " --thresholds " + thresholds +
                    " --baseline " + official.string(), text) == 1);
  CHECK_THAT(text, Catch::Contains("max_regression_pct") && Catch::Contains("01111"));
  fs::remove_all(slow);
  fs::remove_all(regressed);
}

namespace {

// A copy of the fixture whose run.json `edit` rewrites (return false to leave none).
fs::path run_json_copy(const std::string& name, const std::function<bool(json&)>& edit) {
  const fs::path dir = doctored_copy(name, [](json&) { return true; });
  json run = json::parse(slurp(dir / "run.json"));
  if (edit(run))
    write(dir / "run.json", run.dump(1) + "\n");
  else
    fs::remove(dir / "run.json");
  return dir;
}

// The rules of a report's violations, without their points.
std::multiset<std::string> rules(const GateReport& r) {
  std::multiset<std::string> out;
  for (const auto& v : r.violations) out.insert(v.rule);
  return out;
}

}  // namespace

TEST_CASE("gate: a run that did not finish, or whose run.json is gone, fails", "[gate][integrity]") {
  for (const char* state : {"running", "interrupted", "device-fault"}) {
    const GateReport r = gate(kFixtureThresholds, run_json_copy(std::string("state-") + state, [&](json& run) {
                                run["state"] = state;
                                return true;
                              }));
    INFO(state);
    REQUIRE(rules(r) == std::multiset<std::string>{"run_state"});
    CHECK(r.violations[0].measured == fmt::format("run.json says \"{}\"", state));
  }
  const GateReport no_state = gate(kFixtureThresholds, run_json_copy("no-state", [](json& run) {
                                     run.erase("state");
                                     return true;
                                   }));
  CHECK(rules(no_state) == std::multiset<std::string>{"run_state"});
  const GateReport no_run = gate(kFixtureThresholds, run_json_copy("no-run", [](json&) { return false; }));
  CHECK(rules(no_run) == std::multiset<std::string>{"run_state"});
}

TEST_CASE("gate: rows missing from the planned grid fail, a whole (case, dtype) by name", "[gate][integrity]") {
  // Case 7's fp32 rows gone (a run stopped early, or a group lost in a copy).
  const GateReport group = gate(kFixtureThresholds, doctored_copy("no-group", [](json& row) {
                                  return !(row["case_id"] == 7 && row["dtype"] == "fp32");
                                }));
  CHECK(found(group) == Found{{0, "", "", "incomplete"}, {7, "fp32", "", "incomplete"}});
  for (const auto& v : group.violations) {
    if (v.case_id == 0) CHECK(v.measured == "226 rows on disk");
    if (v.case_id == 7) CHECK(v.measured + " / " + v.limit == "0 rows / 32 planned");
  }
  // One row gone: require_all_configs names it, the grid count says the folder is short.
  const GateReport row = gate(kFixtureThresholds, doctored_copy("no-row", [](json& r) { return !is(r, 14, "fp16", "11111"); }));
  CHECK(found(row) == Found{{0, "", "", "incomplete"},
                            {14, "fp16", "", "incomplete"},
                            {14, "fp16", "11111", "require_all_configs"}});
  // A run narrowed to cases 1 and 2 (run.json planning just those) is whole.
  const fs::path narrowed = doctored_copy("narrowed", [](json& r) { return r["case_id"] == 1 || r["case_id"] == 2; });
  replan(narrowed);
  CHECK(gate(kFixtureThresholds, narrowed).passed());
  // Rows of a group the run never planned cannot stand in for a planned one.
  const fs::path foreign = doctored_copy("foreign", [](json& r) {
    if (r["case_id"] == 7 && r["dtype"] == "fp32") r["dtype"] = "bf16";
    return true;
  });
  CHECK(found(gate(kFixtureThresholds, foreign)) ==
        Found{{7, "fp32", "", "incomplete"}, {7, "bf16", "", "incomplete"}});
  // A planned grid larger than the folder (a run.json whose rows never arrived).
  const GateReport larger = gate(kFixtureThresholds, run_json_copy("grid-larger", [](json& run) {
                                   run["grid"]["points"] = 300;
                                   return true;
                                 }));
  REQUIRE(rules(larger) == std::multiset<std::string>{"incomplete"});
  CHECK(larger.violations[0].limit == "300 planned in run.json");
  const GateReport no_grid = gate(kFixtureThresholds, run_json_copy("no-grid", [](json& run) {
                                    run.erase("grid");
                                    return true;
                                  }));
  CHECK(rules(no_grid) == std::multiset<std::string>{"incomplete"});
}

TEST_CASE("gate: a torn last line and a point written twice fail, whichever copy comes first",
          "[gate][integrity]") {
  const fs::path torn = doctored_copy("torn", [](json&) { return true; });
  {
    std::ofstream out(torn / "points.jsonl", std::ios::app | std::ios::binary);
    out << R"({"case_id": 2, "dtype": "fp16", "config": "11)";
  }
  const GateReport t = gate(kFixtureThresholds, torn);
  REQUIRE(rules(t) == std::multiset<std::string>{"torn_line"});
  CHECK(t.violations[0].measured == "points.jsonl line 259 is cut short");

  // The same point twice, the planted copy (faster, as an edit would be) last and then first.
  std::string original, lines = slurp(fs::path(kFixture) / "points.jsonl");
  {
    std::istringstream in(lines);
    for (std::string line; std::getline(in, line);)
      if (is(json::parse(line), 2, "fp16", "11000")) original = line;
  }
  REQUIRE(!original.empty());
  json planted = json::parse(original);
  planted["speedup"] = 9.0;
  for (bool planted_first : {false, true}) {
    const fs::path dir = fresh_dir(planted_first ? "dup-first" : "dup-last");
    fs::copy_file(fs::path(kFixture) / "run.json", dir / "run.json");
    write(dir / "points.jsonl", planted_first ? planted.dump() + "\n" + lines : lines + planted.dump() + "\n");
    const GateReport d = gate(kFixtureThresholds, dir);
    INFO("planted first: " << planted_first);
    CHECK(found(d) == Found{{2, "fp16", "11000", "duplicate_point"}});
  }
}

TEST_CASE("gate: accuracy verdicts are recomputed from the row's numbers, not trusted", "[gate][integrity]") {
  const GateReport r = gate(kFixtureThresholds, doctored_copy("verdicts", [](json& row) {
                              if (is(row, 1, "fp16", "11000")) row["golden_rel_l2"] = 1e10;  // pass kept
                              if (is(row, 2, "fp16", "10000")) row["nan_count"] = 1000;
                              if (is(row, 7, "fp16", "01000")) row["golden_threshold"] = 1e10;
                              return true;
                            }));
  CHECK(found(r) == Found{{1, "fp16", "11000", "require_golden"},
                          {2, "fp16", "10000", "require_golden"},
                          {7, "fp16", "01000", "require_golden"}});
  for (const auto& v : r.violations) {
    if (v.case_id == 1) CHECK_THAT(v.measured, Catch::Contains("rel L2 1.00e+10 > threshold"));
    if (v.case_id == 2) CHECK(v.measured == "golden_pass true with 1000 NaN, 0 Inf");
    if (v.case_id == 7) CHECK_THAT(v.measured, Catch::Contains("looser than the tolerance table's"));
  }
  // Strict: a pass with violations counted, under require_strict.
  const fs::path strict = doctored_copy("strict-verdict", [](json& row) {
    if (is(row, 14, "fp32", "01100")) {
      row["strict_pass"] = true;
      row["strict_violations"] = 12;
    }
    return true;
  });
  const char* strict_rules = R"({"defaults": {"require_strict": true}})";
  const GateReport s = gate(strict_rules, strict);
  std::set<std::string> planted;
  for (const auto& v : s.violations)
    if (v.case_id == 14 && v.config == "01100" && v.dtype == "fp32") planted.insert(v.measured);
  CHECK(planted == std::set<std::string>{"strict_pass true with 12 violations, 0 NaN, 0 Inf"});
}

TEST_CASE("gate: a baseline that does not measure the same thing is refused, and says why",
          "[gate][integrity]") {
  const fs::path base(kFixture);
  // Empty: nothing to compare with is no evidence of no regression.
  const fs::path empty = fresh_dir("base-empty");
  fs::copy_file(base / "run.json", empty / "run.json");
  write(empty / "points.jsonl", "");
  const GateReport e = gate(kFixtureThresholds, base, &empty);
  CHECK(rules(e) == std::multiset<std::string>{"baseline_empty"});

  // Case 2 measured at another sequence length in the baseline.
  const fs::path other_shape = doctored_copy("base-shape", [](json& row) {
    if (row["case_id"] == 2) row["seq"] = 256;
    return true;
  });
  const GateReport s = gate(kFixtureThresholds, base, &other_shape);
  REQUIRE(found(s) == Found{{2, "", "", "baseline_shape"}});
  CHECK(s.violations[0].measured == "seq 128 vs 256 (here vs baseline)");
  // Rows without shape columns (older runs) are compared on what they record.
  const fs::path no_shapes = doctored_copy("base-no-shapes", [](json& row) {
    for (const char* k : {"batch", "seq", "d_model", "heads", "d_ff", "layers", "mask"}) row.erase(k);
    return true;
  });
  CHECK(gate(kFixtureThresholds, base, &no_shapes).passed());

  // Results of two of the baseline's four cases: the rest is not "no regression".
  const fs::path part = doctored_copy("part", [](json& row) { return row["case_id"] == 1 || row["case_id"] == 2; });
  const GateReport c = gate(kFixtureThresholds, part, &base);
  CHECK(rules(c).count("baseline_coverage") == 1);
  for (const auto& v : c.violations)
    if (v.rule == "baseline_coverage") CHECK(v.measured == "128 baseline points missing here (cases 7, 14)");

  // Another technique order.
  const fs::path reordered = run_json_copy("base-techniques", [](json& run) {
    std::swap(run["techniques"][0], run["techniques"][1]);
    return true;
  });
  CHECK(rules(gate(kFixtureThresholds, base, &reordered)).count("baseline_techniques") == 1);
}

TEST_CASE("tlbench gate: a verdict that cannot be written is exit 2, not a pass", "[gate][cli][integrity]") {
  const fs::path dir = fresh_dir("cli-full");
  write(dir / "gates.json", kFixtureThresholds);
  if (!fs::exists("/dev/full")) {
    WARN("no /dev/full here: the full-stdout case is not run");
    return;
  }
  // A pass (one short line, failing at the flush) and a long table of violations (failing
  // while it prints): both exit 2 with the reason.
  const fs::path failing = doctored_copy("cli-full-failing", [](json& row) {
    if (row["status"] == "ok") row["golden_pass"] = false;
    return true;
  });
  for (const std::string& results : {kFixture, failing.string()}) {
    const std::string cmd = std::string(TLBENCH_BINARY) + " gate --results " + results + " --thresholds " +
                            (dir / "gates.json").string() + " > /dev/full 2> " + (dir / "err.txt").string();
    const int status = std::system(cmd.c_str());
    INFO(results);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 2);
    CHECK_THAT(slurp(dir / "err.txt"), Catch::Contains("cannot write the verdict to standard output: No space left"));
  }
}

TEST_CASE("gate: a 12 % slowdown of one configuration of one official case fails against the official run",
          "[gate][cli][integrity]") {
  const fs::path official = fs::path(TLBENCH_SOURCE_DIR) / "results" / "h200";
  const std::string thresholds = std::string(TLBENCH_SOURCE_DIR) + "/configs/gates.json";
  const fs::path slowed = doctored_copy("official-12pct", [](json& row) {
    if (row["case_id"] == 3 && row["dtype"] == "fp16" && row["config"] == "11110")
      slow_down(row, 0.88);
    return true;
  }, official);
  std::string text;
  CHECK(run_cli("gate --results " + official.string() + " --thresholds " + thresholds + " --baseline " +
                    official.string(), text) == 0);
  CHECK_THAT(text, Catch::Contains("vs baseline: 1338 points compared") &&
                       Catch::Contains("worst change +0.0%, 1338 of 1338 inside the baseline's intervals (100.0 %)"));
  CHECK(run_cli("gate --results " + slowed.string() + " --thresholds " + thresholds + " --baseline " +
                    official.string(), text) == 1);
  CHECK_THAT(text, Catch::Contains("max_regression_pct") && Catch::Contains("11110") && Catch::Contains("(-12.0%)"));
  CHECK_THAT(text, Catch::Contains("1337 of 1338 inside the baseline's intervals (99.9 %)"));
  CHECK_THAT(text, Catch::Contains("gate: FAILED: 1 violation"));
  fs::remove_all(slowed);

  // Every auto row gone: the per-case rules have nothing to judge, the planned grid notices.
  const fs::path no_auto = doctored_copy("official-no-auto", [](json& row) { return row["config"] != "auto"; }, official);
  CHECK(run_cli("gate --results " + no_auto.string() + " --thresholds " + thresholds, text) == 1);
  CHECK_THAT(text, Catch::Contains("incomplete") && Catch::Contains("1344 rows on disk") &&
                       Catch::Contains("1386 planned in run.json"));
  fs::remove_all(no_auto);
}

// A host-bound baseline's eager time measures the host: a rerun on a faster host moves every
// eager speedup of the group while the speedups against the replayed baseline stay. The gate
// compares the latter, and still catches a real slowdown there.
TEST_CASE("gate: host-bound points are compared against the replayed baseline", "[gate]") {
  // The regression rule alone: the floors judge the eager speedup, which this test moves.
  const char* thresholds = R"({
    "defaults": {"max_regression_pct": 10},
    "overrides": [{"cases": [14], "configs": "x0xxx", "allow_nonviable": true}]
  })";
  // Case 2 fp16 in the baseline: host-bound, its replayed baseline 1.6x faster than the eager;
  // the configurations with graph are timed against the replay too. On another host the
  // eager baseline moves: the graph candidates' eager speedups by eager_factor, the eager
  // candidates' not at all (host-bound alike).
  auto host_bound = [](json& row, double eager_factor, double replay_factor) {
    if (row["case_id"] != 2 || row["dtype"] != "fp16" || !row["speedup"].is_number()) return;
    row["host_bound"] = true;
    row["ref_graph_ms"] = row["ref_ms"].get<double>() / 1.6;
    const std::string config = row["config"];
    if (config.size() != 5 || config[4] != '1') return;
    for (const auto& [eager, replayed] : {std::pair{"speedup", "speedup_vs_graph_ref"},
                                          std::pair{"speedup_ci_low", "speedup_vs_graph_ref_ci_low"},
                                          std::pair{"speedup_ci_high", "speedup_vs_graph_ref_ci_high"}})
      row[replayed] = row[eager].get<double>() / 1.6 * replay_factor;
    slow_down(row, eager_factor);
  };
  const fs::path base = doctored_copy("host-bound-base", [&](json& row) {
    host_bound(row, 1.0, 1.0);
    return true;
  });
  // A faster host: eager speedups 25 % down (beyond their intervals), replayed ones unchanged.
  const fs::path faster_host = doctored_copy("host-bound-faster-host", [&](json& row) {
    host_bound(row, 0.75, 1.0);
    return true;
  });
  const GateReport ok = gate(thresholds, faster_host, &base);
  CHECK(ok.passed());
  CHECK(ok.compared_on_replay > 0);
  CHECK(ok.replayed_in_one_run == 0);
  CHECK(ok.worst_change_pct > -1.0);
  CHECK(ok.with_baseline_interval == ok.compared);
  CHECK(ok.inside_baseline_interval == ok.with_baseline_interval);
  // Measured eagerly, the same rows fail: the host, not the code, moved.
  const fs::path eager_only = doctored_copy("host-bound-eager-only", [&](json& row) {
    const std::string config = row["config"];
    if (row["case_id"] == 2 && row["dtype"] == "fp16" && config.size() == 5 && config[4] == '1') slow_down(row, 0.75);
    return true;
  });
  const fs::path fixture = kFixture;
  CHECK_FALSE(gate(thresholds, eager_only, &fixture).passed());
  // Against a baseline without the replayed figure (measured before it existed) the eager
  // speedups are all there is to compare, and the summary says how many points that was: a
  // replayed figure set against an eager one would measure the probe's 1.6x, not a change.
  const GateReport mixed = gate(thresholds, faster_host, &fixture);
  CHECK(mixed.compared_on_replay == 0);
  CHECK(mixed.replayed_in_one_run > 0);
  CHECK_FALSE(mixed.passed());
  const GateReport same_host = gate(thresholds, base, &fixture);
  CHECK(same_host.passed());  // eager figures unchanged: no false regression from the method
  CHECK(same_host.replayed_in_one_run > 0);
  // A real 20 % slowdown against the replayed baseline fails, and says which figure it judged.
  const fs::path slower = doctored_copy("host-bound-slower", [&](json& row) {
    host_bound(row, 1.0, is(row, 2, "fp16", "01101") ? 0.8 : 1.0);
    return true;
  });
  const GateReport bad = gate(thresholds, slower, &base);
  CHECK(found(bad) == Found{{2, "fp16", "01101", "max_regression_pct"}});
  REQUIRE(bad.violations.size() == 1);
  CHECK_THAT(bad.violations[0].measured, Catch::Contains("against the replayed baseline"));
}
