// The safetensors writer and `tlbench export`: headers parse back (offsets contiguous, data
// 8-byte aligned, dtypes and shapes as declared), bytes land where the offsets say, a failed
// write leaves no file, the exported weights and input are exactly the generator's bits under
// PyTorch's state_dict names, and bad arguments exit 2 with one line.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "ablation_test_util.hpp"
#include "common/rng.hpp"
#include "common/rounding.hpp"
#include "export.hpp"
#include "safetensors.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Scratch : tlb::test::Scratch {
  explicit Scratch(const std::string& name) : tlb::test::Scratch("tlbench-st", name) {}
};

std::vector<uint8_t> slurp_bytes(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// A file as the format defines it, parsed independently of the writer.
struct Parsed {
  uint64_t header_len = 0;
  json header;
  std::vector<uint8_t> bytes;
  uint64_t data_start() const { return 8 + header_len; }
  // The bytes of one tensor, checked against its offsets.
  std::vector<uint8_t> tensor(const std::string& name) const {
    const json& t = header.at(name);
    const uint64_t a = t["data_offsets"][0], b = t["data_offsets"][1];
    REQUIRE(data_start() + b <= bytes.size());
    return std::vector<uint8_t>(bytes.begin() + static_cast<long>(data_start() + a),
                                bytes.begin() + static_cast<long>(data_start() + b));
  }
};

Parsed parse_file(const std::string& p) {
  Parsed f;
  f.bytes = slurp_bytes(p);
  REQUIRE(f.bytes.size() >= 8);
  for (int i = 7; i >= 0; --i) f.header_len = (f.header_len << 8) | f.bytes[static_cast<size_t>(i)];
  REQUIRE(8 + f.header_len <= f.bytes.size());
  f.header = json::parse(f.bytes.begin() + 8, f.bytes.begin() + static_cast<long>(8 + f.header_len));
  return f;
}

// The format's invariants: aligned data start, contiguous offsets covering the data exactly,
// sizes matching dtype x shape, metadata values all strings.
void check_layout(const Parsed& f) {
  CHECK(f.data_start() % 8 == 0);
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (auto it = f.header.begin(); it != f.header.end(); ++it) {
    if (it.key() == "__metadata__") {
      for (auto m = it->begin(); m != it->end(); ++m) CHECK(m->is_string());
      continue;
    }
    const json& t = *it;
    const std::string dt = t.at("dtype");
    const uint64_t esz = dt == "F16" || dt == "BF16" ? 2 : 4;
    CHECK((dt == "F16" || dt == "BF16" || dt == "F32" || dt == "I32"));
    uint64_t n = 1;
    for (const json& s : t.at("shape")) n *= s.get<uint64_t>();
    const uint64_t a = t.at("data_offsets")[0], b = t.at("data_offsets")[1];
    INFO(it.key());
    CHECK(b - a == n * esz);
    spans.emplace_back(a, b);
  }
  std::sort(spans.begin(), spans.end());
  uint64_t at = 0;
  for (const auto& [a, b] : spans) {
    CHECK(a == at);
    at = b;
  }
  CHECK(f.data_start() + at == f.bytes.size());
}

template <typename T>
std::vector<uint8_t> as_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

}  // namespace

TEST_CASE("safetensors writer: header, offsets, alignment, dtypes and bytes parse back",
          "[export]") {
  Scratch s("writer");
  using tlb::safetensors::Dtype;
  const std::vector<uint16_t> h = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x8000, 0x3555};
  const std::vector<float> f = {1.5f, -2.25f, 3e-8f, 65504.0f, -0.0f};
  const std::vector<int32_t> i = {7, -3};
  const std::vector<uint16_t> b = {0x3f80, 0xbf80, 0x7f7f};
  const std::vector<tlb::safetensors::TensorEntry> entries = {
      {"half.weight", Dtype::F16, {2, 3}},
      {"float", Dtype::F32, {5}},
      {"empty", Dtype::F32, {0, 4}},
      {"ints", Dtype::I32, {2}},
      {"brain", Dtype::BF16, {1, 1, 3}},
  };
  const std::string out = s.path("t.safetensors");
  tlb::safetensors::Writer w(out, entries, {{"case_id", "7"}, {"note", "two words"}});
  w.append(h.data(), 4);  // a tensor may arrive in pieces
  w.append(reinterpret_cast<const uint8_t*>(h.data()) + 4, 8);
  CHECK(w.current() == 1);
  w.append(f.data(), 20);
  CHECK(w.current() == 3);  // the empty tensor needs no bytes
  w.append(i.data(), 8);
  w.append(b.data(), 6);
  CHECK(!fs::exists(out));  // only finish() gives the file its name
  const uint64_t size = w.finish();
  CHECK(size == fs::file_size(out));

  const Parsed p = parse_file(out);
  check_layout(p);
  CHECK(p.header_len % 8 == 0);
  CHECK(p.header["__metadata__"]["case_id"] == "7");
  CHECK(p.header["__metadata__"]["note"] == "two words");
  CHECK(p.header["half.weight"]["dtype"] == "F16");
  CHECK(p.header["half.weight"]["shape"] == json::array({2, 3}));
  CHECK(p.header["half.weight"]["data_offsets"] == json::array({0, 12}));
  CHECK(p.header["float"]["data_offsets"] == json::array({12, 32}));
  CHECK(p.header["empty"]["data_offsets"] == json::array({32, 32}));
  CHECK(p.header["ints"]["dtype"] == "I32");
  CHECK(p.header["brain"]["dtype"] == "BF16");
  CHECK(p.header["brain"]["shape"] == json::array({1, 1, 3}));
  CHECK(p.tensor("half.weight") == as_bytes(h));
  CHECK(p.tensor("float") == as_bytes(f));
  CHECK(p.tensor("ints") == as_bytes(i));
  CHECK(p.tensor("brain") == as_bytes(b));
  for (uint64_t n = 0; n < 8; ++n) CHECK(tlb::safetensors::header_json(entries, {{"k", std::string(n, 'x')}}).size() % 8 == 0);
}

TEST_CASE("safetensors writer: misuse throws and a failed write leaves no file", "[export]") {
  Scratch s("writer-errors");
  using tlb::safetensors::Dtype;
  const std::vector<tlb::safetensors::TensorEntry> entries = {{"a", Dtype::F32, {2}},
                                                              {"b", Dtype::F16, {3}}};
  const std::vector<uint8_t> zeros(64, 0);
  const std::string out = s.path("bad.safetensors");
  {
    tlb::safetensors::Writer w(out, entries, {});
    CHECK_THROWS_AS(w.append(zeros.data(), 9), std::logic_error);  // runs past tensor a
    w.append(zeros.data(), 8);
    CHECK_THROWS_AS(w.finish(), std::logic_error);  // b incomplete
  }
  CHECK(!fs::exists(out));
  CHECK(fs::is_empty(s.dir));  // the temporary is gone too

  CHECK_THROWS_AS(tlb::safetensors::header_json({{"x", Dtype::F32, {1}}, {"x", Dtype::F32, {1}}}, {}),
                  std::invalid_argument);
  CHECK_THROWS_AS(tlb::safetensors::header_json({{"__metadata__", Dtype::F32, {1}}}, {}),
                  std::invalid_argument);
  try {
    tlb::safetensors::Writer w(s.path("no/such/dir/x.safetensors"), entries, {});
    FAIL("writing into a missing folder succeeded");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find("no/such/dir/x.safetensors") != std::string::npos);
  }
}

TEST_CASE("export names every parameter as torch.nn.TransformerEncoder's state_dict does",
          "[export]") {
  tlb::LayerShape s;
  s.d_model = 16;
  s.d_ff = 40;
  s.layers = 2;
  const auto w = tlb::export_weights(s);
  REQUIRE(w.size() == 24);
  std::vector<std::string> names;
  for (const auto& e : w) names.push_back(e.name);
  const std::vector<std::string> layer1 = {
      "layers.1.self_attn.in_proj_weight", "layers.1.self_attn.in_proj_bias",
      "layers.1.self_attn.out_proj.weight", "layers.1.self_attn.out_proj.bias",
      "layers.1.linear1.weight", "layers.1.linear1.bias", "layers.1.linear2.weight",
      "layers.1.linear2.bias", "layers.1.norm1.weight", "layers.1.norm1.bias",
      "layers.1.norm2.weight", "layers.1.norm2.bias"};
  CHECK(std::vector<std::string>(names.begin() + 12, names.end()) == layer1);
  CHECK(w[0].shape == std::vector<int64_t>{48, 16});
  CHECK(w[4].shape == std::vector<int64_t>{40, 16});
  CHECK(w[6].shape == std::vector<int64_t>{16, 40});
  CHECK(w[5].shape == std::vector<int64_t>{40});
  CHECK(w[12].layer == 1);
  CHECK(w[0].tensor == tlb::TensorId::w_qkv);
  CHECK(w[8].tensor == tlb::TensorId::ln1_gamma);
  CHECK(w[11].tensor == tlb::TensorId::ln2_beta);
}

namespace {

using Result = tlb::test::CommandResult;
using tlb::test::slurp;

std::string quote(const std::string& s) { return tlb::test::shell_quote(s); }

Result run_command(const std::string& cmd_line, const Scratch& s) { return tlb::test::run_command(cmd_line, s.dir); }

Result run_tlbench(const std::string& args, const Scratch& s) {
  return run_command(quote(TLBENCH_BINARY) + " " + args, s);
}

// A tiny case with a padding mask; seed 0 = "use the run's seed".
const char* kTinyCases = R"({"cases": [
  {"id": 7, "name": "tiny", "batch": 2, "seq": 3, "d_model": 16, "heads": 2, "d_ff": 40,
   "layers": 2, "mask": "padding", "valid_lens": [3, 1], "activation": "gelu_tanh"}]})";

uint32_t stored_bits(const std::vector<uint8_t>& tensor, uint64_t i, tlb::DType dt) {
  const size_t esz = static_cast<size_t>(tlb::dtype_bytes(dt));
  uint32_t v = 0;
  std::memcpy(&v, &tensor[i * esz], esz);
  return v;
}

uint32_t generator_bits(uint64_t seed, uint32_t layer, tlb::TensorId t, uint64_t i, tlb::DType dt) {
  const tlb::TensorDist d = tlb::tensor_dist(seed, 7, layer, t, 16, 40);
  const float v = tlb::sample_rounded(d, i, dt);
  switch (dt) {
    case tlb::DType::fp16: return tlb::f32_to_f16_bits(v);
    case tlb::DType::bf16: return tlb::f32_to_bf16_bits(v);
    default: return tlb::f32_bits(v);
  }
}

}  // namespace

TEST_CASE("tlbench export --no-outputs writes the generator's exact bits", "[export][cli]") {
  Scratch s("export");
  const std::string cases = s.write("cases.json", kTinyCases);
  for (tlb::DType dt : {tlb::DType::fp16, tlb::DType::bf16, tlb::DType::fp32}) {
    const std::string name(tlb::to_string(dt));
    INFO(name);
    const std::string out = s.path(name + ".safetensors");
    const Result r = run_tlbench("export --no-outputs --config " + quote(cases) +
                                     " --case 7 --dtype " + name + " -o " + quote(out), s);
    INFO("stderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("wrote " + out) != std::string::npos);
    const Parsed p = parse_file(out);
    check_layout(p);
    CHECK(p.header.size() == 1 + 24 + 2);  // metadata, 2 layers x 12, input, valid_lens
    CHECK(!p.header.contains("reference_output"));
    CHECK(!p.header.contains("golden_output"));
    const json& m = p.header["__metadata__"];
    CHECK(m["case_id"] == "7");
    CHECK(m["dtype"] == name);
    CHECK(m["seed"] == std::to_string(tlb::kDefaultRunSeed));
    CHECK(m["heads"] == "2");
    CHECK(m["mask"] == "padding");
    CHECK(m["activation"] == "gelu_tanh");
    CHECK(m["valid_lens"] == "[3,1]");
    CHECK(m["eps"] == "1e-05");
    CHECK(m.contains("git_commit"));
    CHECK(m["outputs"].get<std::string>().find("--no-outputs") != std::string::npos);

    const std::string st = dt == tlb::DType::fp16 ? "F16" : dt == tlb::DType::bf16 ? "BF16" : "F32";
    CHECK(p.header["input"]["dtype"] == st);
    CHECK(p.header["input"]["shape"] == json::array({2, 3, 16}));
    CHECK(p.header["valid_lens"]["dtype"] == "I32");
    CHECK(p.tensor("valid_lens") == as_bytes(std::vector<int32_t>{3, 1}));

    struct Probe {
      const char* name;
      uint32_t layer;
      tlb::TensorId t;
      uint64_t n;
    };
    const Probe probes[] = {{"layers.0.self_attn.in_proj_weight", 0, tlb::TensorId::w_qkv, 48 * 16},
                            {"layers.1.self_attn.in_proj_bias", 1, tlb::TensorId::b_qkv, 48},
                            {"layers.1.self_attn.out_proj.weight", 1, tlb::TensorId::w_out, 256},
                            {"layers.0.linear1.weight", 0, tlb::TensorId::w_ff1, 40 * 16},
                            {"layers.1.linear2.weight", 1, tlb::TensorId::w_ff2, 16 * 40},
                            {"layers.0.linear2.bias", 0, tlb::TensorId::b_ff2, 16},
                            {"layers.1.norm1.weight", 1, tlb::TensorId::ln1_gamma, 16},
                            {"layers.0.norm2.bias", 0, tlb::TensorId::ln2_beta, 16},
                            {"input", 0, tlb::TensorId::input, 2 * 3 * 16}};
    for (const Probe& pr : probes) {
      INFO(pr.name);
      const std::vector<uint8_t> t = p.tensor(pr.name);
      REQUIRE(t.size() == pr.n * static_cast<uint64_t>(tlb::dtype_bytes(dt)));
      for (uint64_t i : {uint64_t{0}, uint64_t{1}, pr.n / 2 + 1, pr.n - 1})
        CHECK(stored_bits(t, i, dt) == generator_bits(tlb::kDefaultRunSeed, pr.layer, pr.t, i, dt));
    }
    // Not all zero and not all equal: the file holds data, not a placeholder.
    const std::vector<uint8_t> w = p.tensor("layers.1.linear1.weight");
    CHECK(stored_bits(w, 0, dt) != stored_bits(w, 1, dt));
  }

  // --seed reseeds a case that sets none.
  const std::string out = s.path("seeded.safetensors");
  const Result r = run_tlbench("export --no-outputs --config " + quote(cases) +
                                   " --case 7 --dtype bf16 --seed 99 -o " + quote(out), s);
  REQUIRE(r.exit_code == 0);
  const Parsed p = parse_file(out);
  CHECK(p.header["__metadata__"]["seed"] == "99");
  CHECK(stored_bits(p.tensor("input"), 5, tlb::DType::bf16) ==
        generator_bits(99, 0, tlb::TensorId::input, 5, tlb::DType::bf16));
}

TEST_CASE("tlbench export on bad arguments: exit 2, one line, nothing written", "[export][cli]") {
  Scratch s("export-bad");
  const std::string cases = s.write("cases.json", kTinyCases);
  const std::string out = s.path("x.safetensors");
  struct Bad {
    std::string args;
    const char* phrase;
  };
  const std::string config = "--config " + quote(cases);
  const Bad bad[] = {
      {config + " --case 99 --dtype fp16", "no case with id 99 (ids: 7)"},
      {config + " --case 7 --dtype fp8", "unknown dtype 'fp8'"},
      {"--case 7 --dtype fp16 --config " + quote(s.path("missing.json")), "missing.json"},
      {config + " --dtype fp16", "--case"},
  };
  for (const Bad& b : bad) {
    const std::string args = "export --no-outputs " + b.args + " -o " + quote(out);
    INFO(args);
    const Result r = run_tlbench(args, s);
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    REQUIRE(!r.err.empty());
    CHECK(r.err.find('\n') == r.err.size() - 1);
    CHECK(r.err.find(b.phrase) != std::string::npos);
    CHECK(!fs::exists(out));
  }
  const Result r = run_tlbench("export --no-outputs --config " + quote(cases) +
                                   " --case 7 --dtype fp16 -o " + quote(s.path("no/dir/x.safetensors")), s);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("does not exist; nothing written") != std::string::npos);
}

TEST_CASE("tlbench export with outputs: exit 3 without a GPU, reference and golden with one",
          "[export][cli]") {
  Scratch s("export-outputs");
  const std::string cases = s.write("cases.json", kTinyCases);
  const std::string out = s.path("o.safetensors");
  const Result r = run_tlbench("export --config " + quote(cases) + " --case 7 --dtype fp16 -o " + quote(out), s);
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  if (!tlb::test::gpu_available(nullptr)) {
    CHECK(r.exit_code == 3);
    CHECK(r.err.find("--no-outputs") != std::string::npos);
    CHECK(r.err.find('\n') == r.err.size() - 1);
    CHECK(!fs::exists(out));
    return;
  }
  REQUIRE(r.exit_code == 0);
  const Parsed p = parse_file(out);
  check_layout(p);
  CHECK(p.header["reference_output"]["dtype"] == "F16");
  CHECK(p.header["golden_output"]["dtype"] == "F32");
  CHECK(p.header["golden_output"]["shape"] == json::array({2, 3, 16}));
  const std::vector<uint8_t> g = p.tensor("golden_output");
  std::vector<float> golden(g.size() / 4);
  std::memcpy(golden.data(), g.data(), g.size());
  for (float v : golden) CHECK(std::isfinite(v));
  const double rel = std::stod(p.header["__metadata__"]["reference_vs_golden_rel_l2"].get<std::string>());
  CHECK(rel < 1e-2);
}

TEST_CASE("check_pytorch.py compiles and describes an export without PyTorch", "[export]") {
  Scratch s("script");
  const std::string script = std::string(TLBENCH_SOURCE_DIR) + "/scripts/check_pytorch.py";
  if (std::system("python3 -c 'import sys' >/dev/null 2>&1") != 0) {
    WARN("python3 not found: script not checked");
    return;
  }
  // Parse without writing __pycache__ into the source tree.
  Result r = run_command("python3 -c \"import ast,sys; ast.parse(open(sys.argv[1]).read())\" " + quote(script), s);
  INFO(r.err);
  CHECK(r.exit_code == 0);

  const std::string cases = s.write("cases.json", kTinyCases);
  const std::string out = s.path("d.safetensors");
  REQUIRE(run_tlbench("export --no-outputs --config " + quote(cases) + " --case 7 --dtype bf16 -o " + quote(out), s)
              .exit_code == 0);
  r = run_command("python3 -B " + quote(script) + " --describe " + quote(out), s);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("layers.1.norm2.bias BF16 [16]") != std::string::npos);
  CHECK(r.out.find("meta mask = padding") != std::string::npos);
  // A file without outputs has nothing to compare: a usage error, whether or not torch exists.
  r = run_command("python3 -B " + quote(script) + " " + quote(out), s);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("no outputs") != std::string::npos);
}
