// PyTorch beside auto in `tlbench report` (ablation/peer_compare.*): per (case, dtype, math) of
// an auto row, PyTorch's fastest ok mode of the same case, dtype and math (fp32 TF32 against
// TF32, IEEE against IEEE, fp16/bf16 against "native"), the ratio of forward times, out of
// memory said as such; the CSV and summary lines `tlbench report` writes; a folder without a
// peer file gets neither; a broken one is one line naming file and line, exit 2, nothing written.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ablation_test_util.hpp"
#include "config.hpp"
#include "peer_compare.hpp"
#include "results_reader.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* kRunJson = R"({
  "techniques": [{"name": "qkv"}, {"name": "attn"}, {"name": "ffn"}, {"name": "norm"}, {"name": "graph"}],
  "device": {"name": "Test GPU"}, "tool": {"git_commit": "abc123"}, "end_time": "2026-01-02T03:04:05Z",
  "options": {"quick": false}, "state": "complete"})";

json point(int case_id, const std::string& dtype, const std::string& math, const std::string& config, double ms) {
  return {{"case_id", case_id}, {"case_name", "case" + std::to_string(case_id)},
          {"dtype", dtype}, {"math", math}, {"config", config}, {"policy", "FF"},
          {"auto_choice", config == "auto" ? "01011" : ""}, {"status", "ok"}, {"baseline", "00000"},
          {"speedup", 2.0}, {"speedup_ci_low", 1.9}, {"speedup_ci_high", 2.1}, {"cand_ms", ms},
          {"cand_spread_ms", 0.001}, {"golden_pass", true}, {"strict_pass", true}, {"golden_rel_l2", 1e-4},
          {"dispatch", "qkv=k"}};
}

json peer_row(int case_id, const std::string& dtype, const std::string& math, const std::string& mode,
              const std::string& status, double ms) {
  json r = {{"case_id", case_id}, {"case_name", "case" + std::to_string(case_id)}, {"dtype", dtype},
            {"math", math}, {"mode", mode}, {"status", status},
            {"torch", "2.11.0"}, {"cudnn", "91900"}, {"gpu", "Test GPU"}};
  if (status == "ok") r["median_ms"] = ms;
  return r;
}

std::string lines(const std::vector<json>& rows) {
  std::string s;
  for (const json& r : rows) s += r.dump() + "\n";
  return s;
}

// auto rows: case 1 fp16, fp32 tf32 and fp32 ieee; case 14 fp16 (PyTorch out of memory); case 3
// bf16 (no PyTorch row); case 5 bf16 (PyTorch fastest on its fast path, which computed the tanh
// GELU). A fixed row of case 1 is not compared.
std::string points() {
  return lines({point(1, "fp16", "fp32-acc", "01011", 0.15), point(1, "fp16", "fp32-acc", "auto", 0.10),
                point(1, "fp32", "tf32", "auto", 0.30), point(1, "fp32", "ieee", "auto", 0.90),
                point(14, "fp16", "fp32-acc", "auto", 40.0), point(3, "bf16", "fp32-acc", "auto", 1.0),
                point(5, "bf16", "fp32-acc", "auto", 1.0)});
}

std::string peer_text() {
  return lines({peer_row(1, "fp16", "native", "eager", "ok", 0.25), peer_row(1, "fp16", "native", "graph", "ok", 0.08),
                peer_row(1, "fp16", "native", "fastpath_graph", "error", 0),
                peer_row(1, "fp32", "tf32", "graph", "ok", 0.20), peer_row(1, "fp32", "ieee", "graph", "ok", 1.0),
                peer_row(14, "fp16", "native", "eager", "oom", 0), peer_row(14, "fp16", "native", "graph", "oom", 0),
                peer_row(5, "bf16", "native", "graph", "ok", 1.3),
                [] {
                  json r = peer_row(5, "bf16", "native", "fastpath_graph", "ok", 0.9);
                  r["ffn_gelu"] = "tanh";
                  return r;
                }()});
}

const tlb::peer::Comparison* find(const std::vector<tlb::peer::Comparison>& v, int id, const std::string& dtype,
                                  const std::string& math) {
  for (const auto& c : v)
    if (c.case_id == id && c.dtype == dtype && c.math == math) return &c;
  return nullptr;
}

}  // namespace

TEST_CASE("PyTorch's fastest mode of the same case, dtype and math beside each auto row", "[analysis][peer]") {
  const tlb::test::Scratch scratch("tlbench-peer-compare", "compare");
  scratch.write(tlb::peer::kPeerFile, peer_text());
  const auto file = tlb::peer::read_peer_file(scratch.dir.string());
  REQUIRE(file);
  CHECK(file->rows.size() == 9);
  CHECK(file->versions() == "torch 2.11.0, cuDNN 91900, on Test GPU");
  const auto results = tlb::results::parse_results(points(), kRunJson, scratch.dir.string());
  const auto c = tlb::peer::compare_auto(results, *file);
  REQUIRE(c.size() == 6);  // the fixed row is not compared
  // Case order, then fp16, bf16, fp32 (tf32 before ieee).
  CHECK(c[0].dtype == "fp16");
  CHECK(c[1].math == "tf32");
  CHECK(c[2].math == "ieee");
  CHECK(c[3].case_id == 3);
  CHECK(c[4].case_id == 5);
  CHECK(c[5].case_id == 14);

  const auto* fp16 = find(c, 1, "fp16", "native");
  REQUIRE(fp16);
  CHECK(fp16->peer_mode == "graph");  // the fastest ok mode; the error row does not count
  CHECK(*fp16->peer_ms == Approx(0.08));
  CHECK(*fp16->ratio == Approx(0.10 / 0.08));
  CHECK(fp16->auto_choice == "01011");
  const auto* tf32 = find(c, 1, "fp32", "tf32");
  const auto* ieee = find(c, 1, "fp32", "ieee");
  REQUIRE(tf32);
  REQUIRE(ieee);
  CHECK(*tf32->ratio == Approx(0.30 / 0.20));  // TF32 against TF32
  CHECK(*ieee->ratio == Approx(0.90 / 1.00));  // IEEE against IEEE
  const auto* oom = find(c, 14, "fp16", "native");
  REQUIRE(oom);
  CHECK(oom->peer_oom);
  CHECK_FALSE(oom->ratio);
  const auto* none = find(c, 3, "bf16", "native");
  REQUIRE(none);
  CHECK_FALSE(none->peer_oom);
  CHECK_FALSE(none->peer_ms);

  // A peer file of other cases (the name differs for an id) is refused, naming file and line.
  {
    tlb::peer::PeerFile other = *file;
    other.rows[3].case_name = "not-case1";
    CHECK_THROWS_WITH(tlb::peer::compare_auto(results, other),
                      Catch::Contains("peer_pytorch.jsonl:4: case 1 is \"not-case1\" here but \"case1\" in"));
  }
  const std::string csv = tlb::peer::comparison_csv(c);
  CHECK(csv.rfind("case_id,case_name,dtype,math,auto_choice,auto_ms,pytorch_mode,pytorch_ms,auto_over_pytorch,"
                  "pytorch_ffn_gelu\n", 0) == 0);
  CHECK(csv.find("\n1,case1,fp32,ieee,01011,0.9,graph,1,0.9000,\n") != std::string::npos);
  CHECK(csv.find("\n14,case14,fp16,native,01011,40,oom,,,\n") != std::string::npos);
  // PyTorch's fastest mode of case 5 ran the tanh GELU: still the time to beat, and said so.
  const auto* tanh = find(c, 5, "bf16", "native");
  REQUIRE(tanh);
  CHECK(tanh->peer_mode == "fastpath_graph");
  CHECK(tanh->peer_ffn_gelu == "tanh");
  CHECK(csv.find("\n5,case5,bf16,native,01011,1,fastpath_graph,0.9,1.1111,tanh\n") != std::string::npos);
  CHECK(nlohmann::json::parse(tlb::peer::comparison_json(c, *file))["rows"][4]["pytorch_ffn_gelu"] == "tanh");

  const fs::path printed = scratch.dir / "printed.txt";
  std::FILE* out = std::fopen(printed.c_str(), "w");
  REQUIRE(out);
  tlb::peer::print_comparison(c, *file, out);
  std::fclose(out);
  const std::string text = tlb::test::slurp(printed);
  INFO(text);
  CHECK(text.find("fp16 native    geomean 1.250 over 1 cases, worst 1.250 (case 1), PyTorch faster on 1 (1); "
                  "PyTorch out of memory on 1") != std::string::npos);
  CHECK(text.find("fp32 ieee      geomean 0.900 over 1 cases, worst 0.900 (case 1), PyTorch faster on none") !=
        std::string::npos);
  CHECK(text.find("bf16 native    geomean 1.111 over 1 cases, worst 1.111 (case 5), PyTorch faster on 1 (5); "
                  "1 without a time on one side") != std::string::npos);
  CHECK(text.find("note: PyTorch's native fast path computes the FFN's GELU as the tanh approximation") !=
        std::string::npos);

  // The fixture's rows say nothing of settling: a file from before --settle-s, noted as such.
  CHECK(file->timed_in_bursts());
  CHECK(text.find("note: PyTorch was timed in bursts") != std::string::npos);
  CHECK(nlohmann::json::parse(tlb::peer::comparison_json(c, *file))["timed_in_bursts"] == true);
  const tlb::test::Scratch settled_dir("tlbench-peer-compare", "settled");
  settled_dir.write(tlb::peer::kPeerFile,
                    R"({"case_id": 1, "case_name": "case1", "dtype": "fp16", "math": "native", "mode": "graph", )"
                    R"("status": "ok", "median_ms": 0.08, "settled": true})"
                    "\n");
  const auto settled = tlb::peer::read_peer_file(settled_dir.dir.string());
  REQUIRE(settled);
  CHECK(settled->rows.at(0).settled == true);
  CHECK_FALSE(settled->timed_in_bursts());
}

TEST_CASE("a folder without a peer file has none, and a broken one is one line naming file and line", "[analysis][peer]") {
  const tlb::test::Scratch scratch("tlbench-peer-compare", "bad");
  CHECK_FALSE(tlb::peer::read_peer_file(scratch.dir.string()));
  const std::string good = peer_row(1, "fp16", "native", "eager", "ok", 0.2).dump();
  struct Case {
    std::string text, expect;
  };
  const Case cases[] = {
      {good + "\n{oops\n", "peer_pytorch.jsonl:2: "},
      {good + "\n" + json{{"dtype", "fp16"}}.dump() + "\n", "peer_pytorch.jsonl:2: \"case_id\" missing or not a positive integer"},
      {json{{"case_id", true}, {"dtype", "fp16"}}.dump() + "\n", "peer_pytorch.jsonl:1: \"case_id\" missing"},
      {peer_row(1, "fp16", "native", "eager", "ok", -1).dump() + "\n", "peer_pytorch.jsonl:1: an ok row needs a positive \"median_ms\""},
      {json{{"case_id", 1}, {"dtype", "fp16"}, {"math", "native"}, {"mode", 3}, {"status", "ok"}}.dump() + "\n",
       "peer_pytorch.jsonl:1: \"mode\" missing or not a string"},
      {"[1, 2]\n", "peer_pytorch.jsonl:1: expected a JSON object"},
      {[] {
         json r = peer_row(1, "fp16", "native", "eager", "ok", 0.2);
         r["settled"] = "yes";
         return r.dump() + "\n";
       }(),
       "peer_pytorch.jsonl:1: \"settled\" must be true or false"},
      {[] {
         json r = peer_row(1, "fp16", "native", "fastpath", "ok", 0.2);
         r["ffn_gelu"] = "fast";
         return r.dump() + "\n";
       }(),
       "peer_pytorch.jsonl:1: \"ffn_gelu\" must be \"tanh\" or \"exact\""},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    scratch.write(tlb::peer::kPeerFile, c.text);
    try {
      tlb::peer::read_peer_file(scratch.dir.string());
      FAIL("accepted");
    } catch (const tlb::ConfigError& e) {
      CHECK(std::string(e.what()).find(c.expect) != std::string::npos);
    }
  }
  fs::remove(scratch.dir / tlb::peer::kPeerFile);
  fs::create_directory(scratch.dir / tlb::peer::kPeerFile);
  try {
    tlb::peer::read_peer_file(scratch.dir.string());
    FAIL("a folder was read as the peer file");
  } catch (const tlb::ConfigError& e) {
    CHECK(std::string(e.what()).find("peer_pytorch.jsonl: not a regular file") != std::string::npos);
  }
}

#ifdef TLBENCH_BINARY
TEST_CASE("tlbench report writes the comparison with PyTorch where the folder has a peer file", "[analysis][peer][cli]") {
  const tlb::test::Scratch scratch("tlbench-peer-compare", "report");
  const fs::path dir = scratch.dir / "res";
  fs::create_directories(dir);
  std::ofstream(dir / "points.jsonl") << points();
  std::ofstream(dir / "run.json") << kRunJson;
  // Without a peer file: no comparison.
  auto r = tlb::test::run_tlbench("report " + tlb::test::shell_quote(dir.string()), scratch.dir);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("auto against PyTorch") == std::string::npos);
  CHECK_FALSE(fs::exists(dir / "analysis" / "pytorch_comparison.csv"));
  // With one: the CSV and the summary lines.
  std::ofstream(dir / tlb::peer::kPeerFile) << peer_text();
  r = tlb::test::run_tlbench("report " + tlb::test::shell_quote(dir.string()), scratch.dir);
  REQUIRE(r.exit_code == 0);
  INFO(r.out);
  CHECK(r.out.find("auto against PyTorch's fastest mode") != std::string::npos);
  CHECK(r.out.find("fp32 tf32      geomean 1.500 over 1 cases") != std::string::npos);
  CHECK(tlb::test::slurp(dir / "analysis" / "pytorch_comparison.csv").find("1,case1,fp32,tf32,01011,0.3,graph,0.2,1.5000") !=
        std::string::npos);
  // --json: the summary document with the comparison in "pytorch".
  r = tlb::test::run_tlbench("report --json " + tlb::test::shell_quote(dir.string()), scratch.dir);
  REQUIRE(r.exit_code == 0);
  const json doc = json::parse(r.out);
  REQUIRE(doc.contains("pytorch"));
  CHECK(doc["pytorch"]["versions"] == "torch 2.11.0, cuDNN 91900, on Test GPU");
  REQUIRE(doc["pytorch"]["rows"].size() == 6);
  CHECK(doc["pytorch"]["rows"][2]["math"] == "ieee");
  CHECK(doc["pytorch"]["rows"][2]["auto_over_pytorch"].get<double>() == Approx(0.9));
  CHECK(doc["pytorch"]["rows"][5]["pytorch_oom"] == true);
  CHECK(doc["pytorch"]["rows"][5]["pytorch_ms"].is_null());
  CHECK(doc["pytorch"]["rows"][4]["pytorch_ffn_gelu"] == "tanh");
  // A broken one: one line, exit 2, the analysis folder left as it was.
  fs::remove_all(dir / "analysis");
  std::ofstream(dir / tlb::peer::kPeerFile) << "{oops\n";
  r = tlb::test::run_tlbench("report " + tlb::test::shell_quote(dir.string()), scratch.dir);
  CHECK(r.exit_code == 2);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.err.find("peer_pytorch.jsonl:1:") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "analysis"));
}
#endif
