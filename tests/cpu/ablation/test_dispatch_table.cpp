// The dispatch table of --policy auto: built from results (fastest golden-passing row, ties
// within noise to strict then speed, by forward time where rows have one, failures and auto rows left out), chosen from
// (exact shape, nearest shape with the mask penalty, every technique where the dtype has no
// entry), read and written as JSON with one-line errors, compiled in from configs/dispatch.json,
// and driven through `tlbench dispatch`, `tlbench report` and `tlbench plan --policy auto`.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "ablation_test_util.hpp"
#include "analysis.hpp"
#include "config.hpp"
#include "dispatch_table.hpp"
#include "grid.hpp"
#include "matrices.hpp"
#include "plan_report.hpp"
#include "results_reader.hpp"
#include "resume.hpp"
#include "text.hpp"
#include "writers.hpp"

using namespace tlb;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const std::string kFixture = std::string(TLBENCH_SOURCE_DIR) + "/tests/fixtures/results-small";
const std::string kCases = std::string(TLBENCH_SOURCE_DIR) + "/configs/cases.json";

struct Scratch : test::Scratch {
  explicit Scratch(const std::string& name) : test::Scratch("tlbench-dispatch", name) {}
};

test::CommandResult tlbench(const std::string& args, const Scratch& s) {
  return test::run_command("cd " + s.dir.string() + " && " + TLBENCH_BINARY + " " + args, s.dir);
}

int lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

// One points.jsonl row. Shape fields only for case 1: case 2's shape comes from run.json.
json row(int case_id, const std::string& dtype, const std::string& config, double speedup,
         double lo, double hi, bool golden, bool strict, const std::string& status = "ok") {
  json r = {{"case_id", case_id},
            {"case_name", case_id == 1 ? "small" : "padded"},
            {"dtype", dtype},
            {"math", dtype == "fp32" ? "tf32" : "fp32-acc"},
            {"config", config},
            {"policy", "FF"},
            {"status", status},
            {"baseline", "00000"},
            {"speedup", speedup},
            {"speedup_ci_low", lo},
            {"speedup_ci_high", hi},
            {"cand_ms", 1.0 / speedup},
            // The time's spread matching the speedup's interval, so ties read the same both ways.
            {"cand_spread_ms", (1.0 / speedup) * (hi - lo) / (2.0 * speedup)},
            {"golden_pass", golden},
            {"strict_pass", strict},
            {"golden_rel_l2", 1e-3},
            {"dispatch", "qkv=k;attn=a"}};
  if (case_id == 1) {
    r["batch"] = 2, r["seq"] = 64, r["d_model"] = 128, r["heads"] = 2, r["d_ff"] = 256;
    r["layers"] = 2, r["mask"] = "causal";
  }
  return r;
}

const char* kRunJson = R"({
  "techniques": [{"name": "qkv"}, {"name": "attn"}, {"name": "ffn"}, {"name": "norm"}, {"name": "graph"}],
  "device": {"name": "Test GPU"}, "tool": {"git_commit": "abc123"}, "end_time": "2026-01-02T03:04:05Z",
  "options": {"quick": false},
  "cases": [{"id": 2, "name": "padded", "batch": 4, "seq": 96, "d_model": 192, "heads": 3,
             "d_ff": 384, "layers": 1, "mask": "padding"}]})";

std::string fixture_points() {
  std::vector<json> rows = {
      // case 1 fp16: 11000 is fastest but fails strict; 11100 ties with it and passes strict;
      // 01000 ties too, but fails strict; 11111 is faster still and
      // fails golden; the auto row is faster than everything and never counts.
      row(1, "fp16", "11000", 2.01, 1.99, 2.03, true, false),
      row(1, "fp16", "11100", 2.00, 1.99, 2.02, true, true),
      row(1, "fp16", "01000", 1.995, 1.97, 2.02, true, false),
      row(1, "fp16", "00100", 1.50, 1.49, 1.51, true, true),
      row(1, "fp16", "11111", 3.00, 2.90, 3.10, false, true),
      row(1, "fp16", "auto", 5.00, 4.90, 5.10, true, true),
      // case 1 bf16: nothing passes strict; 01000 ties with the fastest, 11000, which stays;
      // 00001 passes strict but is clearly slower.
      row(1, "bf16", "11000", 1.80, 1.79, 1.81, true, false),
      row(1, "bf16", "01000", 1.795, 1.78, 1.81, true, false),
      row(1, "bf16", "00001", 1.50, 1.49, 1.51, true, true),
      // case 2 fp16: every measured row fails golden.
      row(2, "fp16", "11000", 2.0, 1.9, 2.1, false, false),
      row(2, "fp16", "01000", 1.9, 1.8, 2.0, false, false),
      // case 2 fp32: a fallback that ran counts; an error row does not.
      row(2, "fp32", "11111", 3.0, 2.9, 3.1, true, false, "fallback:attn"),
      row(2, "fp32", "01000", 9.0, 8.9, 9.1, true, true, "error"),
      row(2, "fp32", "00001", 1.1, 1.0, 1.2, true, true),
  };
  json nonviable = row(2, "fp32", "00010", 1.0, 1.0, 1.0, true, true, "nonviable");
  nonviable.erase("speedup");
  rows.push_back(nonviable);
  std::string text;
  for (const json& r : rows) text += r.dump() + "\n";
  return text;
}

const DispatchEntry* entry_for(const DispatchTable& t, int case_id, const std::string& dtype) {
  for (const DispatchEntry& e : t.entries)
    if (e.case_id == case_id && e.dtype == dtype) return &e;
  return nullptr;
}

LayerShape shape(int64_t batch, int64_t seq, int64_t d_model, int64_t heads, int64_t d_ff,
                 int64_t layers, MaskKind mask) {
  LayerShape s;
  s.batch = batch, s.seq = seq, s.d_model = d_model, s.heads = heads, s.d_ff = d_ff;
  s.layers = layers, s.mask = mask;
  if (mask == MaskKind::padding) s.valid_lens.assign(static_cast<size_t>(batch), static_cast<int>(seq));
  return s;
}

DispatchEntry entry(const std::string& dtype, const std::string& math, const LayerShape& s,
                    const std::string& config, int case_id) {
  DispatchEntry e;
  e.dtype = dtype;
  e.math = math;
  e.shape = dispatch_shape(s);
  e.config = config;
  e.speedup = 2;
  e.case_id = case_id;
  e.case_name = "case" + std::to_string(case_id);
  return e;
}

// Two fp16 shapes (short encoder, long causal decoder) and one fp32 tf32 entry.
DispatchTable small_table() {
  DispatchTable t;
  t.origin = "t.json";
  t.sources = {DispatchSource{"", "Test GPU", "", "", false}};
  t.techniques = {"qkv", "attn", "ffn", "norm", "graph"};
  t.entries = {entry("fp16", "fp32-acc", shape(8, 128, 768, 12, 3072, 4, MaskKind::none), "11001", 2),
               entry("fp16", "fp32-acc", shape(4, 2048, 2048, 16, 8192, 2, MaskKind::causal), "01011", 8),
               entry("fp32", "tf32", shape(8, 128, 768, 12, 3072, 4, MaskKind::none), "11111", 2)};
  return t;
}

std::string parse_error(const std::string& text) {
  try {
    parse_dispatch_table(text, "d.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "<accepted>";
}

}  // namespace

TEST_CASE("dispatch table: rows with forward times are ranked by time, not by speedup",
          "[dispatch]") {
  // Each speedup carries its own measurement of the baseline: 11000's 2.2x came with a slow
  // baseline run, but 01011 runs the forward faster.
  auto timed = [](const char* config, double speedup, double ms, double spread, bool strict) {
    json r = row(3, "fp16", config, speedup, speedup - 0.1, speedup + 0.1, true, strict);
    r["cand_ms"] = ms;
    r["cand_spread_ms"] = spread;
    r["batch"] = 1, r["seq"] = 16, r["d_model"] = 64, r["heads"] = 1, r["d_ff"] = 128;
    r["layers"] = 1, r["mask"] = "none";
    return r;
  };
  std::string text;
  for (const json& r : {timed("11000", 2.2, 1.00, 0.01, true), timed("01011", 2.1, 0.95, 0.01, false),
                        timed("01111", 2.0, 0.955, 0.01, true), timed("00001", 1.5, 1.30, 0.01, true)})
    text += r.dump() + "\n";
  const DispatchTable t = build_dispatch_table(results::parse_results(text, kRunJson, "res"));
  const DispatchEntry* e = entry_for(t, 3, "fp16");
  REQUIRE(e);
  // 01011 is fastest; 01111 ties with it (0.005 ms apart, spreads 0.01 each) and passes strict.
  CHECK(e->config == "01111");
}

TEST_CASE("dispatch table: per case and dtype the fastest golden-passing row, ties to strict, "
          "then speed", "[dispatch]") {
  const results::Results r = results::parse_results(fixture_points(), kRunJson, "res");
  const DispatchTable t = build_dispatch_table(r);
  CHECK(t.techniques == std::vector<std::string>{"qkv", "attn", "ffn", "norm", "graph"});
  REQUIRE(t.sources.size() == 1);
  CHECK(t.sources[0].results == "res");
  CHECK(t.sources[0].gpu == "Test GPU");
  CHECK(t.sources[0].git_commit == "abc123");
  CHECK(t.sources[0].time == "2026-01-02T03:04:05Z");
  CHECK_FALSE(t.sources[0].quick);
  REQUIRE(t.entries.size() == 3);

  const DispatchEntry* a = entry_for(t, 1, "fp16");
  REQUIRE(a);
  CHECK(a->config == "11100");  // strict wins the tie over the faster 11000 and 01000
  CHECK(a->config_names == "qkv+attn+ffn");
  CHECK(a->speedup == 2.00);
  CHECK(a->math == "fp32-acc");
  CHECK(a->strict_pass == true);
  CHECK(a->dispatch == "qkv=k;attn=a");
  CHECK(a->shape == dispatch_shape(shape(2, 64, 128, 2, 256, 2, MaskKind::causal)));

  const DispatchEntry* b = entry_for(t, 1, "bf16");
  REQUIRE(b);
  CHECK(b->config == "11000");  // no strict pass within noise: the faster

  CHECK(entry_for(t, 2, "fp16") == nullptr);  // every row failed golden
  REQUIRE(t.notes.size() == 1);
  CHECK_THAT(t.notes[0], Catch::Contains("case 2 padded fp16") &&
                             Catch::Contains("no measured configuration passed the golden check"));

  const DispatchEntry* c = entry_for(t, 2, "fp32");
  REQUIRE(c);
  CHECK(c->config == "11111");  // the fallback ran; the error row's 9x never counts
  CHECK(c->math == "tf32");
  // Case 2's rows carry no shape: it comes from run.json.
  CHECK(c->shape.batch == 4);
  CHECK(c->shape.seq == 96);
  CHECK(c->shape.heads == 3);
  CHECK(c->shape.mask == MaskKind::padding);

  // Entries come in dtype order, then case id.
  CHECK(t.entries[0].dtype == "fp16");
  CHECK(t.entries[1].dtype == "bf16");
  CHECK(t.entries[2].dtype == "fp32");
}

TEST_CASE("dispatch table: a chosen row without a shape anywhere is a one-line error", "[dispatch]") {
  const results::Results r =
      results::parse_results(fixture_points(), R"({"techniques": ["qkv", "attn", "ffn", "norm", "graph"]})",
                             "res");
  try {
    build_dispatch_table(r);
    FAIL("accepted");
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    CHECK_THAT(m, Catch::StartsWith("res/points.jsonl:") && Catch::Contains("case 2") &&
                      Catch::Contains("no shape"));
    CHECK(m.find('\n') == std::string::npos);
  }
  // Technique names that are not stages cannot drive the runner.
  const results::Results unnamed = results::parse_results(fixture_points(), "", "res");
  CHECK_THROWS_WITH(build_dispatch_table(unnamed), Catch::Contains("not one of qkv, attn"));
}

TEST_CASE("choose: an exact shape wins, else the nearest of the same dtype and math", "[dispatch]") {
  const DispatchTable t = small_table();
  const LayerShape bert = shape(8, 128, 768, 12, 3072, 4, MaskKind::none);
  DispatchChoice c = choose(t, bert, DType::fp16, Fp32Math::tf32);
  REQUIRE(c.entry == &t.entries[0]);
  CHECK(c.exact);
  CHECK(c.distance == 0);
  CHECK(c.config == "11001");
  CHECK(c.stages[Stage::qkv]);
  CHECK(c.stages[Stage::attn]);
  CHECK_FALSE(c.stages[Stage::ffn]);
  CHECK(c.stages[Stage::graph]);
  CHECK(c.reason == "exact shape: case 2 case2 fp16");

  // Same sizes but a different head count: not exact, still nearest (distance 0 in sizes).
  c = choose(t, shape(8, 128, 768, 6, 3072, 4, MaskKind::none), DType::fp16, Fp32Math::tf32);
  CHECK(c.entry == &t.entries[0]);
  CHECK_FALSE(c.exact);
  CHECK_THAT(c.reason, Catch::StartsWith("nearest shape: case 2 case2 fp16 at distance 0.00"));

  // A long causal shape is nearer the long entry.
  c = choose(t, shape(2, 4096, 2048, 16, 8192, 1, MaskKind::causal), DType::fp16, Fp32Math::tf32);
  CHECK(c.entry == &t.entries[1]);
  CHECK(c.config == "01011");
  CHECK(c.distance == Approx(std::log(2.0)));  // same tokens, twice the sequence

  // fp32 looks at its own math mode only.
  c = choose(t, bert, DType::fp32, Fp32Math::tf32);
  CHECK(c.entry == &t.entries[2]);
  CHECK(c.exact);
  CHECK(c.reason == "exact shape: case 2 case2 fp32 (tf32)");
}

TEST_CASE("choose: a different mask kind costs kMaskPenalty", "[dispatch]") {
  const LayerShape none = shape(8, 1024, 1024, 16, 4096, 2, MaskKind::none);
  LayerShape causal = none;
  causal.mask = MaskKind::causal;
  CHECK(shape_distance(dispatch_shape(none), dispatch_shape(causal)) == kMaskPenalty);
  CHECK(shape_distance(dispatch_shape(none), dispatch_shape(none)) == 0);

  // Query: causal at seq 1024. Entry A has its sizes but no mask; entry B is causal at half the
  // sequence (tokens and seq off by ln 2 each: 0.98 < 1.0). The mask decides for B.
  DispatchTable t;
  t.origin = "t.json";
  t.techniques = {"qkv", "attn", "ffn", "norm", "graph"};
  t.entries = {entry("bf16", "fp32-acc", none, "00011", 1),
               entry("bf16", "fp32-acc", shape(8, 512, 1024, 16, 4096, 2, MaskKind::causal), "01000", 2)};
  DispatchChoice c = choose(t, causal, DType::bf16, Fp32Math::tf32);
  CHECK(c.entry == &t.entries[1]);
  CHECK(c.config == "01000");
  CHECK(c.distance == Approx(std::sqrt(2.0) * std::log(2.0)));
  // Without the mask difference the same query is A's exact shape.
  c = choose(t, none, DType::bf16, Fp32Math::tf32);
  CHECK(c.entry == &t.entries[0]);
  CHECK(c.exact);
}

TEST_CASE("choose: no entry of the dtype (or fp32 math) switches every technique on", "[dispatch]") {
  const DispatchTable t = small_table();
  const LayerShape s = shape(8, 128, 768, 12, 3072, 4, MaskKind::none);
  DispatchChoice c = choose(t, s, DType::bf16, Fp32Math::tf32);
  CHECK(c.entry == nullptr);
  CHECK_FALSE(c.exact);
  CHECK(c.config == "11111");
  for (int i = 0; i < kNumStages; ++i) CHECK(c.stages.on[i]);
  CHECK(c.reason == "no bf16 entry; every technique on");
  c = choose(t, s, DType::fp32, Fp32Math::ieee);
  CHECK(c.entry == nullptr);
  CHECK(c.reason == "no fp32 (ieee) entry; every technique on");

  // As a run's configuration: every technique of the run, and the note names the table.
  CaseSpec cs;
  cs.id = 3;
  cs.shape = s;
  const AutoConfig a = auto_config(t, cs, DType::bf16, Fp32Math::tf32, default_techniques());
  CHECK(a.config == 31u);
  CHECK(a.note == "auto chose 11111 (qkv+attn+ffn+norm+graph) from t.json (Test GPU): no bf16 "
                  "entry; every technique on");
}

TEST_CASE("auto_config maps the table's choice onto the run's technique set", "[dispatch]") {
  const DispatchTable t = small_table();
  CaseSpec cs;
  cs.id = 9;
  cs.shape = shape(4, 2048, 2048, 16, 8192, 2, MaskKind::causal);
  // The run knows attn, ffn and norm only (in its own order): the table's 01011
  // (attn+norm+graph) becomes attn+norm there, and the note says graph was left off.
  const TechniqueSet three = parse_techniques(
      R"({"techniques": [{"name": "norm", "description": "n"}, {"name": "attn", "description": "a"},
                         {"name": "ffn", "description": "f"}]})",
      "t3.json");
  const AutoConfig a = auto_config(t, cs, DType::fp16, Fp32Math::tf32, three);
  CHECK(three.bits(a.config) == "110");
  CHECK(three.names(a.config) == "norm+attn");
  CHECK_THAT(a.note, Catch::StartsWith("auto chose 110 (norm+attn) from t.json (Test GPU): exact shape: case 8"));
  CHECK_THAT(a.note, Catch::EndsWith("; graph not among this run's techniques, left off"));
  // With the five techniques it is the table's bit string itself.
  const AutoConfig five = auto_config(t, cs, DType::fp16, Fp32Math::tf32, default_techniques());
  CHECK(default_techniques().bits(five.config) == "01011");
  CHECK(five.note.find("left off") == std::string::npos);
}

TEST_CASE("dispatch table JSON round-trips, one entry per line", "[dispatch]") {
  const results::Results r = results::parse_results(fixture_points(), kRunJson, "res");
  const DispatchTable t = build_dispatch_table(r);
  const std::string text = dispatch_table_json(t);
  CHECK(json::parse(text).is_object());
  CHECK(lines(text) == 9 + static_cast<int>(t.entries.size()));
  const DispatchTable back = parse_dispatch_table(text, "again.json");
  CHECK(back.origin == "again.json");
  CHECK(back.techniques == t.techniques);
  CHECK(back.notes == t.notes);
  REQUIRE(back.sources.size() == 1);
  CHECK(back.sources[0].results == t.sources[0].results);
  CHECK(back.sources[0].gpu == t.sources[0].gpu);
  CHECK(back.sources[0].git_commit == t.sources[0].git_commit);
  CHECK(back.sources[0].time == t.sources[0].time);
  REQUIRE(back.entries.size() == t.entries.size());
  for (size_t i = 0; i < t.entries.size(); ++i) {
    const DispatchEntry &x = t.entries[i], &y = back.entries[i];
    CHECK(x.dtype == y.dtype);
    CHECK(x.math == y.math);
    CHECK(x.shape == y.shape);
    CHECK(x.config == y.config);
    CHECK(x.config_names == y.config_names);
    CHECK(x.speedup == y.speedup);
    CHECK(x.cand_ms == y.cand_ms);
    CHECK(x.golden_rel_l2 == y.golden_rel_l2);
    CHECK(x.strict_pass == y.strict_pass);
    CHECK(x.dispatch == y.dispatch);
    CHECK(x.case_id == y.case_id);
    CHECK(x.case_name == y.case_name);
  }
  CHECK(dispatch_table_json(back) == text);

  Scratch s("roundtrip");
  write_dispatch_table(t, s.path("t.json"));
  CHECK(test::slurp(s.path("t.json")) == text);
  CHECK(load_dispatch_table(s.path("t.json")).entries.size() == t.entries.size());
  CHECK_THROWS_WITH(load_dispatch_table(s.path("missing.json")),
                    Catch::EndsWith("missing.json: cannot read: No such file or directory"));
}

TEST_CASE("dispatch table: several folders make one table whose entries name their folder", "[dispatch]") {
  // The official sweep (fp16 and fp32 tf32 rows) and a run of the fp32 IEEE math beside it.
  const results::Results official = results::parse_results(fixture_points(), kRunJson, "official");
  auto ieee_row = [](int case_id, const char* config, double speedup) {
    json r = row(case_id, "fp32", config, speedup, speedup - 0.01, speedup + 0.01, true, true);
    r["math"] = "ieee";
    return r;
  };
  std::string ieee_rows;
  for (const json& r : {ieee_row(1, "01011", 1.5), ieee_row(1, "11111", 1.2), ieee_row(2, "01011", 1.1)})
    ieee_rows += r.dump() + "\n";
  json ieee_run = json::parse(kRunJson);
  ieee_run["tool"]["git_commit"] = "def456";
  const results::Results ieee = results::parse_results(ieee_rows, ieee_run.dump(), "ieee");

  const DispatchTable t = build_dispatch_table({official, ieee});
  REQUIRE(t.sources.size() == 2);
  CHECK(t.sources[0].results == "official");
  CHECK(t.sources[1].results == "ieee");
  CHECK(t.sources[1].git_commit == "def456");
  CHECK(t.origin == "official, ieee");
  const std::string provenance = dispatch_provenance(t);
  CHECK(provenance.find("abc123") != std::string::npos);
  CHECK(provenance.find("; Test GPU, def456") != std::string::npos);
  size_t from_ieee = 0;
  for (const DispatchEntry& e : t.entries) {
    CHECK(e.source == (e.math == "ieee" ? 1u : 0u));
    from_ieee += e.math == "ieee";
  }
  CHECK(from_ieee == 2);
  // fp32 tf32 entries before ieee ones, each by case id.
  for (size_t i = 1; i < t.entries.size(); ++i)
    CHECK_FALSE((t.entries[i - 1].math == "ieee" && t.entries[i].math == "tf32"));
  const DispatchChoice c = choose(t, shape(2, 64, 128, 2, 256, 2, MaskKind::causal), DType::fp32, Fp32Math::ieee);
  REQUIRE(c.entry);
  CHECK(c.exact);
  CHECK(c.config == "01011");  // measured in IEEE, not the tf32 folder's pick

  // The table reads back as written: its sources and every entry's folder.
  const std::string text = dispatch_table_json(t);
  CHECK(json::parse(text).contains("sources"));
  CHECK_FALSE(json::parse(text).contains("source"));
  const DispatchTable back = parse_dispatch_table(text, "two.json");
  REQUIRE(back.sources.size() == 2);
  CHECK(back.sources[1].git_commit == "def456");
  REQUIRE(back.entries.size() == t.entries.size());
  for (size_t i = 0; i < t.entries.size(); ++i) CHECK(back.entries[i].source == t.entries[i].source);
  CHECK(dispatch_table_json(back) == text);
  // One folder still writes "source", as before.
  CHECK(json::parse(dispatch_table_json(build_dispatch_table(official))).contains("source"));

  // Two cases of one folder with the same shape: both keep their entry, as before.
  {
    auto same = [](int case_id, const char* config) {
      json r = row(case_id, "fp16", config, 2.0, 1.9, 2.1, true, true);
      r["batch"] = 1, r["seq"] = 16, r["d_model"] = 64, r["heads"] = 1, r["d_ff"] = 128;
      r["layers"] = 1, r["mask"] = "none";
      return r;
    };
    const std::string twins = same(1, "01011").dump() + "\n" + same(3, "11111").dump() + "\n";
    const DispatchTable one = build_dispatch_table(results::parse_results(twins, kRunJson, "twins"));
    CHECK(one.entries.size() == 2);
  }
  // A shape measured in two folders in one dtype and math: refused, naming both.
  try {
    build_dispatch_table({official, official});
    FAIL("a shape from two folders was accepted");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()).find("official and official both measured the shape of case") != std::string::npos);
  }
  // Another technique order cannot share the table's bit strings.
  json other_run = json::parse(kRunJson);
  other_run["techniques"] = json::array({{{"name", "attn"}}, {{"name", "qkv"}}, {{"name", "ffn"}},
                                         {{"name", "norm"}}, {{"name", "graph"}}});
  const results::Results other = results::parse_results(ieee_rows, other_run.dump(), "other");
  try {
    build_dispatch_table({official, other});
    FAIL("folders with different technique orders were accepted");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()).find("other: techniques attn,qkv,ffn,norm,graph differ from official's") !=
          std::string::npos);
  }
}

TEST_CASE("bad dispatch tables are one-line errors naming the file and the JSON path", "[dispatch]") {
  json good = json::parse(dispatch_table_json(small_table()));
  REQUIRE(parse_error(good.dump()) == "<accepted>");
  auto with = [&](const std::function<void(json&)>& edit) {
    json d = good;
    edit(d);
    return parse_error(d.dump());
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {parse_error("{\"entries\": [}"), "d.json: line 1, column 14: malformed JSON: "},
      {parse_error("[]"), "d.json: $: expected an object"},
      {with([](json& d) { d["format_version"] = 2; }), "d.json: $.format_version: expected 1, got 2"},
      {with([](json& d) { d.erase("techniques"); }), "d.json: $: missing required field \"techniques\""},
      {with([](json& d) { d["techniques"][4] = "fusion"; }), "d.json: $.techniques[4]: expected one of"},
      {with([](json& d) { d["techniques"][4] = "qkv"; }), "d.json: $.techniques[4]: duplicate technique \"qkv\""},
      {with([](json& d) { d["entries"][1]["sped"] = 1; }), "d.json: $.entries[1].sped: unknown key"},
      {with([](json& d) { d["entries"][0].erase("seq"); }), "d.json: $.entries[0]: missing required field \"seq\""},
      {with([](json& d) { d["entries"][0]["seq"] = "128"; }), "d.json: $.entries[0].seq: expected a positive integer, got \"128\""},
      {with([](json& d) { d["entries"][0]["heads"] = 7; }), "d.json: $.entries[0].heads: 7 does not divide d_model 768"},
      {with([](json& d) { d["entries"][0]["dtype"] = "fp8"; }), "d.json: $.entries[0].dtype: \"fp8\" is not fp16, bf16 or fp32"},
      {with([](json& d) { d["entries"][2]["math"] = "fp32-acc"; }), "d.json: $.entries[2].math: \"fp32-acc\" does not fit fp32"},
      {with([](json& d) { d["entries"][0]["mask"] = "sliding"; }), "d.json: $.entries[0].mask: \"sliding\" is not none"},
      {with([](json& d) { d["entries"][1]["config"] = "0101"; }), "d.json: $.entries[1].config: \"0101\" is not a bit string of 5"},
      {with([](json& d) { d["entries"][1]["config_names"] = "attn"; }), "d.json: $.entries[1].config_names: \"attn\" does not match config 01011"},
      {with([](json& d) { d["entries"][1]["speedup"] = -1; }), "d.json: $.entries[1].speedup: expected a positive number"},
      {with([](json& d) { d["entries"][1]["strict_pass"] = "yes"; }), "d.json: $.entries[1].strict_pass: expected true, false or null"},
      {with([](json& d) { d["source"]["gpu"] = 5; }), "d.json: $.source.gpu: expected a string"},
      {with([](json& d) { d["sources"] = json::array({d["source"]}); }), "d.json: $.sources: a table has \"source\" or \"sources\", not both"},
      {with([](json& d) { d["sources"] = json::array(); d.erase("source"); }), "d.json: $.sources: expected a non-empty array"},
      {with([](json& d) { d["sources"] = json::array({d["source"], 3}); d.erase("source"); }), "d.json: $.sources[1]: expected an object"},
      {with([](json& d) { d["entries"][1]["source"] = 1; }), "d.json: $.entries[1].source: expected the index of one of the 1 entries of $.sources, got 1"},
      {with([](json& d) { d["notes"] = "none"; }), "d.json: $.notes: expected an array"},
  };
  for (const auto& [message, prefix] : cases) {
    INFO(message);
    CHECK_THAT(message, Catch::StartsWith(prefix));
    CHECK(message.find('\n') == std::string::npos);
  }
  // Comments are allowed wherever a key is.
  CHECK(with([](json& d) { d["entries"][0]["$why"] = "measured twice"; }) == "<accepted>");
}

TEST_CASE("the built-in table is configs/dispatch.json and covers every official case, fp32 in both maths",
          "[dispatch]") {
  const DispatchTable& t = builtin_dispatch_table();
  CHECK(t.origin == kBuiltinDispatchOrigin);
  CHECK(std::string(builtin_dispatch_table_text()) ==
        test::slurp(std::string(TLBENCH_SOURCE_DIR) + "/configs/dispatch.json"));
  CHECK(t.techniques == std::vector<std::string>{"qkv", "attn", "ffn", "norm", "graph"});
  REQUIRE_FALSE(t.sources.empty());
  for (const DispatchSource& s : t.sources) {
    CHECK_FALSE(s.gpu.empty());
    CHECK_FALSE(s.git_commit.empty());
    CHECK_FALSE(s.quick);
  }
  const CaseSet cases = load_cases(kCases);
  dispatch_table_for("");  // the default is the built-in table
  struct Mode {
    DType dtype;
    Fp32Math math;
  };
  for (const CaseSpec& c : cases.cases)
    for (const Mode m : {Mode{DType::fp16, Fp32Math::tf32}, Mode{DType::bf16, Fp32Math::tf32},
                         Mode{DType::fp32, Fp32Math::tf32}, Mode{DType::fp32, Fp32Math::ieee}}) {
      INFO("case " << c.id << " " << to_string(m.dtype) << " " << to_string(m.math));
      const DispatchChoice choice = choose(t, c.shape, m.dtype, m.math);
      REQUIRE(choice.entry);
      CHECK(choice.exact);
      CHECK(choice.entry->case_id == c.id);
    }
}

TEST_CASE("an auto row round-trips through the writers, the reader and resume", "[dispatch][writers]") {
  PointRow r;
  r.case_id = 6;
  r.case_name = "gpt2-medium-1k";
  r.batch = 8, r.seq = 1024, r.d_model = 1024, r.heads = 16, r.d_ff = 4096, r.layers = 4;
  r.mask = "causal";
  r.dtype = "fp16";
  r.math = "fp32-acc";
  r.config = "auto";
  r.config_names = "auto=attn+norm+graph";
  r.auto_choice = "01011";
  r.policy = "FFFF";
  r.status = StatusKind::ok;
  r.baseline = "00000";
  r.speedup = 4.5;
  r.speedup_ci_low = 4.4;
  r.speedup_ci_high = 4.6;
  r.golden_pass = true;
  r.note = "auto chose 01011 (attn+norm+graph) from the built-in table: exact shape: case 6";
  CHECK(to_json(point_from_json(to_json(r))).dump() == to_json(r).dump());
  CHECK(to_json(point_from_csv(split_csv_line(to_csv_line(r)))).dump() == to_json(r).dump());
  CHECK(std::find(point_columns().begin(), point_columns().end(), "auto_choice") != point_columns().end());

  Scratch s("auto-row");
  PointRow fixed = r;
  fixed.config = "01011";
  fixed.config_names = "attn+norm+graph";
  fixed.auto_choice.clear();
  fixed.speedup = 4.4;
  {
    PointWriter w(s.dir.string());
    w.append(fixed);
    w.append(r);
  }
  // Reopened (a resume): both rows are there, and the auto point is done under its own key.
  PointWriter again(s.dir.string());
  REQUIRE(again.existing().size() == 2);
  CHECK(again.existing()[1].auto_choice == "01011");
  const DoneSet done(again.existing());
  CHECK(done.contains(point_key(6, "fp16", "auto", "FFFF")));
  CHECK(done.contains(point_key(6, "fp16", "01011", "FFFF")));
  CHECK_FALSE(done.contains(point_key(6, "bf16", "auto", "FFFF")));

  const results::Results back = results::read_results(s.dir.string());
  REQUIRE(back.points.size() == 2);
  CHECK_FALSE(back.points[0].is_auto());
  CHECK(back.points[1].is_auto());
  CHECK(back.points[1].row_label() == "auto");
  CHECK(back.points[1].auto_choice == "01011");
  CHECK(back.points[1].dispatch.empty());
  CHECK(*back.points[1].seq == 1024);
  CHECK(back.points[1].mask == "causal");

  // The run-time matrix: the auto row comes last, named "auto", and sets no column baseline.
  r.baseline = "01000";
  const auto matrices = build_matrices({fixed, r});
  REQUIRE(matrices.size() == 1);
  CHECK(matrices[0].configs == std::vector<std::string>{"01011", "auto"});
  CHECK(matrices[0].config_names == std::vector<std::string>{"attn+norm+graph", "auto"});
  CHECK(matrices[0].cells[1][0] == "4.5000");
  CHECK(matrices[0].cases[0].baseline == "00000");
  CHECK_THAT(matrix_csv(matrices[0]), Catch::EndsWith("auto,auto,4.5000\n"));
}

TEST_CASE("analysis: the auto row is its own matrix row, outside the effects and the best",
          "[dispatch][analysis]") {
  results::Results r = results::read_results(kFixture);
  const analysis::Analysis plain = analysis::analyze(r);
  // An auto row per fp16 case, faster than anything (it must still not be "best").
  const size_t n = r.points.size();
  for (size_t i = 0; i < n; ++i) {
    const results::Point& p = r.points[i];
    if (p.dtype != "fp16" || p.config != "01011") continue;
    results::Point a = p;
    a.config = "auto";
    a.auto_choice = "01011";
    a.speedup = 100.0;
    a.speedup_ci_low = 99.0;
    a.speedup_ci_high = 101.0;
    r.points.push_back(a);
  }
  const analysis::Analysis with = analysis::analyze(r);
  const analysis::DTypeAnalysis& g0 = plain.groups[0];
  const analysis::DTypeAnalysis& g = with.groups[0];
  REQUIRE(g.group == "fp16");
  CHECK(g.rows.size() == g0.rows.size() + 1);
  CHECK(g.rows.back().label == "auto");
  CHECK(g.rows.back().config == -1);
  REQUIRE(g.factorial.effects.size() == g0.factorial.effects.size());
  for (size_t i = 0; i < g.factorial.effects.size(); ++i)
    CHECK(g.factorial.effects[i].effect_log == g0.factorial.effects[i].effect_log);
  CHECK(g.factorial.cases_used == g0.factorial.cases_used);
  REQUIRE(g.best.size() == g0.best.size());
  for (size_t c = 0; c < g.best.size(); ++c) {
    INFO("case " << g.best[c].case_id);
    if (g0.best[c].best) CHECK(g.best[c].best->config == g0.best[c].best->config);
    REQUIRE(g.best[c].auto_point);
    CHECK(*g.best[c].auto_point->speedup == 100.0);
  }
  // fp32 had no auto rows and is unchanged.
  CHECK(with.groups[1].rows.size() == plain.groups[1].rows.size());

  Scratch s("analysis-auto");
  analysis::write_analysis(with, s.dir.string());
  const std::string best = test::slurp(s.dir / "best_fp16.csv");
  CHECK_THAT(best, Catch::Contains(",auto_speedup,auto_choice,note\n"));
  CHECK_THAT(best, Catch::Contains(",100.0000,01011,"));
  const std::string matrix = test::slurp(s.dir / "matrix_fp16.csv");
  CHECK_THAT(matrix, Catch::Contains("\nauto,auto,100.0000,"));
}

TEST_CASE("tlbench dispatch writes the table of a results folder, and report writes it too",
          "[dispatch][cli]") {
  Scratch s("cli");
  test::CommandResult r = tlbench("dispatch --results " + kFixture + " -o table.json", s);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("dispatch table from " + kFixture + " (NVIDIA H200"));
  CHECK_THAT(r.out, Catch::Contains("written to table.json"));
  const DispatchTable t = load_dispatch_table(s.path("table.json"));
  // 4 cases x 2 dtypes of the fixture; the A/A rows never count.
  CHECK(t.entries.size() == 8);
  for (const DispatchEntry& e : t.entries) CHECK(e.config != "00000");
  CHECK(t.sources.at(0).results == kFixture);

  r = tlbench("dispatch --results " + kFixture + " -o -", s);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out == dispatch_table_json(build_dispatch_table(results::read_results(kFixture))));

  r = tlbench("report " + kFixture + " --out analysis --quiet", s);
  REQUIRE(r.exit_code == 0);
  REQUIRE(fs::is_regular_file(s.dir / "analysis" / "dispatch_table.json"));
  CHECK(load_dispatch_table(s.path("analysis/dispatch_table.json")).entries.size() == 8);

  // A folder the table cannot be built from still gets its analysis.
  fs::create_directories(s.dir / "empty");
  s.write("empty/points.jsonl", "");
  r = tlbench("report empty --quiet", s);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("no dispatch table written: empty: no points"));
  CHECK(fs::is_regular_file(s.dir / "empty" / "analysis" / "analysis.json"));
  CHECK_FALSE(fs::exists(s.dir / "empty" / "analysis" / "dispatch_table.json"));

  r = tlbench("dispatch --results nowhere -o t2.json", s);
  CHECK(r.exit_code == 2);
  CHECK(lines(r.err) == 1);
  CHECK_THAT(r.err, Catch::Contains("nowhere/points.jsonl"));
  CHECK_FALSE(fs::exists(s.dir / "t2.json"));
  r = tlbench("dispatch --results " + kFixture, s);
  CHECK(r.exit_code == 2);
}

TEST_CASE("tlbench plan --policy auto counts one auto point per case and dtype", "[dispatch][cli]") {
  Scratch s("plan");
  test::CommandResult r = tlbench("plan --mem-gib 80 --policy auto --config " + kCases, s);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("14 cases x (32 configurations + auto) x 3 dtypes = 1386 points "
                                    "(per dtype: fp16 462, bf16 462, fp32 462)"));
  CHECK_THAT(r.out, Catch::Contains("auto: 42 point(s), one per case and dtype, configuration from "
                                    "the built-in table ("));
  CHECK_THAT(r.out, Catch::Contains("exact shape: case 6 gpt2-medium-1k fp16"));

  r = tlbench("plan --json --mem-gib 80 --configs auto --dtypes fp32 --config " + kCases, s);
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out);
  CHECK(j["total_points"].get<int>() == 14);
  CHECK(j["auto_points"].get<int>() == 14);
  CHECK(j["configs_per_case_and_dtype"].get<int>() == 0);
  const json& c6 = j["cases"][5]["dtypes"][0];
  CHECK(c6["order"].dump() == R"(["auto"])");
  CHECK(c6["auto"]["exact"].get<bool>());
  CHECK(c6["auto"]["config"].get<std::string>() ==
        choose(builtin_dispatch_table(), load_cases(kCases).cases[5].shape, DType::fp32,
               Fp32Math::tf32).config);

  // A case whose own policy is "auto" gets the point without --policy.
  const std::string cases = s.write("auto-case.json", R"({"cases": [
    {"id": 1, "name": "a", "batch": 1, "seq": 64, "d_model": 64, "heads": 2, "d_ff": 128, "layers": 2,
     "mask": "none", "policy": "auto", "dtypes": ["fp16"]},
    {"id": 2, "name": "b", "batch": 1, "seq": 64, "d_model": 64, "heads": 2, "d_ff": 128, "layers": 2,
     "mask": "none", "policy": "EF", "dtypes": ["fp16"]}]})");
  r = tlbench("plan --json --mem-gib 80 --configs 11000 --config " + cases, s);
  REQUIRE(r.exit_code == 0);
  const json k = json::parse(r.out);
  CHECK(k["total_points"].get<int>() == 3);
  CHECK(k["auto_points"].get<int>() == 1);
  CHECK(k["cases"][0]["dtypes"][0]["auto"]["reason"].get<std::string>().rfind("nearest shape:", 0) == 0);
  CHECK(k["cases"][1]["dtypes"][0]["auto"].is_null());

  // A table given by file is read and checked even before any point needs it.
  s.write("bad.json", "{\"format_version\": 1}");
  r = tlbench("plan --mem-gib 80 --dispatch-table bad.json --config " + kCases, s);
  CHECK(r.exit_code == 2);
  CHECK(lines(r.err) == 1);
  CHECK_THAT(r.err, Catch::Contains("bad.json: $: missing required field \"source\""));
  r = tlbench("plan --mem-gib 80 --policy sometimes --config " + kCases, s);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("--policy: unknown policy 'sometimes'"));
}

TEST_CASE("quick runs without --configs: each technique alone and all together", "[dispatch][grid]") {
  const CaseSet cases = load_cases(kCases);
  const TechniqueSet techniques = default_techniques();
  Selection sel = parse_selection("", "", "", cases, techniques);
  narrow_for_quick(sel, techniques);
  CHECK(sel.config_patterns ==
        std::vector<std::string>{"10000", "01000", "00100", "00010", "00001", "11111"});
  CHECK(sel.narrowed == "quick: 6 of 32 configurations per case; --configs to choose");
  CHECK(selected_config_count(sel, techniques) == 6);
  CHECK(build_grid(cases, techniques, sel, 1).size() == 14 * 6 * 3);
  // Configurations named on the command line are left alone, auto alone too.
  Selection named = parse_selection("", "1xxxx", "", cases, techniques);
  narrow_for_quick(named, techniques);
  CHECK(named.narrowed.empty());
  CHECK(selected_config_count(named, techniques) == 16);
  Selection only_auto = parse_selection("", "auto", "", cases, techniques);
  narrow_for_quick(only_auto, techniques);
  CHECK(only_auto.only_auto);
  CHECK(only_auto.auto_points);
  CHECK(selected_config_count(only_auto, techniques) == 0);
  const auto grid = build_grid(cases, techniques, only_auto, 1);
  CHECK(grid.size() == 14 * 3);
  for (const GridPoint& p : grid) CHECK(p.automatic);
  // --policy auto adds the auto point to the narrowed set, last in each group, so it can
  // choose from the group's own measurements.
  apply_policy_option(sel, "auto");
  const auto with_auto = build_grid(cases, techniques, sel, 1);
  CHECK(with_auto.size() == 14 * 7 * 3);
  std::vector<size_t> auto_at;
  for (size_t i = 0; i < with_auto.size(); i += 7)
    for (size_t k = 0; k < 7; ++k)
      if (with_auto[i + k].automatic) auto_at.push_back(k);
  CHECK(auto_at.size() == 42);
  CHECK(std::all_of(auto_at.begin(), auto_at.end(), [](size_t k) { return k == 6; }));
  CHECK(build_grid(cases, techniques, sel, 1).size() == with_auto.size());
  CHECK_THROWS_WITH(apply_policy_option(sel, "EFFF"), Catch::StartsWith("--policy: unknown policy 'EFFF'"));

  Scratch s("plan-quick");
  test::CommandResult r = tlbench("plan --quick --mem-gib 80 --config " + kCases, s);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("14 cases x 6 configurations x 3 dtypes = 252 points (per dtype: "
                                    "fp16 84, bf16 84, fp32 84); quick: 6 of 32 configurations per "
                                    "case; --configs to choose"));
  r = tlbench("plan --quick --policy auto --mem-gib 80 --config " + kCases, s);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("x (6 configurations + auto) x 3 dtypes = 294 points"));
  r = tlbench("plan --quick --configs 11xxx --mem-gib 80 --config " + kCases, s);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("14 cases x 8 configurations x 3 dtypes = 336 points (per dtype: "
                                    "fp16 112, bf16 112, fp32 112)\n"));
}
