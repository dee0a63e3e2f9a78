// `tlbench run --policy auto` end to end on a device: the auto point of every (case, dtype) is
// measured like any configuration (same baseline, same accuracy checks) after its group's
// fixed ones, its row says which configuration it chose (from those rows, else from the
// dispatch table) and why, --quick narrows the fixed configurations to
// each technique alone plus all five, and an interrupted run resumes without measuring the
// auto point twice.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "config.hpp"
#include "dispatch_table.hpp"
#include "cpu/ablation/ablation_test_util.hpp"
#include "gpu_test_util.hpp"
#include "test_support.hpp"
#include "writers.hpp"

using namespace tlb;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

using tlb::test::slurp;

using tlb::test::run_tlbench;

fs::path fresh_dir(const std::string& name) { return tlb::test::fresh_dir("tlbench-gpu-auto", name); }

// One small causal case: no official shape, so the built-in table answers with its nearest.
const char* kTinyCase = R"({"cases": [
  {"id": 3, "name": "tiny-auto", "batch": 2, "seq": 40, "d_model": 128, "heads": 2, "d_ff": 256,
   "layers": 2, "mask": "causal"}]})";

std::vector<PointRow> rows_of(const fs::path& run) {
  return read_points_jsonl((run / "points.jsonl").string());
}

// What the runner must have chosen for the case in `dtype` from `table`.
AutoConfig expected_choice(const DispatchTable& table, const fs::path& cases, DType dtype) {
  const CaseSet set = load_cases(cases.string());
  return auto_config(table, set.cases.at(0), dtype, Fp32Math::tf32, default_techniques());
}

void check_auto_row(const PointRow& p, const AutoConfig& want) {
  INFO(p.dtype << " " << p.status << " " << p.note);
  const TechniqueSet t = default_techniques();
  CHECK(p.config == "auto");
  CHECK(p.auto_choice == t.bits(want.config));
  CHECK(p.config_names == "auto=" + t.names(want.config));
  CHECK(p.note.rfind(want.note, 0) == 0);
  tlb::test::check_timed_row(p);
  REQUIRE(p.golden_rel_l2.has_value());
  CHECK(p.golden_pass == true);
  CHECK(*p.nan_count == 0);
  CHECK(p.strict_pass.has_value());
  CHECK(!p.dispatch.empty());
  CHECK(p.policy == "FF");
}

}  // namespace

TEST_CASE("tlbench run --policy auto --quick: the auto row comes last and takes its group's best",
          "[gpu][runner][auto]") {
  TLB_REQUIRE_GPU();
  const fs::path dir = fresh_dir("quick");
  const fs::path cases = dir / "cases.json";
  std::ofstream(cases) << kTinyCase;
  const fs::path out = dir / "out";
  tlb::test::CommandResult r = run_tlbench("run --config " + cases.string() +
                            " --policy auto --quick --dtypes fp16,fp32 --json --out " + out.string(),
                        dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.find("1 case x (6 configurations + auto) x 2 dtypes = 14 points") != std::string::npos);
  CHECK(r.err.find("quick: 6 of 32 configurations per case; --configs to choose") != std::string::npos);

  const auto rows = rows_of(out);
  REQUIRE(rows.size() == 14);
  // The table `tlbench dispatch` builds from this folder (it never reads auto rows): the auto
  // point, measured after its group's six fixed configurations, must have chosen its entry.
  const DispatchTable own = build_dispatch_table(results::read_results(out.string()));
  std::map<std::string, int> auto_rows;
  std::map<std::string, std::vector<std::string>> fixed;
  for (size_t i = 0; i < rows.size(); ++i) {
    const PointRow& p = rows[i];
    if (p.config == "auto") {
      ++auto_rows[p.dtype];
      INFO(p.dtype << " " << p.note);
      CHECK((i == 6 || i == 13));  // last of its group of seven
      const auto e = std::find_if(own.entries.begin(), own.entries.end(),
                                  [&](const DispatchEntry& x) { return x.dtype == p.dtype; });
      REQUIRE(e != own.entries.end());
      CHECK(p.auto_choice == e->config);
      CHECK(p.note.find("from this run's 6 rows of case 3 " + p.dtype) != std::string::npos);
      CHECK(p.status.ran());
      REQUIRE(p.speedup.has_value());
      CHECK(p.golden_pass == true);
    } else {
      CHECK(p.auto_choice.empty());
      fixed[p.dtype].push_back(p.config);
    }
  }
  CHECK(auto_rows == std::map<std::string, int>{{"fp16", 1}, {"fp32", 1}});
  for (auto& [dtype, configs] : fixed) {
    std::sort(configs.begin(), configs.end());
    CHECK(configs == std::vector<std::string>{"00001", "00010", "00100", "01000", "10000", "11111"});
  }

  const json run = json::parse(slurp(out / "run.json"));
  CHECK(run["grid"]["points"].get<int>() == 14);
  CHECK(run["grid"]["auto_points"].get<int>() == 2);
  CHECK(run["grid"]["configurations"].get<int>() == 6);
  CHECK(run["options"]["policy"].get<std::string>() == "auto");
  CHECK(run["dispatch_table"]["origin"].get<std::string>() == kBuiltinDispatchOrigin);
  CHECK(run["dispatch_table"]["provenance"].get<std::string>() == dispatch_provenance(builtin_dispatch_table()));
  CHECK(run["dispatch_table"]["entries"].get<size_t>() == builtin_dispatch_table().entries.size());

  // The run-time matrices carry the auto row last.
  const std::string matrix = slurp(out / "matrix_fp16.csv");
  const size_t last = matrix.rfind("\nauto,auto,");
  REQUIRE(last != std::string::npos);
  CHECK(matrix.find('\n', last + 1) == matrix.size() - 1);
  fs::remove_all(dir);
}

TEST_CASE("tlbench run --configs auto with a table file: the exact entry's configuration",
          "[gpu][runner][auto]") {
  TLB_REQUIRE_GPU();
  const fs::path dir = fresh_dir("table");
  const fs::path cases = dir / "cases.json";
  std::ofstream(cases) << kTinyCase;
  // A table made for this case: attn+norm in fp16; nothing for fp32 (every technique on).
  DispatchTable table;
  table.origin = (dir / "table.json").string();
  table.sources = {DispatchSource{"", "test", "", "", false}};
  table.techniques = {"qkv", "attn", "ffn", "norm", "graph"};
  DispatchEntry e;
  e.dtype = "fp16";
  e.math = "fp32-acc";
  e.shape = dispatch_shape(load_cases(cases.string()).cases.at(0).shape);
  e.config = "01010";
  e.config_names = "attn+norm";
  e.speedup = 1.5;
  e.case_id = 3;
  e.case_name = "tiny-auto";
  table.entries.push_back(e);
  write_dispatch_table(table, table.origin);

  const fs::path out = dir / "out";
  tlb::test::CommandResult r = run_tlbench("run --config " + cases.string() + " --configs auto --quick --dtypes fp16,fp32 " +
                            "--dispatch-table " + table.origin + " --out " + out.string(),
                        dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto rows = rows_of(out);
  REQUIRE(rows.size() == 2);
  const DispatchTable reread = load_dispatch_table(table.origin);
  for (const PointRow& p : rows) {
    const DType d = p.dtype == "fp16" ? DType::fp16 : DType::fp32;
    check_auto_row(p, expected_choice(reread, cases, d));
    if (d == DType::fp16) {
      CHECK(p.auto_choice == "01010");
      CHECK(p.note.find("exact shape: case 3 tiny-auto fp16") != std::string::npos);
    } else {
      CHECK(p.auto_choice == "11111");
      CHECK(p.note.find("no fp32 (tf32) entry; every technique on") != std::string::npos);
    }
  }
  CHECK(json::parse(slurp(out / "run.json"))["dispatch_table"]["origin"].get<std::string>() ==
        table.origin);
  fs::remove_all(dir);
}

TEST_CASE("tlbench run --policy auto: SIGINT then --resume measures the auto point once",
          "[gpu][runner][auto]") {
  TLB_REQUIRE_GPU();
  const fs::path dir = fresh_dir("resume");
  const fs::path cases = dir / "cases.json";
  std::ofstream(cases) << kTinyCase;
  const fs::path out = dir / "out";
  const std::string args = "run --config " + cases.string() +
                           " --policy auto --quick --dtypes fp16,bf16 --configs 11000,01000 --out " +
                           out.string();
  tlb::test::CommandResult r = run_tlbench(args, dir, "TLBENCH_INJECT_SIGINT_AFTER=2");
  INFO(r.err);
  REQUIRE(r.exit_code == 130);
  CHECK(rows_of(out).size() == 2);
  r = run_tlbench("run --resume " + out.string(), dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto rows = rows_of(out);
  REQUIRE(rows.size() == 6);  // (2 fixed + auto) x 2 dtypes
  std::map<std::string, int> keys;
  for (const PointRow& p : rows) ++keys[p.dtype + "|" + p.config];
  CHECK(keys.size() == 6);
  for (const auto& [key, n] : keys) {
    INFO(key);
    CHECK(n == 1);
  }
  CHECK(keys.count("fp16|auto") == 1);
  CHECK(keys.count("bf16|auto") == 1);
  fs::remove_all(dir);
}
