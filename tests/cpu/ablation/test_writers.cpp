// Result files: every column survives a CSV and a JSONL round trip (NaN and infinities
// included), a half-written last line is repaired on reopening, points.csv is rebuilt from
// points.jsonl, run.json is replaced atomically, and the per-dtype matrices come out of the
// rows.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <fstream>
#include <sstream>

#include "matrices.hpp"
#include "text.hpp"
#include "writers.hpp"

using namespace tlb;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("tlbench_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

PointRow sample_row(int case_id, const std::string& config, const std::string& status) {
  PointRow r;
  r.case_id = case_id;
  r.case_name = "bert, \"base\"";  // a comma and quotes: CSV must quote
  r.batch = 8;
  r.seq = 128;
  r.d_model = 768;
  r.heads = 12;
  r.d_ff = 3072;
  r.layers = 4;
  r.mask = "padding";
  r.dtype = "fp16";
  r.math = "fp32-acc";
  r.config = config;
  r.config_names = "qkv+attn";
  r.policy = "FFFF";
  r.status = PointStatus::from_string(status);
  r.baseline = "00000";
  r.ref_ms = 0.34375;
  r.ref_spread_ms = 0.001;
  r.cand_ms = 0.1 + 0.2;  // not exactly representable: the text must round-trip the bits
  r.speedup = 1.1458333333333333;
  r.speedup_ci_low = 1.14;
  r.speedup_ci_high = 1.15;
  r.speedup_ci_level = 0.9785;
  r.host_bound = true;
  r.ref_graph_ms = 0.2;
  r.speedup_vs_graph_ref = 0.69;
  r.speedup_vs_graph_ref_ci_low = 0.68;
  r.speedup_vs_graph_ref_ci_high = 0.7;
  r.reps = 40;
  r.reps_attempted = 42;
  r.throttled_samples = 4;
  r.stop_reason = "converged";
  r.max_mhz = 1980;
  r.tflops = 123.25;
  r.peak_bytes = int64_t{1} << 33;
  r.predicted_bytes = 8000000000;
  r.max_abs_err = 1e-3;
  r.max_rel_err = std::numeric_limits<double>::infinity();
  r.strict_violations = 0;
  r.strict_pass = true;
  r.golden_rel_l2 = std::nan("");
  r.golden_pass = false;
  r.nan_count = 3;
  r.inf_count = 0;
  r.layer_rel_l2 = {1e-4, 2e-4, -std::numeric_limits<double>::infinity()};
  r.dispatch = "qkv=mma_128x128;attn=flash_short";
  r.fallback_reasons = "ffn: d_ff 3000 not a multiple of 64\nsecond line";
  r.timestamp = "2026-11-29T12:00:00Z";
  return r;
}

void check_same(const PointRow& a, const PointRow& b) {
  CHECK(to_json(a).dump() == to_json(b).dump());
}

}  // namespace

TEST_CASE("a point row round-trips through JSON and CSV exactly", "[writers]") {
  const PointRow r = sample_row(2, "11000", "ok");
  const PointRow from_json = point_from_json(nlohmann::json::parse(to_json(r).dump()));
  check_same(r, from_json);
  CHECK(*from_json.cand_ms == 0.1 + 0.2);
  CHECK(std::isnan(*from_json.golden_rel_l2));
  CHECK(std::isinf(*from_json.max_rel_err));
  CHECK(!from_json.min_mhz.has_value());

  const std::string line = to_csv_line(r);
  const auto fields = split_csv_line(line);
  REQUIRE(fields.size() == point_columns().size());
  CHECK(fields[1] == r.case_name);
  const PointRow from_csv = point_from_csv(fields);
  check_same(r, from_csv);
  CHECK(split_csv_line(csv_header()) == point_columns());
}

TEST_CASE("the columns cover what every result row must say", "[writers]") {
  const auto& c = point_columns();
  for (const char* needed :
       {"case_id", "case_name", "batch", "seq", "d_model", "heads", "d_ff", "layers", "mask",
        "dtype", "math", "config", "config_names", "policy", "status", "baseline", "ref_ms",
        "ref_spread_ms", "cand_ms", "cand_spread_ms", "speedup", "speedup_ci_low",
        "speedup_ci_high", "host_bound", "ref_graph_ms", "speedup_vs_graph_ref",
        "speedup_vs_graph_ref_ci_low", "speedup_vs_graph_ref_ci_high", "reps", "throttled_samples", "tflops", "ref_tflops", "peak_bytes",
        "predicted_bytes", "max_abs_err", "max_rel_err", "strict_violations", "strict_pass",
        "golden_rel_l2", "golden_rel_l2_ref", "golden_pass", "nan_count", "inf_count",
        "dispatch", "fallback_reasons", "timestamp"}) {
    INFO(needed);
    CHECK(std::find(c.begin(), c.end(), needed) != c.end());
  }
}

TEST_CASE("point files are appended, repaired and kept in step", "[writers]") {
  const fs::path dir = fresh_dir("points");
  {
    PointWriter w(dir.string());
    CHECK(w.existing().empty());
    w.append(sample_row(1, "00000", "ok"));
    w.append(sample_row(1, "01000", "nonviable"));
  }
  // A crash mid-write leaves half a line in points.jsonl and a CSV without the row.
  {
    std::ofstream j(dir / "points.jsonl", std::ios::app);
    j << "{\"case_id\": 1, \"dtype\": \"fp";
  }
  std::vector<std::string> warnings;
  auto rows = read_points_jsonl((dir / "points.jsonl").string(), &warnings);
  CHECK(rows.size() == 2);
  CHECK(warnings.size() == 1);
  {
    PointWriter w(dir.string());
    REQUIRE(w.existing().size() == 2);
    CHECK(w.existing()[1].status == StatusKind::nonviable);
    w.append(sample_row(2, "11111", "fallback:attn"));
  }
  rows = read_points_jsonl((dir / "points.jsonl").string());
  REQUIRE(rows.size() == 3);
  CHECK(rows[2].status.str() == "fallback:attn");
  CHECK(rows[2].status.fallback_stages() == std::vector<std::string>{"attn"});
  // points.csv: the header and the same three rows (a quoted field spans two lines here).
  const std::string csv = slurp(dir / "points.csv");
  CHECK(csv.rfind(csv_header() + "\n", 0) == 0);
  std::string expected = csv_header() + "\n";
  for (const PointRow& r : rows) expected += to_csv_line(r) + "\n";
  CHECK(csv == expected);
  fs::remove_all(dir);
}

TEST_CASE("malformed points.jsonl lines are reported with their line number", "[writers]") {
  const fs::path dir = fresh_dir("badjsonl");
  {
    std::ofstream j(dir / "points.jsonl");
    j << to_json(sample_row(1, "00000", "ok")).dump() << "\n";
    j << "{\"case_id\": \"one\"}\n";
  }
  try {
    read_points_jsonl((dir / "points.jsonl").string());
    FAIL("expected an error");
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    CHECK(what.find(":2:") != std::string::npos);
    CHECK(what.find("case_id") != std::string::npos);
  }
  fs::remove_all(dir);
}

TEST_CASE("run.json is replaced atomically", "[writers]") {
  const fs::path dir = fresh_dir("atomic");
  const std::string path = (dir / "run.json").string();
  write_file_atomic(path, "{\"state\": \"running\"}\n");
  CHECK(slurp(path) == "{\"state\": \"running\"}\n");
  write_file_atomic(path, "{\"state\": \"complete\"}\n");
  CHECK(slurp(path) == "{\"state\": \"complete\"}\n");
  CHECK(!fs::exists(path + ".tmp"));
  // A folder that cannot be written: the old file stays whole.
  CHECK_THROWS(write_file_atomic((dir / "missing" / "run.json").string(), "x"));
  CHECK(slurp(path) == "{\"state\": \"complete\"}\n");
  fs::remove_all(dir);
}

TEST_CASE("speedup matrices: configurations by cases, per dtype", "[writers]") {
  std::vector<PointRow> rows;
  auto add = [&](int id, const std::string& dtype, const std::string& cfg,
                 const std::string& status, std::optional<double> s,
                 const std::string& baseline = "00000") {
    PointRow r;
    r.case_id = id;
    r.case_name = "c" + std::to_string(id);
    r.dtype = dtype;
    r.math = dtype == "fp32" ? "tf32" : "fp32-acc";
    r.config = cfg;
    r.config_names = cfg == "00" ? "reference" : "x";
    r.status = PointStatus::from_string(status);
    r.speedup = s;
    r.baseline = baseline;
    rows.push_back(r);
  };
  add(2, "fp16", "00", "ok", 1.0);
  add(2, "fp16", "10", "ok", 1.5);
  add(1, "fp16", "10", "fallback:qkv", 0.9);
  add(1, "fp16", "00", "oom", std::nullopt);
  add(3, "fp16", "10", "nonviable", std::nullopt, "01");
  add(3, "fp16", "10", "ok", 2.25, "01");  // resumed: the later row wins
  add(1, "fp32", "10", "ok", 3.0);
  add(1, "fp16", "00", "aa", 1.001);       // A/A rows are no configuration
  const auto ms = build_matrices(rows);
  REQUIRE(ms.size() == 2);
  const SpeedupMatrix& m = ms[0];
  CHECK(m.group == "fp16");
  REQUIRE(m.configs == std::vector<std::string>{"00", "10"});
  REQUIRE(m.cases.size() == 3);
  CHECK(m.cases[0].case_id == 1);
  CHECK(m.cases[2].baseline == "01");
  CHECK(m.cells[0] == std::vector<std::string>{"oom", "1.0000", ""});
  CHECK(m.cells[1] == std::vector<std::string>{"0.9000", "1.5000", "2.2500"});
  const std::string csv = matrix_csv(m);
  CHECK(csv.rfind("config,config_names,1 c1,2 c2,3 c3 (vs 01)\n", 0) == 0);
  CHECK(ms[1].group == "fp32");

  const fs::path dir = fresh_dir("matrices");
  {
    PointWriter w(dir.string());
    for (const PointRow& r : rows) w.append(r);
  }
  const auto files = write_matrices_from_points(dir.string());
  CHECK(files == std::vector<std::string>{"matrix_fp16.csv", "matrix_fp32.csv"});
  CHECK(slurp(dir / "matrix_fp16.csv") == csv);
  fs::remove_all(dir);
}
