// The CI gate: the fixture passes, doctored copies fail with exactly the violations that were
// planted, regression against a baseline is caught, and a bad thresholds file is a one-line
// usage error (exit 2).
#include <catch2/catch.hpp>

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
    if (is(row, 1, "fp32", "11111")) row["speedup"] = row["speedup"].get<double>() * 0.85;
    if (is(row, 2, "fp16", "11000")) row["speedup"] = row["speedup"].get<double>() * 0.95;
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
}

TEST_CASE("gate: per-case rules: best configuration, missing configurations, auto", "[gate]") {
  const fs::path dir = doctored_copy("per-case", [](json& row) {
    if (is(row, 2, "fp16", "10010")) return false;  // a configuration never written
    if (row["case_id"] == 7 && row["dtype"] == "fp16" && row["status"] == "ok")
      row["speedup"] = std::min(row["speedup"].get<double>(), 1.2);
    return true;
  });
  const GateReport r = gate(kFixtureThresholds, dir);
  CHECK(found(r) == Found{{2, "fp16", "10010", "require_all_configs"},
                          {7, "fp16", "", "min_best_speedup"}});

  // An auto row that lags the best fixed configuration.
  const fs::path with_auto = doctored_copy("auto", [](json&) { return true; });
  {
    std::ofstream out(with_auto / "points.jsonl", std::ios::app);
    out << R"({"case_id": 1, "case_name": "tiny-4l", "dtype": "fp16", "config": "auto",)"
           R"( "policy": "auto", "status": "ok", "baseline": "00000", "speedup": 4.0,)"
           R"( "golden_pass": true})" "\n";
  }
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
             R"( "golden_pass": true, "auto_choice": ")" << choice << "\"}\n";
    }
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
    if (is(row, 2, "fp16", "01100")) row["speedup"] = 0.8;
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
      row["speedup"] = row["speedup"].get<double>() * 0.85;
    return true;
  }, official);
  CHECK(run_cli("gate --results " + regressed.string() + " --thresholds " + thresholds +
                    " --baseline " + official.string(), text) == 1);
  CHECK_THAT(text, Catch::Contains("max_regression_pct") && Catch::Contains("01111"));
  fs::remove_all(slow);
  fs::remove_all(regressed);
}
