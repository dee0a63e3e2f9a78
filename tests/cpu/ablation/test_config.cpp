// cases.json / techniques.json loading: the official files load to exactly the cases of
// docs/design.md §5, defaults apply, and every kind of bad input is rejected with one line
// naming the file, the JSON path and the problem.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "config.hpp"

using nlohmann::json;
using tlb::ConfigError;

namespace {

const char* kSource = "cfg/cases.json";

json good_case(int id, const std::string& name) {
  return {{"id", id},       {"name", name}, {"batch", 2},  {"seq", 128},
          {"d_model", 768}, {"heads", 12},  {"d_ff", 3072}, {"layers", 4},
          {"mask", "none"}};
}

// A two-case document whose second case ($.cases[1]) is `edit`ed, so paths carry an index.
std::string doc_with(const std::function<void(json&)>& edit) {
  json second = good_case(2, "second");
  edit(second);
  return json{{"cases", json::array({good_case(1, "first"), second})}}.dump();
}

std::string cases_error(const std::string& text) {
  try {
    tlb::parse_cases(text, kSource);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "<accepted>";
}

std::string techniques_error(const std::string& text) {
  try {
    tlb::parse_techniques(text, "cfg/techniques.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "<accepted>";
}

// One line, "<file>: <path>: ..." and the key phrase.
void check_error(const std::string& msg, const std::string& file, const std::string& path,
                 const std::string& phrase) {
  INFO("message: " << msg);
  CHECK(msg.find('\n') == std::string::npos);
  CHECK(msg.rfind(file + ": " + path + ": ", 0) == 0);
  CHECK(msg.find(phrase) != std::string::npos);
}

void check_case_error(const std::function<void(json&)>& edit, const std::string& path,
                      const std::string& phrase) {
  check_error(cases_error(doc_with(edit)), kSource, path, phrase);
}

struct BadCase {
  const char* what;
  std::function<void(json&)> edit;
  const char* path;
  const char* phrase;
};

json technique(const std::string& name, const std::string& desc = "does a thing") {
  return {{"name", name}, {"description", desc}};
}

std::string techniques_doc(const std::vector<json>& items) {
  return json{{"techniques", json(items)}}.dump();
}

}  // namespace

TEST_CASE("official cases.json loads to exactly the 14 cases of docs/design.md §5", "[config]") {
  const tlb::CaseSet set = tlb::load_cases(std::string(TLBENCH_SOURCE_DIR) + "/configs/cases.json");
  struct Row {
    int id;
    const char* name;
    int64_t batch, seq, d_model, heads, d_ff, layers;
    tlb::MaskKind mask;
  };
  using tlb::MaskKind;
  const Row rows[] = {
      {1, "tiny-4l", 1, 128, 512, 8, 2048, 4, MaskKind::none},
      {2, "bert-base-128", 8, 128, 768, 12, 3072, 4, MaskKind::padding},
      {3, "bert-base-512", 16, 512, 768, 12, 3072, 4, MaskKind::padding},
      {4, "short-wide-batch", 64, 64, 1024, 16, 4096, 2, MaskKind::none},
      {5, "vit-l-257", 32, 257, 1024, 16, 4096, 2, MaskKind::none},
      {6, "gpt2-medium-1k", 8, 1024, 1024, 16, 4096, 4, MaskKind::causal},
      {7, "whisper-enc-1500", 4, 1500, 1280, 20, 5120, 2, MaskKind::none},
      {8, "gpt-1.3b-2k", 4, 2048, 2048, 16, 8192, 2, MaskKind::causal},
      {9, "gpt2-xl-1k", 8, 1024, 1600, 25, 6400, 2, MaskKind::causal},
      {10, "llama7b-width-4k", 1, 4096, 4096, 32, 16384, 1, MaskKind::causal},
      {11, "long-8k", 1, 8192, 2048, 16, 8192, 1, MaskKind::causal},
      {12, "long-16k-encoder", 1, 16384, 1024, 8, 4096, 1, MaskKind::none},
      {13, "big-32k-tokens", 8, 4096, 2048, 16, 8192, 1, MaskKind::causal},
      {14, "extreme-100k", 1, 100000, 1024, 16, 4096, 1, MaskKind::causal},
  };
  REQUIRE(set.cases.size() == 14);
  for (size_t i = 0; i < 14; ++i) {
    const auto& c = set.cases[i];
    const auto& r = rows[i];
    INFO("case " << r.id);
    CHECK(c.id == r.id);
    CHECK(c.name == r.name);
    CHECK(c.shape.batch == r.batch);
    CHECK(c.shape.seq == r.seq);
    CHECK(c.shape.d_model == r.d_model);
    CHECK(c.shape.heads == r.heads);
    CHECK(c.shape.d_ff == r.d_ff);
    CHECK(c.shape.layers == r.layers);
    CHECK(c.shape.mask == r.mask);
    CHECK(c.shape.activation == tlb::Activation::gelu);
    CHECK(c.shape.eps == 1e-5f);
    CHECK(c.policy == std::string(static_cast<size_t>(r.layers), 'F'));
    CHECK(c.dtypes == std::vector<tlb::DType>{tlb::DType::fp16, tlb::DType::bf16, tlb::DType::fp32});
    CHECK(c.seed == 0);
    if (r.mask != MaskKind::padding) CHECK(c.shape.valid_lens.empty());
  }
  CHECK(set.cases[1].shape.valid_lens == std::vector<int>{128, 96, 64, 120, 32, 128, 80, 100});
  CHECK(set.cases[2].shape.valid_lens ==
        std::vector<int>{512, 384, 256, 500, 128, 512, 448, 300, 512, 200, 64, 511, 333, 480, 256, 1});
  CHECK(set.cases[8].shape.head_dim() == 64);  // gpt2-xl: 1600 / 25
}

TEST_CASE("optional case fields parse and override the defaults", "[config]") {
  const std::string text = doc_with([](json& c) {
    c["activation"] = "gelu_tanh";
    c["eps"] = 1e-6;
    c["policy"] = "EFFE";
    c["dtypes"] = {"bf16", "fp16"};
    c["seed"] = 42;
    c["mask"] = "padding";
    c["valid_lens"] = {1, 128};
  });
  const tlb::CaseSet set = tlb::parse_cases(text, kSource);
  REQUIRE(set.cases.size() == 2);
  const tlb::CaseSpec& c = set.cases[1];
  CHECK(c.shape.activation == tlb::Activation::gelu_tanh);
  CHECK(c.shape.eps == 1e-6f);
  CHECK(c.policy == "EFFE");
  CHECK(c.dtypes == std::vector<tlb::DType>{tlb::DType::bf16, tlb::DType::fp16});
  CHECK(c.seed == 42);
  CHECK(tlb::data_seed(c, 7) == 42);
  CHECK(tlb::data_seed(set.cases[0], 7) == 7);  // seed 0: the run's seed
  CHECK(c.shape.valid_lens == std::vector<int>{1, 128});
  CHECK(set.source == kSource);

  const tlb::CaseSet other = tlb::parse_cases(doc_with([](json& c) {
                                                c["policy"] = "auto";
                                                c["activation"] = "relu";
                                                c["eps"] = 1;  // an integer is a number too
                                              }),
                                              kSource);
  CHECK(other.cases[1].policy == "auto");
  CHECK(other.cases[1].shape.activation == tlb::Activation::relu);
  CHECK(other.cases[1].shape.eps == 1.0f);
}

TEST_CASE("odd but legal shapes load: one token, one batch element, d_model not a power of two",
          "[config]") {
  const tlb::CaseSet set = tlb::parse_cases(doc_with([](json& c) {
                                              c["batch"] = 1;
                                              c["seq"] = 1;
                                              c["d_model"] = 1600;
                                              c["heads"] = 25;
                                              c["d_ff"] = 8;
                                              c["layers"] = 1;
                                              c["mask"] = "causal";
                                            }),
                                            kSource);
  CHECK(set.cases[1].shape.head_dim() == 64);
  CHECK(set.cases[1].policy == "F");
}

TEST_CASE("bad cases.json values are rejected with the JSON path and the problem", "[config]") {
  const std::vector<BadCase> bad = {
      {"case not an object", [](json& c) { c = 3; }, "$.cases[1]", "expected a case object, got integer 3"},
      {"unknown key with a suggestion", [](json& c) { c["hedas"] = 12; }, "$.cases[1].hedas",
       "unknown key (did you mean \"heads\"?)"},
      {"unknown key, nothing close", [](json& c) { c["dropout"] = 0.1; }, "$.cases[1].dropout",
       "unknown key; allowed keys: id, name"},
      {"missing heads", [](json& c) { c.erase("heads"); }, "$.cases[1]", "missing required field \"heads\""},
      {"missing mask", [](json& c) { c.erase("mask"); }, "$.cases[1]", "missing required field \"mask\""},
      {"missing id", [](json& c) { c.erase("id"); }, "$.cases[1]", "missing required field \"id\""},
      {"string for integer", [](json& c) { c["seq"] = "128"; }, "$.cases[1].seq", "got string \"128\""},
      {"float for integer", [](json& c) { c["batch"] = 2.5; }, "$.cases[1].batch", "(not an integer)"},
      {"integral float for integer", [](json& c) { c["layers"] = 2.0; }, "$.cases[1].layers",
       "(not an integer)"},
      {"boolean for integer", [](json& c) { c["d_ff"] = true; }, "$.cases[1].d_ff", "got boolean true"},
      {"null for integer", [](json& c) { c["heads"] = nullptr; }, "$.cases[1].heads", "got null"},
      {"seq zero", [](json& c) { c["seq"] = 0; }, "$.cases[1].seq", "expected a positive integer, got 0"},
      {"seq negative", [](json& c) { c["seq"] = -5; }, "$.cases[1].seq", "got -5"},
      {"batch zero", [](json& c) { c["batch"] = 0; }, "$.cases[1].batch", "positive integer, got 0"},
      {"layers zero", [](json& c) { c["layers"] = 0; }, "$.cases[1].layers", "positive integer, got 0"},
      {"heads zero", [](json& c) { c["heads"] = 0; }, "$.cases[1].heads", "positive integer, got 0"},
      {"d_model zero", [](json& c) { c["d_model"] = 0; }, "$.cases[1].d_model", "positive integer, got 0"},
      {"d_model beyond int32", [](json& c) { c["d_model"] = 4294967296ll; }, "$.cases[1].d_model",
       "at most 2147483647"},
      {"heads not dividing d_model", [](json& c) { c["heads"] = 7; }, "$.cases[1].heads",
       "7 does not divide d_model 768"},
      {"d_model not a multiple of 8", [](json& c) { c["d_model"] = 100; c["heads"] = 4; },
       "$.cases[1].d_model", "100 is not a multiple of 8"},
      {"d_ff not a multiple of 8", [](json& c) { c["d_ff"] = 3070; }, "$.cases[1].d_ff",
       "3070 is not a multiple of 8"},
      {"shape beyond 64-bit byte counts",
       [](json& c) { c["batch"] = 2000000000; c["seq"] = 2000000000; }, "$.cases[1]", "shape too large"},
      {"unknown mask", [](json& c) { c["mask"] = "diag"; }, "$.cases[1].mask", "unknown mask \"diag\""},
      {"mask not a string", [](json& c) { c["mask"] = 2; }, "$.cases[1].mask", "expected a mask name"},
      {"valid_lens without padding", [](json& c) { c["valid_lens"] = {128, 128}; },
       "$.cases[1].valid_lens", "only allowed with mask \"padding\""},
      {"padding without valid_lens", [](json& c) { c["mask"] = "padding"; }, "$.cases[1]",
       "mask \"padding\" needs \"valid_lens\""},
      {"valid_lens wrong length",
       [](json& c) { c["mask"] = "padding"; c["valid_lens"] = {128, 64, 32}; }, "$.cases[1].valid_lens",
       "has 3 entries; batch is 2"},
      {"valid_lens zero", [](json& c) { c["mask"] = "padding"; c["valid_lens"] = {128, 0}; },
       "$.cases[1].valid_lens[1]", "0 is outside 1..128"},
      {"valid_lens beyond seq", [](json& c) { c["mask"] = "padding"; c["valid_lens"] = {129, 1}; },
       "$.cases[1].valid_lens[0]", "129 is outside 1..128"},
      {"valid_lens negative", [](json& c) { c["mask"] = "padding"; c["valid_lens"] = {-3, 1}; },
       "$.cases[1].valid_lens[0]", "-3 is outside 1..128"},
      {"valid_lens entry a string", [](json& c) { c["mask"] = "padding"; c["valid_lens"] = {"128", 1}; },
       "$.cases[1].valid_lens[0]", "expected an integer valid length"},
      {"valid_lens not an array", [](json& c) { c["mask"] = "padding"; c["valid_lens"] = 128; },
       "$.cases[1].valid_lens", "expected an array of integers"},
      {"unknown activation", [](json& c) { c["activation"] = "swish"; }, "$.cases[1].activation",
       "unknown activation \"swish\""},
      {"unknown dtype", [](json& c) { c["dtypes"] = {"fp16", "fp8"}; }, "$.cases[1].dtypes[1]",
       "unknown dtype \"fp8\""},
      {"duplicate dtype", [](json& c) { c["dtypes"] = {"bf16", "bf16"}; }, "$.cases[1].dtypes[1]",
       "duplicate dtype \"bf16\""},
      {"empty dtypes", [](json& c) { c["dtypes"] = json::array(); }, "$.cases[1].dtypes", "is empty"},
      {"dtypes not an array", [](json& c) { c["dtypes"] = "fp16"; }, "$.cases[1].dtypes",
       "expected an array of dtype names"},
      {"duplicate id", [](json& c) { c["id"] = 1; }, "$.cases[1].id", "duplicate id 1 (also at $.cases[0])"},
      {"duplicate name", [](json& c) { c["name"] = "first"; }, "$.cases[1].name",
       "duplicate name \"first\" (also at $.cases[0])"},
      {"id zero", [](json& c) { c["id"] = 0; }, "$.cases[1].id", "positive integer id, got 0"},
      {"empty name", [](json& c) { c["name"] = ""; }, "$.cases[1].name", "is empty"},
      {"name with a newline", [](json& c) { c["name"] = "a\nb"; }, "$.cases[1].name", "control characters"},
      {"eps zero", [](json& c) { c["eps"] = 0; }, "$.cases[1].eps", "expected a positive number, got 0"},
      {"eps negative", [](json& c) { c["eps"] = -1e-5; }, "$.cases[1].eps", "expected a positive number"},
      {"eps a string", [](json& c) { c["eps"] = "1e-5"; }, "$.cases[1].eps", "got string \"1e-5\""},
      {"eps underflows float", [](json& c) { c["eps"] = 1e-300; }, "$.cases[1].eps",
       "expected a positive number"},
      {"policy too short", [](json& c) { c["policy"] = "EF"; }, "$.cases[1].policy",
       "\"EF\" has 2 letters; layers is 4"},
      {"policy wrong letter", [](json& c) { c["policy"] = "EFXF"; }, "$.cases[1].policy",
       "letter 3 is \"X\", not E or F"},
      {"policy lowercase", [](json& c) { c["policy"] = "efff"; }, "$.cases[1].policy", "not E or F"},
      {"policy not a string", [](json& c) { c["policy"] = 1111; }, "$.cases[1].policy",
       "expected a policy string"},
      {"seed negative", [](json& c) { c["seed"] = -1; }, "$.cases[1].seed", "non-negative integer"},
      {"seed a float", [](json& c) { c["seed"] = 1.5; }, "$.cases[1].seed", "non-negative integer"},
  };
  REQUIRE(bad.size() >= 30);
  for (const auto& b : bad) {
    INFO(b.what);
    check_case_error(b.edit, b.path, b.phrase);
  }
}

TEST_CASE("bad cases.json documents are rejected at the top level", "[config]") {
  check_error(cases_error("[]"), kSource, "$", "expected an object {\"cases\": [...]}, got an array");
  check_error(cases_error("{}"), kSource, "$", "missing required field \"cases\"");
  check_error(cases_error(R"({"cases": [], "version": 1})"), kSource, "$.version", "unknown key");
  check_error(cases_error(R"({"cases": {}})"), kSource, "$.cases", "expected an array of case objects");
  check_error(cases_error(R"({"cases": []})"), kSource, "$.cases", "is empty; at least one case");
  check_error(cases_error(R"({"cases": [{"id": 1, "id": 2}]})"), kSource, "$.cases[0].id",
              "duplicate key");
  // Keys that are not identifiers are quoted in the path.
  check_error(cases_error(R"({"cases": [{"my key": 1}]})"), kSource, "$.cases[0][\"my key\"]",
              "unknown key");
}

TEST_CASE("malformed JSON names the line and column of the problem", "[config]") {
  // The second comma on line 3 is at column 14.
  const std::string text = "{\n  \"cases\": [\n    {\"id\": 1,, \"name\": \"x\"}\n  ]\n}\n";
  const std::string msg = cases_error(text);
  INFO(msg);
  CHECK(msg.rfind(std::string(kSource) + ": line 3, column 14: malformed JSON: ", 0) == 0);
  CHECK(msg.find("syntax error") != std::string::npos);
  CHECK(msg.find('\n') == std::string::npos);

  const std::string truncated = cases_error("{\"cases\": [\n");
  CHECK(truncated.rfind(std::string(kSource) + ": line 2, column 1: malformed JSON: ", 0) == 0);
  CHECK(truncated.find("end of input") != std::string::npos);

  const std::string empty = cases_error("  \n");
  CHECK(empty.find("malformed JSON: the file is empty") != std::string::npos);

  const std::string trailing = cases_error("{\"cases\": []} x");
  CHECK(trailing.rfind(std::string(kSource) + ": line 1, column 15: malformed JSON", 0) == 0);
}

TEST_CASE("missing or unreadable files are one-line config errors", "[config]") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "tlbench-test-config";
  std::filesystem::create_directories(dir);
  const std::string missing = (dir / "nope.json").string();
  try {
    tlb::load_cases(missing);
    FAIL("accepted a missing file");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()) == missing + ": cannot read: No such file or directory");
  }
  try {
    tlb::load_techniques(dir.string());
    FAIL("accepted a directory");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()) == dir.string() + ": cannot read: is a directory");
  }
  const std::string bad = (dir / "bad.json").string();
  std::ofstream(bad) << "{\"cases\": [{\"id\": 1}]}";
  try {
    tlb::load_cases(bad);
    FAIL("accepted an incomplete case");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()).rfind(bad + ": $.cases[0]: missing required field \"name\"", 0) == 0);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("official techniques.json loads the five techniques in bit order", "[config]") {
  const tlb::TechniqueSet set =
      tlb::load_techniques(std::string(TLBENCH_SOURCE_DIR) + "/configs/techniques.json");
  REQUIRE(set.size() == 5);
  const char* names[] = {"qkv", "attn", "ffn", "norm", "graph"};
  for (int i = 0; i < 5; ++i) {
    CHECK(set.items[static_cast<size_t>(i)].name == names[i]);
    CHECK(static_cast<int>(set.items[static_cast<size_t>(i)].stage) == i);
    CHECK_FALSE(set.items[static_cast<size_t>(i)].description.empty());
  }
  CHECK(set.num_configs() == 32);

  const tlb::TechniqueSet defaults = tlb::default_techniques();
  REQUIRE(defaults.size() == 5);
  for (size_t i = 0; i < 5; ++i) {
    CHECK(defaults.items[i].name == set.items[i].name);
    CHECK(defaults.items[i].description == set.items[i].description);
  }
}

TEST_CASE("configuration index, bit string, stages and names agree (bit 1 is the leftmost)", "[config]") {
  const tlb::TechniqueSet set = tlb::default_techniques();
  CHECK(set.bits(0) == "00000");
  CHECK(set.names(0) == "reference");
  CHECK(set.bits(0b11000) == "11000");
  CHECK(set.names(0b11000) == "qkv+attn");
  CHECK(set.bits(0b00001) == "00001");
  CHECK(set.names(0b00001) == "graph");
  CHECK(set.names(31) == "qkv+attn+ffn+norm+graph");
  const tlb::StageSwitch s = set.stages(0b01010);
  CHECK(s[tlb::Stage::attn]);
  CHECK(s[tlb::Stage::norm]);
  CHECK_FALSE(s[tlb::Stage::qkv]);
  CHECK_FALSE(s[tlb::Stage::ffn]);
  CHECK_FALSE(s[tlb::Stage::graph]);
  CHECK_FALSE(set.stages(0).any_kernel());

  // A subset in another order: bit 1 is ffn, bit 2 is attn; other stages are always off.
  const tlb::TechniqueSet sub = tlb::parse_techniques(
      techniques_doc({technique("ffn"), technique("attn")}), "sub.json");
  REQUIRE(sub.size() == 2);
  CHECK(sub.num_configs() == 4);
  CHECK(sub.bits(0b10) == "10");
  CHECK(sub.names(0b10) == "ffn");
  CHECK(sub.names(0b11) == "ffn+attn");
  const tlb::StageSwitch f = sub.stages(0b10);
  CHECK(f[tlb::Stage::ffn]);
  CHECK_FALSE(f[tlb::Stage::attn]);
  CHECK_FALSE(f[tlb::Stage::qkv]);
}

TEST_CASE("bad techniques.json files are rejected with the JSON path and the problem", "[config]") {
  const char* file = "cfg/techniques.json";
  check_error(techniques_error(techniques_doc({technique("qkv"), technique("flash")})), file,
              "$.techniques[1].name", "unknown technique \"flash\"");
  check_error(techniques_error(techniques_doc({technique("attn"), technique("qkv"), technique("attn")})),
              file, "$.techniques[2].name", "duplicate technique \"attn\" (also at $.techniques[0])");
  check_error(techniques_error(techniques_doc({technique("qkv", "")})), file,
              "$.techniques[0].description", "is empty");
  check_error(techniques_error(techniques_doc({technique("qkv", "two\nlines")})), file,
              "$.techniques[0].description", "must be one line");
  check_error(techniques_error(techniques_doc({})), file, "$.techniques", "is empty");
  check_error(techniques_error(techniques_doc({json{{"name", "qkv"}}})), file, "$.techniques[0]",
              "missing required field \"description\"");
  check_error(techniques_error(techniques_doc(
                  {json{{"name", "qkv"}, {"description", "x"}, {"bit", 1}}})),
              file, "$.techniques[0].bit", "unknown key");
  check_error(techniques_error(techniques_doc({json{{"name", 3}, {"description", "x"}}})), file,
              "$.techniques[0].name", "expected a technique name, got integer 3");
  check_error(techniques_error(techniques_doc({"qkv"})), file, "$.techniques[0]",
              "expected a technique object");
  check_error(techniques_error(R"({"techniques": [], "extra": 1})"), file, "$.extra", "unknown key");
  check_error(techniques_error(R"({"techniques": 5})"), file, "$.techniques", "expected an array");
  const std::string malformed = techniques_error("{\"techniques\": [{\"name\": \"qkv\"\n}");
  CHECK(malformed.rfind(std::string(file) + ": line 2, column 2: malformed JSON", 0) == 0);
}
