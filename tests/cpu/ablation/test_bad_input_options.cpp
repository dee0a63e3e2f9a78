// Option and field ranges, checked before any device work: eps, layers, seeds, empty values,
// --mem-gib, run's numeric options, speedups and times in points.jsonl, shapes; the messages of
// an unknown subcommand, of --resume on a broken or moved folder, and --json without a device.
#include <nlohmann/json.hpp>

#include "bad_input_util.hpp"
#include "run_options.hpp"
#include "text.hpp"

using namespace tlb::test::bad_input;
using tlb::test::shell_quote;
using tlb::test::slurp;

TEST_CASE("eps beyond a float is refused, not turned into inf", "[bad-input][ranges][cli]") {
  Scratch s("eps");
  for (const std::string eps : {"3.5e38", "1e300", "0", "-1e-5", "1e-50"}) {
    INFO(eps);
    s.write("cases.json", replaced(kOneCase, "\"layers\": 2", "\"layers\": 2, \"eps\": " + eps));
    check_refused(tlbench("plan --mem-gib 80 --config cases.json", s), {"cases.json: $.cases[0].eps: expected a positive number"});
  }
}

TEST_CASE("layers beyond 4096 is refused at once, not planned for minutes", "[bad-input][ranges][cli]") {
  Scratch s("layers");
  for (const std::string layers : {"4097", "100000000", "2147483647"}) {
    INFO(layers);
    s.write("cases.json", replaced(kOneCase, "\"layers\": 2", "\"layers\": " + layers));
    const auto start = std::chrono::steady_clock::now();
    check_refused(tlbench("plan --mem-gib 80 --config cases.json", s),
                  {"cases.json: $.cases[0].layers: expected a positive integer of at most 4096"});
    CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 5.0);
  }
}

// Against the same plan of 2 layers, so that what the command costs on any host (a CUDA
// driver that `plan` finds and opens takes over 100 MB and some CPU time) is not counted.
TEST_CASE("the largest accepted layer count plans in well under a second", "[bad-input][ranges][cli]") {
  Scratch s("layers-max");
  s.write("two.json", kOneCase);
  s.write("cases.json", replaced(kOneCase, "\"layers\": 2", "\"layers\": 4096"));
  const Measured base = measure({"plan", "--mem-gib", "80", "--config", s.path("two.json")}, s);
  const Measured m = measure({"plan", "--mem-gib", "80", "--config", s.path("cases.json")}, s);
  INFO(m.err);
  REQUIRE(base.rc == 0);
  CHECK(m.rc == 0);
  CHECK(m.cpu_seconds - base.cpu_seconds < 1.0);
  CHECK(m.max_rss_kib - base.max_rss_kib < 100 * 1024);
}

TEST_CASE("plan and export --seed out of range: exit 2, not wrapped or clamped", "[bad-input][ranges][cli]") {
  Scratch s("seed");
  for (const std::string seed : {"-1", "123456789012345678901234", "1.5"}) {
    INFO(seed);
    check_refused(tlbench("plan --mem-gib 80 --config " + shell_quote(kCases) + " --seed " + seed, s), {"--seed"});
    check_refused(tlbench("export --no-outputs --config " + shell_quote(kCases) +
                              " --case 1 --dtype fp16 -o x.safetensors --seed " + seed, s),
                  {"--seed"});
  }
  CHECK(s.listing().empty());
}

TEST_CASE("empty --cases, --configs, --dtypes and --policy are refused, not read as the default",
          "[bad-input][ranges][cli]") {
  Scratch s("empty-options");
  for (const std::string opt : {"--cases", "--configs", "--dtypes", "--policy", "--techniques", "--dispatch-table"}) {
    INFO(opt);
    check_refused(tlbench("plan --mem-gib 80 --config " + shell_quote(kCases) + " " + opt + " ''", s),
                  {opt, "an empty value"});
    check_refused(tlbench("run --config " + shell_quote(kCases) + " --out r " + opt + " ''", s), {opt, "an empty value"});
  }
  CHECK(s.listing().empty());
}

TEST_CASE("plan --mem-gib below 1 MiB, non-finite or huge is refused", "[bad-input][ranges][cli]") {
  Scratch s("mem-gib");
  for (const std::string v : {"1e-30", "0.0001", "0", "nan", "inf", "1e300"}) {
    INFO(v);
    check_refused(tlbench("plan --config " + shell_quote(kCases) + " --mem-gib " + v, s), {"--mem-gib", "expected"});
  }
  const Result ok = tlbench("plan --config " + shell_quote(kCases) + " --mem-gib 0.001", s);
  CHECK(ok.rc == 0);
}

TEST_CASE("run --mem-reserve-mib, --atol and --rtol out of range: exit 2 before the device check",
          "[bad-input][ranges][cli]") {
  Scratch s("run-ranges");
  for (const std::string opt : {"--mem-reserve-mib -1", "--mem-reserve-mib nan", "--atol inf", "--rtol nan",
                                "--rtol -0.5", "--max-reps -3", "--point-budget-ms -1", "--point-budget-ms nan",
                                "--blocks 0", "--blocks 17"}) {
    INFO(opt);
    check_refused(tlbench("run --config " + shell_quote(kCases) + " --out r " + opt, s), {opt.substr(0, opt.find(' '))});
  }
  CHECK(s.listing().empty());
}

TEST_CASE("plan's timing options out of range: exit 2, one line naming the option", "[bad-input][ranges][cli]") {
  Scratch s("plan-timing");
  for (const std::string opt : {"--blocks 0", "--blocks 17", "--min-reps 0", "--max-reps -3", "--max-reps 2",
                                "--point-budget-ms -1", "--point-budget-ms nan", "--point-budget-ms 1e300"}) {
    INFO(opt);
    check_refused(tlbench("plan --mem-gib 80 --config " + shell_quote(kCases) + " " + opt, s),
                  {opt.substr(0, opt.find(' '))});
  }
  CHECK(s.listing().empty());
}

TEST_CASE("a speedup or time at or below zero in points.jsonl is refused with its line", "[bad-input][ranges][cli]") {
  Scratch s("negative-speedup");
  const std::string dir = copy_fixture(s);
  const std::string points = dir + "/points.jsonl";
  const std::string text = slurp(points);
  for (const auto& [from, to, key] : {std::tuple{"\"speedup\": 1.57295", "\"speedup\": -1.5", "speedup"},
                                      std::tuple{"\"ref_ms\": 0.29891", "\"ref_ms\": 0", "ref_ms"},
                                      std::tuple{"\"cand_ms\": 0.19003", "\"cand_ms\": -0.2", "cand_ms"}}) {
    INFO(key);
    std::ofstream(points) << replaced(text, from, to);
    check_refused(tlbench("gate --results " + dir + " --thresholds " + kGates, s),
                  {points + ":1: \"" + std::string(key) + "\": expected a positive number"});
  }
}

TEST_CASE("a shape whose buffers cannot be counted is refused before planning", "[bad-input][ranges][cli]") {
  Scratch s("huge-shape");
  s.write("cases.json", replaced(replaced(kOneCase, "\"batch\": 2", "\"batch\": 2147483647"), "\"seq\": 16", "\"seq\": 2147483647"));
  check_refused(tlbench("plan --mem-gib 80 --config cases.json", s), {"cases.json: $.cases[0]: shape too large"});
}

TEST_CASE("report --out in a missing folder or empty: exit 2, nothing created", "[bad-input][writers][cli]") {
  Scratch s("report-out");
  check_refused(tlbench("report " + shell_quote(kFixture) + " --out ''", s), {"--out", "empty"});
  s.write("file", "x\n");
  check_refused(tlbench("report " + shell_quote(kFixture) + " --out file/analysis", s), {"file/analysis"});
  CHECK(s.listing() == std::vector<std::string>{"file"});
}


TEST_CASE("an unknown subcommand is named as such", "[bad-input][messages][cli]") {
  Scratch s("unknown-sub");
  check_refused(tlbench("frobnicate --x", s), {"unknown subcommand 'frobnicate'", "plan", "report"});
  check_refused(tlbench("", s), {"A subcommand is required"});
}

namespace {

// A run folder as `tlbench run` leaves it when interrupted before its first point, its cases
// file recorded as given (relative to the scratch folder).
void interrupted_run(const Scratch& s) {
  fs::create_directories(s.path("run"));
  fs::copy_file(kCases, s.path("cases.json"));
  tlb::RunOptions o;
  o.cases_path = "cases.json";
  o.cases_sel = "1";
  o.dtypes_sel = "fp16";
  o.out_dir = "run";
  tlb::resolve_defaults(o);
  const nlohmann::json doc = {{"options", tlb::options_to_json(o)},
                              {"state", "interrupted"},
                              {"cases_file", {{"path", "cases.json"}, {"fingerprint", tlb::file_fingerprint(kCases)}}}};
  std::ofstream(s.path("run/run.json")) << doc.dump(2);
}

}  // namespace

TEST_CASE("run --resume with a broken points.jsonl is exit 2 before the device check", "[bad-input][resume][cli]") {
  Scratch s("resume-points");
  interrupted_run(s);
  std::ofstream(s.path("run/points.jsonl")) << "{\"case_id\": 1, \"case_id\": 2}\n";
  check_refused(tlbench("run --resume run", s), {"run/points.jsonl:1: $.case_id: duplicate key"});
  fs::remove(s.path("run/points.jsonl"));
  fs::create_directories(s.path("run/points.jsonl"));
  check_refused(tlbench("run --resume run", s), {"run/points.jsonl: cannot read: is a directory"});
}

TEST_CASE("run --resume refuses recorded options out of range, naming their JSON path", "[bad-input][resume][cli]") {
  Scratch s("resume-options");
  interrupted_run(s);
  const std::string run_json = s.path("run/run.json");
  const std::string text = slurp(run_json);
  for (const auto& [from, to, path] : {std::tuple{"\"min_reps\": 10", "\"min_reps\": -5", "$.options.min_reps"},
                                       std::tuple{"\"max_reps\": 2000", "\"max_reps\": 0", "$.options.max_reps"},
                                       std::tuple{"\"seed\": ", "\"seed\": -1, \"x\": ", "$.options.seed"}}) {
    INFO(path);
    std::ofstream(run_json) << replaced(text, from, to);
    check_refused(tlbench("run --resume run", s), {run_json.substr(s.dir.string().size() + 1) + ": " + path});
  }
}

TEST_CASE("run --resume of a copied folder names the missing file and the way out", "[bad-input][resume][cli]") {
  Scratch s("resume-copied");
  interrupted_run(s);
  fs::create_directories(s.path("elsewhere"));
  fs::rename(s.path("run"), s.path("elsewhere/run"));
  fs::rename(s.path("cases.json"), s.path("elsewhere/cases.json"));
  check_refused(tlbench("run --resume elsewhere/run", s), {"cases.json (as the run was given it) cannot be read", "--config PATH"});
  check_refused(tlbench("run --resume elsewhere/run --config nowhere.json", s), {"nowhere.json: cannot read: No such file"});
  // Pointed at the cases file, the folder is complete: on to the device check.
  const Result r = tlbench("run --resume elsewhere/run --config elsewhere/cases.json", s);
  CHECK(r.rc != 2);
  CHECK(r.err.find("changed") == std::string::npos);
}

TEST_CASE("run --json on a machine without a device still prints its JSON document", "[bad-input][messages][cli]") {
  Scratch s("json-exit3");
  const Result r = tlbench("run --json --config " + shell_quote(kCases) + " --cases 1 --dtypes fp16 --out r", s);
  if (r.rc == 0) return;  // a device was present; covered by the GPU tests
  CHECK(r.rc == 3);
  CHECK(r.out.rfind("{", 0) == 0);
  CHECK(r.out.find("\"state\": \"no-device\"") != std::string::npos);
  CHECK(r.out.find("\"exit_code\": 3") != std::string::npos);
  CHECK(r.out.find("\"resume_command\"") == std::string::npos);
  CHECK(s.listing().empty());
}

