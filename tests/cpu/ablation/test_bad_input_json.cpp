// Every JSON file the tool reads, broken: nested a megabyte deep, over the size limit, a FIFO
// or a folder, with 1e999, with a duplicate key, empty or cut short. Each is exit 2 with one
// line naming the file and the line and column or JSON path, refused in milliseconds.
#include "bad_input_util.hpp"

using namespace tlb::test::bad_input;
using tlb::test::shell_quote;
using tlb::test::slurp;

TEST_CASE("a 1 MB nested cases.json is refused in under 0.5 s and 100 MB", "[bad-input][json][cli]") {
  Scratch s("deep-cases");
  const std::string file = s.write("cases.json", nested(1 << 20));
  check_deep_refused({"plan", "--mem-gib", "80", "--config", file}, file + ": line 1, column 33", s);
}

TEST_CASE("a 1 MB nested techniques.json is refused in under 0.5 s and 100 MB", "[bad-input][json][cli]") {
  Scratch s("deep-tech");
  const std::string cases = s.write("cases.json", kOneCase);
  const std::string file = s.write("t.json", "{\"techniques\": " + nested(1 << 20) + "}");
  check_deep_refused({"plan", "--mem-gib", "80", "--config", cases, "--techniques", file}, file, s);
}

TEST_CASE("a 1 MB nested gates.json is refused in under 0.5 s and 100 MB", "[bad-input][json][cli]") {
  Scratch s("deep-gates");
  const std::string file = s.write("gates.json", "{\"defaults\": " + nested(1 << 20) + "}");
  check_deep_refused({"gate", "--results", kFixture, "--thresholds", file}, file, s);
}

TEST_CASE("a 1 MB nested dispatch table is refused in under 0.5 s and 100 MB", "[bad-input][json][cli]") {
  Scratch s("deep-table");
  const std::string cases = s.write("cases.json", kOneCase);
  const std::string file = s.write("table.json", nested(1 << 20));
  check_deep_refused({"plan", "--mem-gib", "80", "--config", cases, "--dispatch-table", file}, file, s);
}

TEST_CASE("a 1 MB nested run.json is refused in under 0.5 s and 100 MB", "[bad-input][json][cli]") {
  Scratch s("deep-run");
  const std::string dir = copy_fixture(s);
  std::ofstream(dir + "/run.json") << nested(1 << 20);
  check_deep_refused({"report", dir, "--out", s.path("a")}, dir + "/run.json", s);
  CHECK(!fs::exists(s.path("a")));
}

TEST_CASE("a 1 MB nested line of points.jsonl is refused with its line number", "[bad-input][json][cli]") {
  Scratch s("deep-points");
  const std::string dir = copy_fixture(s);
  std::ofstream(dir + "/points.jsonl", std::ios::app) << nested(1 << 20) << "\n";
  check_deep_refused({"gate", "--results", dir, "--thresholds", kGates}, dir + "/points.jsonl:259: column 33", s);
}

TEST_CASE("a cases file over the size limit is refused before it is read", "[bad-input][json][cli]") {
  Scratch s("big-cases");
  const std::string file = s.write("cases.json", kOneCase);
  fs::resize_file(file, (size_t{16} << 20) + 1);  // sparse: the test writes nothing big
  const Measured m = measure({"plan", "--mem-gib", "80", "--config", file}, s);
  CHECK(m.rc == 2);
  CHECK(m.err.find(file + ": cannot read: 16777217 bytes, over the limit of 16 MiB") != std::string::npos);
  CHECK(m.max_rss_kib - startup_rss_kib(s) < 10 * 1024);
}

TEST_CASE("a FIFO or a folder given as a cases file is refused, never read", "[bad-input][json][cli]") {
  Scratch s("special-cases");
  REQUIRE(::mkfifo(s.path("fifo.json").c_str(), 0644) == 0);
  fs::create_directories(s.path("dir.json"));
  check_refused(tlbench("plan --mem-gib 80 --config fifo.json", s), {"fifo.json: cannot read: not a regular file"});
  check_refused(tlbench("plan --mem-gib 80 --config dir.json", s), {"dir.json: cannot read: is a directory"});
}

// Strict JSON: non-finite numbers and duplicate keys, with file and place ----

TEST_CASE("1e999 in points.jsonl: exit 2 naming the file, line and column", "[bad-input][json][cli]") {
  Scratch s("inf-points");
  const std::string dir = copy_fixture(s);
  const std::string points = dir + "/points.jsonl";
  const std::string text = slurp(points);
  std::ofstream(points) << replaced(text, "\"speedup\": 1.57295", "\"speedup\": 1e999");
  for (const std::string& cmd : {"gate --results " + dir + " --thresholds " + kGates, "report " + dir + " --out " + s.path("a")})
    check_refused(tlbench(cmd, s), {points + ":1: column ", "number 1e999 is out of range"});
  CHECK(!fs::exists(s.path("a")));
}

TEST_CASE("1e999 in gates.json: exit 2 naming the file, line and column", "[bad-input][json][cli]") {
  Scratch s("inf-gates");
  const std::string file = s.write("gates.json", "{\n  \"defaults\": {\"min_speedup\": 1e999}\n}\n");
  check_refused(tlbench("gate --results " + shell_quote(kFixture) + " --thresholds gates.json", s),
                {"gates.json: line 2, column ", "number 1e999 is out of range"});
}

TEST_CASE("a cases file with -1e999: exit 2 naming the place", "[bad-input][json][cli]") {
  Scratch s("inf-cases");
  s.write("cases.json", replaced(kOneCase, "\"layers\": 2", "\"layers\": 2, \"eps\": -1e999"));
  check_refused(tlbench("plan --mem-gib 80 --config cases.json", s),
                {"cases.json: line 1, column ", "number -1e999 is out of range"});
}

TEST_CASE("duplicate keys in gates.json are refused with their JSON path", "[bad-input][json][cli]") {
  Scratch s("dup-gates");
  s.write("gates.json", R"({"defaults": {"min_speedup": 0.5, "min_speedup": 0.9}})");
  check_refused(tlbench("gate --results " + shell_quote(kFixture) + " --thresholds gates.json", s),
                {"gates.json: $.defaults.min_speedup: duplicate key"});
}

TEST_CASE("duplicate keys in a dispatch table are refused with their JSON path", "[bad-input][json][cli]") {
  Scratch s("dup-table");
  REQUIRE(tlbench("dispatch --quiet --results " + shell_quote(kFixture) + " -o t.json", s).rc == 0);
  const std::string text = slurp(s.path("t.json"));
  std::ofstream(s.path("t.json")) << replaced(text, "\"format_version\": 1", "\"format_version\": 1, \"format_version\": 1");
  s.write("cases.json", kOneCase);
  check_refused(tlbench("plan --mem-gib 80 --config cases.json --dispatch-table t.json", s),
                {"t.json: $.format_version: duplicate key"});
}

TEST_CASE("duplicate keys in a line of points.jsonl are refused with file, line and path", "[bad-input][json][cli]") {
  Scratch s("dup-points");
  const std::string dir = copy_fixture(s);
  const std::string points = dir + "/points.jsonl";
  const std::string text = slurp(points);
  std::ofstream(points) << replaced(text, "\"speedup\": 1.57295", "\"speedup\": 1.57295, \"speedup\": 9");
  check_refused(tlbench("dispatch --results " + dir + " -o -", s), {points + ":1: $.speedup: duplicate key"});
}

TEST_CASE("duplicate keys in run.json are refused with their JSON path", "[bad-input][json][cli]") {
  Scratch s("dup-run");
  const std::string dir = copy_fixture(s);
  std::ofstream(dir + "/run.json") << R"({"seed": 1, "gpu": {"name": "a", "name": "b"}})";
  check_refused(tlbench("report " + dir + " --out a", s), {dir + "/run.json: $.gpu.name: duplicate key"});
  CHECK(!fs::exists(s.path("a")));
}

TEST_CASE("an empty run.json is an error like a truncated one, not a missing file", "[bad-input][json][cli]") {
  Scratch s("empty-run");
  const std::string dir = copy_fixture(s);
  std::ofstream(dir + "/run.json", std::ios::trunc).flush();
  check_refused(tlbench("report " + dir + " --out a", s), {dir + "/run.json: line 1, column 1", "the file is empty"});
  std::ofstream(dir + "/run.json") << "{\"seed\": 1,\n";
  check_refused(tlbench("report " + dir + " --out a", s), {dir + "/run.json: line 2, column 1: malformed JSON"});
  CHECK(s.listing() == std::vector<std::string>{"res", "res/points.jsonl", "res/run.json"});
}

TEST_CASE("points.jsonl that is a folder is exit 2 from gate, report and dispatch alike", "[bad-input][json][cli]") {
  Scratch s("points-dir");
  fs::create_directories(s.path("res/points.jsonl"));
  for (const std::string& cmd : {"gate --results res --thresholds " + kGates, std::string("report res --out a"),
                                 std::string("dispatch --results res -o t.json")})
    check_refused(tlbench(cmd, s), {"res/points.jsonl: cannot read: is a directory"});
  CHECK(s.listing() == std::vector<std::string>{"res", "res/points.jsonl"});
}


TEST_CASE("malformed gates.json and run.json name their line and column", "[bad-input][messages][cli]") {
  Scratch s("malformed");
  s.write("gates.json", "{\"defaults\": {\n  \"min_speedup\" 0.9}}\n");
  check_refused(tlbench("gate --results " + shell_quote(kFixture) + " --thresholds gates.json", s),
                {"gates.json: line 2, column 19: malformed JSON"});
  const std::string dir = copy_fixture(s);
  std::ofstream(dir + "/run.json") << "{\"seed\": 1,\n \"gpu\": tru}";
  check_refused(tlbench("gate --results " + dir + " --thresholds " + kGates, s),
                {dir + "/run.json: line 2, column ", "malformed JSON"});
}

