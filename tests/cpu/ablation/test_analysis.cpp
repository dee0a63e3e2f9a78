// Reading results folders back and analysing them: the factorial contrasts recover a known
// model exactly, intervals propagate as documented, incomplete cases are excluded with their
// reason, the best configuration respects accuracy, and `tlbench report` writes every file.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include "analysis.hpp"
#include "ablation_test_util.hpp"
#include "config.hpp"
#include "results_reader.hpp"
#include "text.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using tlb::analysis::Analysis;
using tlb::analysis::DTypeAnalysis;
using tlb::results::Point;
using tlb::results::Results;
using tlb::StatusKind;

namespace {

const std::string kFixture = std::string(TLBENCH_SOURCE_DIR) + "/tests/fixtures/results-small";

using tlb::test::slurp;

fs::path fresh_dir(const std::string& name) { return tlb::test::fresh_dir("tlb-analysis", name); }

// Runs a command line, returns its exit code; stdout+stderr go to `output`.
int run_cli(const std::string& args, std::string& output) {
  return tlb::test::run_merged(std::string(TLBENCH_BINARY) + " " + args, output, fresh_dir("cli"));
}

Point make_point(int case_id, const std::string& bits, double speedup, double log_hw,
                 const std::string& dtype = "fp16") {
  Point p;
  p.case_id = case_id;
  p.case_name = "case" + std::to_string(case_id);
  p.dtype = dtype;
  p.group = dtype;
  p.math = "fp32-acc";
  p.config = bits;
  p.status = StatusKind::ok;
  p.baseline = std::string(bits.size(), '0');
  p.speedup = speedup;
  p.speedup_ci_low = speedup * std::exp(-log_hw);
  p.speedup_ci_high = speedup * std::exp(log_hw);
  p.golden_pass = true;
  p.strict_pass = true;
  return p;
}

std::string bits3(int k) {
  std::string s = "000";
  for (int i = 0; i < 3; ++i)
    if (k & (1 << (2 - i))) s[static_cast<size_t>(i)] = '1';
  return s;
}

// ln s = offset(case) + 0.2 a + 0.1 b - 0.05 c + 0.06 a b   (a, b, c in {0, 1})
// gives main effects A = 0.2 + 0.06/2, B = 0.1 + 0.06/2, C = -0.05 and interactions
// AB = 0.06/2, AC = BC = 0.
double model_log_speedup(int case_id, int k) {
  const int a = (k >> 2) & 1, b = (k >> 1) & 1, c = k & 1;
  return 0.03 * case_id + 0.2 * a + 0.1 * b - 0.05 * c + 0.06 * a * b;
}

Results model_results(int cases, double log_hw) {
  Results r;
  r.dir = "model";
  r.techniques = {"a", "b", "c"};
  for (int id = 1; id <= cases; ++id)
    for (int k = 0; k < 8; ++k)
      r.points.push_back(make_point(id, bits3(k), std::exp(model_log_speedup(id, k)), log_hw));
  return r;
}

const tlb::analysis::TechniqueEffect& effect(const DTypeAnalysis& g, const std::string& name) {
  for (const auto& e : g.factorial.effects)
    if (e.technique == name) return e;
  FAIL("no effect for " << name);
  return g.factorial.effects.front();
}

}  // namespace

TEST_CASE("main effects and interactions recover a known log-additive model",
          "[analysis]") {
  const Analysis a = tlb::analysis::analyze(model_results(2, 0.01));
  REQUIRE(a.groups.size() == 1);
  const DTypeAnalysis& g = a.groups[0];
  REQUIRE(g.factorial.cases_used == std::vector<int>{1, 2});
  REQUIRE(g.factorial.cases_excluded.empty());
  CHECK(effect(g, "a").effect_log == Approx(0.23).margin(1e-12));
  CHECK(effect(g, "b").effect_log == Approx(0.13).margin(1e-12));
  CHECK(effect(g, "c").effect_log == Approx(-0.05).margin(1e-12));
  CHECK(effect(g, "a").ratio.value == Approx(std::exp(0.23)));
  REQUIRE(g.factorial.interactions.size() == 3);
  std::map<std::string, double> inter;
  for (const auto& i : g.factorial.interactions) inter[i.a + i.b] = i.effect_log;
  CHECK(inter["ab"] == Approx(0.03).margin(1e-12));
  CHECK(inter["ac"] == Approx(0.0).margin(1e-12));
  CHECK(inter["bc"] == Approx(0.0).margin(1e-12));

  // Within one case the same contrasts hold: the model has no case x technique term.
  REQUIRE(g.factorial.by_case.size() == 2);
  CHECK(g.factorial.by_case[1].effects[0].effect_log == Approx(0.23).margin(1e-12));

  // The arithmetic on/off means, computed the plain way.
  double on = 0, off = 0;
  for (int id = 1; id <= 2; ++id)
    for (int k = 0; k < 8; ++k)
      ((k & 4) ? on : off) += std::exp(model_log_speedup(id, k));
  CHECK(effect(g, "a").mean_on.value == Approx(on / 8));
  CHECK(effect(g, "a").mean_off.value == Approx(off / 8));
  CHECK(effect(g, "a").n_on == 8);
  CHECK(effect(g, "a").geomean_on.value / effect(g, "a").geomean_off.value ==
        Approx(effect(g, "a").ratio.value));
}

TEST_CASE("effect intervals combine the points' log half-widths as for a mean",
          "[analysis]") {
  // 2 cases x 8 configurations, every point +-h in log space: a contrast weights each point by
  // 2/16, so its half-width is (2/16) * sqrt(16 h^2) = h/2.
  const double h = 0.01;
  const Analysis a = tlb::analysis::analyze(model_results(2, h));
  const DTypeAnalysis& g = a.groups[0];
  for (const auto& e : g.factorial.effects) CHECK(e.effect_halfwidth == Approx(h / 2));
  for (const auto& i : g.factorial.interactions) CHECK(i.effect_halfwidth == Approx(h / 2));
  const auto& e = effect(g, "b");
  CHECK(e.ratio.low == Approx(std::exp(e.effect_log - h / 2)));
  CHECK(e.ratio.high == Approx(std::exp(e.effect_log + h / 2)));
  // The geometric mean of 8 points with half-width h: h / sqrt(8) in log space.
  CHECK(std::log(e.geomean_on.high / e.geomean_on.value) == Approx(h / std::sqrt(8.0)));

  // Without an interval the relative spreads of the two medians stand in.
  Point p = make_point(1, "000", 2.0, 0.0);
  p.speedup_ci_low.reset();
  p.speedup_ci_high.reset();
  p.ref_ms = 10.0;
  p.ref_spread_ms = 0.3;
  p.cand_ms = 5.0;
  p.cand_spread_ms = 0.2;
  CHECK(p.log_halfwidth() == Approx(std::sqrt(0.03 * 0.03 + 0.04 * 0.04)));
}

TEST_CASE("a case missing configurations is excluded from the effects, with the reason",
          "[analysis]") {
  Results r = model_results(3, 0.01);
  // Case 3: one configuration nonviable, one never run.
  for (auto& p : r.points)
    if (p.case_id == 3 && p.config == "110") {
      p.status = StatusKind::nonviable;
      p.speedup.reset();
    }
  std::erase_if(r.points, [](const Point& p) { return p.case_id == 3 && p.config == "001"; });
  const Analysis a = tlb::analysis::analyze(r);
  const DTypeAnalysis& g = a.groups[0];
  CHECK(g.factorial.cases_used == std::vector<int>{1, 2});
  REQUIRE(g.factorial.cases_excluded.size() == 1);
  const auto& x = g.factorial.cases_excluded[0];
  CHECK(x.case_id == 3);
  CHECK_THAT(x.reason, Catch::Contains("2 of 8 configurations not measured"));
  CHECK_THAT(x.reason, Catch::Contains("1 nonviable"));
  CHECK_THAT(x.reason, Catch::Contains("1 not run"));
  // The two complete cases still give the model's effects.
  CHECK(effect(g, "a").effect_log == Approx(0.23).margin(1e-12));
  // The matrix keeps case 3, with the gaps marked.
  REQUIRE(g.cols.size() == 3);
  CHECK(g.cells[6][2].status() == "nonviable");
  CHECK(g.cells[1][2].status() == "missing");
  CHECK_FALSE(g.cells[6][2].measured());
}

TEST_CASE("a case timed against attn-only is kept out of the effects even when complete",
          "[analysis]") {
  Results r = model_results(2, 0.01);
  for (auto& p : r.points)
    if (p.case_id == 2) p.baseline = "010";
  const Analysis a = tlb::analysis::analyze(r);
  const DTypeAnalysis& g = a.groups[0];
  CHECK(g.factorial.cases_used == std::vector<int>{1});
  REQUIRE(g.factorial.cases_excluded.size() == 1);
  CHECK_THAT(g.factorial.cases_excluded[0].reason, Catch::Contains("against 010"));
  CHECK(g.cols[1].baseline == "010");
}

TEST_CASE("no complete case: effects are not computed and the note says why", "[analysis]") {
  Results r = model_results(1, 0.01);
  r.points.pop_back();
  const Analysis a = tlb::analysis::analyze(r);
  CHECK(a.groups[0].factorial.effects.empty());
  CHECK_THAT(a.groups[0].factorial.note, Catch::Contains("no case has all 8 configurations"));
}

TEST_CASE("the best configuration is the fastest that passes golden", "[analysis]") {
  Results r = model_results(1, 0.01);
  // 110 and 111 are the two fastest (a and b on); the fastest fails golden.
  for (auto& p : r.points)
    if (p.config == "110") p.golden_pass = false;
  const Analysis a = tlb::analysis::analyze(r);
  const auto& best = a.groups[0].best.at(0);
  REQUIRE(best.best);
  CHECK(best.best->config == "111");
  // 100 is the next: ln s differs from 111's by 0.1 - 0.05 + 0.06 = 0.11, far outside +-0.01.
  CHECK(best.within_noise == 0);

  for (auto& p : r.points) p.golden_pass = false;
  const Analysis none = tlb::analysis::analyze(r);
  CHECK_FALSE(none.groups[0].best.at(0).best);
  CHECK_THAT(none.groups[0].best.at(0).note, Catch::Contains("passed the golden check"));
}

TEST_CASE("reader: the fixture folder as the runner writes it", "[analysis][reader]") {
  const Results r = tlb::results::read_results(kFixture);
  CHECK(r.techniques == std::vector<std::string>{"qkv", "attn", "ffn", "norm", "graph"});
  CHECK(r.techniques_source == "run.json");
  CHECK(r.device_name() == "NVIDIA H200");
  // 4 cases x 32 configurations x 2 dtypes, plus one A/A row per dtype.
  CHECK(r.points.size() == 258);
  int nonviable = 0, aa = 0;
  for (const auto& p : r.points) {
    if (p.status == StatusKind::nonviable) {
      ++nonviable;
      CHECK(p.case_id == 14);
      CHECK(p.config[1] == '0');
      CHECK_FALSE(p.speedup);
      CHECK_FALSE(p.measured());
    }
    if (p.is_aa()) ++aa;
  }
  CHECK(nonviable == 32);
  CHECK(aa == 2);
}

TEST_CASE("reader: extra keys, nulls, NaN strings, a torn last line, resumed duplicates",
          "[analysis][reader]") {
  const std::string run = R"({"techniques": [{"name": "qkv"}, {"name": "attn"}]})";
  const std::string lines =
      R"({"case_id": 1, "dtype": "fp16", "config": "10", "status": "ok", "speedup": 1.5, "golden_pass": true, "some_new_key": [1, 2]})"
      "\n"
      R"({"case_id": 1, "dtype": "fp16", "config": "01", "status": "nonviable", "speedup": null, "ref_ms": null})"
      "\n"
      R"({"case_id": 1, "dtype": "fp16", "config": "11", "status": "ok", "speedup": 1.2, "max_abs_err": "nan"})"
      "\n"
      R"({"case_id": 1, "dtype": "fp16", "config": "10", "status": "ok", "speedup": 1.6})"
      "\n"
      R"({"case_id": 1, "dtype": "fp16", "config": "00", "status": "o)";
  const Results r = tlb::results::parse_results(lines, run, "dir");
  REQUIRE(r.points.size() == 3);
  CHECK(r.techniques == std::vector<std::string>{"qkv", "attn"});
  CHECK(r.points[0].config == "10");
  CHECK(*r.points[0].speedup == 1.6);  // the later line of a re-measured point wins
  CHECK(r.points[1].status == StatusKind::nonviable);
  CHECK_FALSE(r.points[1].ref_ms);
  CHECK(std::isnan(*r.points[2].max_abs_err));
  REQUIRE(r.warnings.size() == 2);
  CHECK_THAT(r.warnings[0], Catch::Contains("measured again"));
  CHECK_THAT(r.warnings[1], Catch::Contains("dir/points.jsonl:5: last line is incomplete"));
}

TEST_CASE("reader: technique names come from single-technique rows without run.json",
          "[analysis][reader]") {
  const std::string lines =
      R"({"case_id": 1, "dtype": "bf16", "config": "100", "config_names": "qkv", "status": "ok", "speedup": 1.1})"
      "\n"
      R"({"case_id": 1, "dtype": "bf16", "config": "001", "config_names": "norm", "status": "ok", "speedup": 1.1})"
      "\n";
  const Results r = tlb::results::parse_results(lines, "", "dir");
  CHECK(r.techniques == std::vector<std::string>{"qkv", "bit2", "norm"});
}

TEST_CASE("reader: malformed lines are one-line errors naming file, line and key",
          "[analysis][reader]") {
  const std::string ok =
      R"({"case_id": 1, "dtype": "fp16", "config": "10", "status": "ok", "speedup": 1.5})";
  const std::string run = R"({"techniques": ["qkv", "attn"]})";
  auto error_of = [&](const std::string& second_line) {
    try {
      tlb::results::parse_results(ok + "\n" + second_line + "\n" + ok + "\n", run, "R");
    } catch (const tlb::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error_of("{not json"), Catch::StartsWith("R/points.jsonl:2: column 3: malformed JSON"));
  CHECK(error_of(R"({"case_id": 1, "dtype": "fp16", "config": "10", "status": "ok", "speedup": "fast"})") ==
        "R/points.jsonl:2: \"speedup\": expected a number, got \"fast\"");
  CHECK(error_of(R"({"case_id": 1, "dtype": "fp8", "config": "10", "status": "ok"})") ==
        "R/points.jsonl:2: \"dtype\": \"fp8\" is not fp16, bf16 or fp32");
  CHECK(error_of(R"({"dtype": "fp16", "config": "10", "status": "ok"})") ==
        "R/points.jsonl:2: \"case_id\": missing");
  CHECK_THAT(error_of(R"({"case_id": 1, "dtype": "fp16", "config": "101", "status": "ok"})"),
             Catch::Contains("has 3 bits but the run has 2 techniques"));
  CHECK_THAT(error_of(R"({"case_id": 1, "dtype": "fp16", "config": "1x", "status": "ok"})"),
             Catch::Contains("neither a bit string nor \"auto\""));
  CHECK_THROWS_WITH(tlb::results::read_results("/nonexistent-results"),
                    Catch::Contains("/nonexistent-results/points.jsonl: cannot be read"));
}

TEST_CASE("fp32 points of both math modes are analysed apart", "[analysis][reader]") {
  std::string lines;
  for (const char* math : {"tf32", "ieee"})
    lines += std::string(R"({"case_id": 1, "dtype": "fp32", "config": "1", "status": "ok", "speedup": 2, "math": ")") +
             math + "\"}\n";
  lines += R"({"case_id": 1, "dtype": "fp16", "config": "1", "status": "ok", "speedup": 2, "math": "fp32-acc"})" "\n";
  const Results r = tlb::results::parse_results(lines, R"({"techniques": ["ffn"]})", "d");
  REQUIRE(r.points.size() == 3);
  const Analysis a = tlb::analysis::analyze(r);
  REQUIRE(a.groups.size() == 3);
  CHECK(a.groups[0].group == "fp16");
  CHECK(a.groups[1].group == "fp32-tf32");
  CHECK(a.groups[2].group == "fp32-ieee");
}

TEST_CASE("fixture analysis: matrix, nonviable marks, excluded long case, plausible effects",
          "[analysis]") {
  const Analysis a = tlb::analysis::analyze(tlb::results::read_results(kFixture));
  REQUIRE(a.groups.size() == 2);
  for (const auto& g : a.groups) {
    INFO(g.group);
    CHECK(g.rows.size() == 32);
    REQUIRE(g.cols.size() == 4);
    CHECK(g.aa_points == 1);
    CHECK(g.cols[3].case_id == 14);
    CHECK(g.cols[3].baseline == "01000");
    for (size_t r = 0; r < g.rows.size(); ++r)
      CHECK(g.cells[r][3].measured() == (g.rows[r].label[1] == '1'));
    CHECK(g.factorial.cases_used == std::vector<int>{1, 2, 7});
    REQUIRE(g.factorial.cases_excluded.size() == 1);
    CHECK_THAT(g.factorial.cases_excluded[0].reason, Catch::Contains("16 nonviable"));
    CHECK(g.factorial.interactions.size() == 10);
    // Every technique helps on average in this model, and a graph pays most on the small,
    // launch-bound case (1) and least on the large one (7).
    for (const auto& e : g.factorial.effects) CHECK(e.ratio.low > 1.0);
    const auto& by_case = g.factorial.by_case;
    REQUIRE(by_case.size() == 3);
    CHECK(by_case[0].effects[4].ratio.value > by_case[2].effects[4].ratio.value);
    for (const auto& b : g.best) CHECK(b.best);
  }
}

TEST_CASE("write_analysis writes the matrix, heatmap, effects, interactions and best files",
          "[analysis]") {
  const fs::path out = fresh_dir("write");
  const Analysis a = tlb::analysis::analyze(tlb::results::read_results(kFixture));
  const auto files = tlb::analysis::write_analysis(a, out.string());
  for (const char* g : {"fp16", "fp32"})
    for (const char* stem : {"matrix_", "heatmap_", "effects_", "effects_by_case_",
                             "interactions_", "best_"}) {
      const std::string ext = std::string(stem) == "heatmap_" ? ".json" : ".csv";
      CHECK(fs::is_regular_file(out / (std::string(stem) + g + ext)));
    }
  CHECK(fs::is_regular_file(out / "effects_fp16.json"));
  CHECK(fs::is_regular_file(out / "analysis.json"));

  // Matrix, in the run's format (matrices.hpp): header + 32 configuration rows, config +
  // names + 4 cases per line; the long case is labelled with its baseline and its attn-off
  // cells say why they hold no speedup.
  std::istringstream matrix(slurp(out / "matrix_fp16.csv"));
  std::string line;
  std::getline(matrix, line);
  CHECK(line == "config,config_names,1 tiny-4l,2 bert-base-128,7 whisper-enc-1500,"
                "14 extreme-100k (vs 01000)");
  int rows = 0;
  while (std::getline(matrix, line)) {
    ++rows;
    const bool attn_on = line[1] == '1';
    const std::string last = line.substr(line.rfind(',') + 1);
    CHECK((last == "nonviable") == !attn_on);
  }
  CHECK(rows == 32);

  const json hm = json::parse(slurp(out / "heatmap_fp16.json"));
  CHECK(hm["rows"].size() == 32);
  CHECK(hm["cols"].size() == 4);
  CHECK(hm["rows"][0]["config"] == "00000");
  CHECK(hm["values"][0][3].is_null());
  CHECK(hm["status"][0][3] == "nonviable");
  CHECK(hm["values"][31][0].get<double>() > 1.0);
  CHECK(hm["best_row"][0] == 31);

  const json eff = json::parse(slurp(out / "effects_fp16.json"));
  CHECK(eff["techniques"].size() == 5);
  CHECK(eff["cases_used"] == json::array({1, 2, 7}));
  CHECK(eff["ci_level"] == 0.95);
  CHECK_THAT(eff["method"].get<std::string>(), Catch::Contains("standard error"));

  std::istringstream best(slurp(out / "best_fp32.csv"));
  std::getline(best, line);
  int best_rows = 0;
  while (std::getline(best, line)) ++best_rows;
  CHECK(best_rows == 4);
}

TEST_CASE("tlbench report regenerates the analysis and prints a summary per dtype",
          "[analysis][cli]") {
  const fs::path out = fresh_dir("report");
  std::string text;
  REQUIRE(run_cli("report " + kFixture + " --out " + out.string(), text) == 0);
  CHECK_THAT(text, Catch::Contains("fp16: 4 cases x 32 configurations"));
  CHECK_THAT(text, Catch::Contains("fp32 (tf32 math)"));
  CHECK_THAT(text, Catch::Contains("excluded case 14 extreme-100k"));
  CHECK(fs::is_regular_file(out / "heatmap_fp32.json"));

  REQUIRE(run_cli("report " + kFixture + " --out " + out.string() + " --json", text) == 0);
  const json j = json::parse(text);
  CHECK(j["groups"].size() == 2);
  CHECK(j["groups"][0]["best"].size() == 4);

  // The default output folder is DIR/analysis.
  const fs::path copy = fresh_dir("report-default");
  fs::copy(kFixture, copy, fs::copy_options::recursive);
  REQUIRE(run_cli("report " + copy.string() + " --quiet", text) == 0);
  CHECK(text.empty());
  CHECK(fs::is_regular_file(copy / "analysis" / "matrix_fp16.csv"));

  CHECK(run_cli("report /nonexistent-results", text) == 2);
  CHECK(text == "tlbench: /nonexistent-results/points.jsonl: cannot be read (is this a results "
                "folder?)\n");
}

namespace {

// The fixture's rows rewritten by `rewrite` (each row into the rows it returns) in a fresh
// folder, analysed; returns the folder the analysis was written to.
fs::path analyse_rewritten_fixture(const std::string& name, const std::function<std::vector<json>(json)>& rewrite) {
  const fs::path in = fresh_dir(name + "-in");
  fs::copy(kFixture, in, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  fs::remove(in / "points.csv");
  std::string lines;
  std::istringstream src(slurp(fs::path(kFixture) / "points.jsonl"));
  for (std::string line; std::getline(src, line);)
    for (const json& row : rewrite(json::parse(line))) lines += row.dump() + "\n";
  std::ofstream(in / "points.jsonl") << lines;
  const fs::path out = fresh_dir(name + "-out");
  tlb::analysis::write_analysis(tlb::analysis::analyze(tlb::results::read_results(in.string())), out.string());
  return out;
}

bool timed_fp16(const json& row) { return row["dtype"] == "fp16" && row.contains("cand_ms") && row["cand_ms"].is_number(); }

// Stage times in the proportions 5/20/30/10/5/15/15 % of the row's forward, floors 0.12 ms in all.
void add_stage_times(json& row) {
  const double t = row["cand_ms"].get<double>();
  row["stage_ms"] = {0.05 * t, 0.2 * t, 0.3 * t, 0.1 * t, 0.05 * t, 0.15 * t, 0.15 * t};
  row["stage_floor_ms"] = {0.01, 0.02, 0.03, 0.01, 0.01, 0.02, 0.02};
}

// The lines of a stage breakdown CSV after its header, each checked for its width, its label
// and its sums; the count of each role.
std::map<std::string, int> breakdown_roles(const fs::path& csv_path) {
  std::istringstream csv(slurp(csv_path));
  std::string line;
  std::getline(csv, line);
  CHECK(line.rfind("case_id,case_name,role,config,forward_ms,ln1_ms,qkv_ms,attn_ms,out_proj_ms,ln2_ms,ffn_up_ms,"
                   "ffn_down_ms,ln1_floor_ms",
                   0) == 0);
  std::map<std::string, int> roles;
  while (std::getline(csv, line)) {
    const std::vector<std::string> cells = tlb::split_csv_line(line);
    REQUIRE(cells.size() == 5 + 7 + 7 + 3);
    CHECK(cells[21] == "events without PDL less their cost");
    ++roles[cells[2]];
    // The stages add up to their sum column, and the floors to theirs (0.12 ms).
    double sum = 0;
    for (size_t i = 5; i < 12; ++i) sum += std::stod(cells[i]);
    CHECK(std::stod(cells[19]) == Approx(sum).epsilon(1e-4));
    CHECK(std::stod(cells[20]) == Approx(0.12));
    if (cells[2] == "reference") CHECK(cells[3] == "00000");
    if (cells[2] == "auto") CHECK(cells[3] == "auto=11111");
  }
  return roles;
}

}  // namespace

// run --stage-times rows: the report lays out, per case, the reference's and the best
// configuration's stages with their floors; rows without them give no such file.
TEST_CASE("write_analysis: a stage breakdown per dtype where rows carry stage times", "[analysis][stages]") {
  const fs::path out = analyse_rewritten_fixture("stages", [](json row) {
    if (timed_fp16(row)) add_stage_times(row);
    return std::vector<json>{row};
  });
  CHECK_FALSE(fs::exists(out / "stage_breakdown_fp32.csv"));
  REQUIRE(fs::is_regular_file(out / "stage_breakdown_fp16.csv"));
  const std::map<std::string, int> roles = breakdown_roles(out / "stage_breakdown_fp16.csv");
  // Cases 1, 2 and 7 have their reference measured; case 14 runs against attn-only.
  CHECK(roles.at("reference") == 3);
  CHECK(roles.at("best") == 4);
}

// run --stage-times-configs 00000,auto: only the reference and the auto point carry stage
// times; the breakdown then sets the auto point beside the reference.
TEST_CASE("write_analysis: the auto point stands in for the best where only it has stage times",
          "[analysis][stages]") {
  const fs::path out = analyse_rewritten_fixture("stages-auto", [](json row) {
    std::vector<json> rows;
    if (timed_fp16(row) && row["config"] == "00000" && row["status"] == "ok") add_stage_times(row);
    rows.push_back(row);
    if (timed_fp16(row) && row["config"] == "11111") {
      json a = row;  // the auto point, having chosen 11111
      a["config"] = "auto";
      a["auto_choice"] = "11111";
      a["config_names"] = "auto=" + row["config_names"].get<std::string>();
      add_stage_times(a);
      rows.push_back(a);
    }
    return rows;
  });
  REQUIRE(fs::is_regular_file(out / "stage_breakdown_fp16.csv"));
  const std::map<std::string, int> roles = breakdown_roles(out / "stage_breakdown_fp16.csv");
  CHECK(roles.at("reference") == 3);
  CHECK(roles.at("auto") == 4);
  CHECK(roles.count("best") == 0);
}
