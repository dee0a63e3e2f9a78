#include "export.hpp"

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <optional>
#include <thread>
#include <utility>

#include "common/cuda_check.hpp"
#include "common/rounding.hpp"
#include "config.hpp"
#include "plan_report.hpp"
#include "safetensors.hpp"
#include "stack/layer_stack.hpp"
#include "text.hpp"
#include "tlbench_version.hpp"

namespace tlb {

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian bytes; this writer copies native ones");

namespace {

uint32_t dtype_bits(float v, DType dt) {
  switch (dt) {
    case DType::fp16: return f32_to_f16_bits(v);
    case DType::bf16: return f32_to_bf16_bits(v);
    default: return f32_bits(v);
  }
}

// Calls fn(lo, hi) over [0, n) split across the machine's cores (the generator is a pure
// function of the index, so any split gives the same bytes).
template <typename Fn>
void parallel_ranges(uint64_t n, Fn fn) {
  constexpr uint64_t kMinPerThread = 1u << 16;
  const uint64_t cores = std::max(1u, std::thread::hardware_concurrency());
  const uint64_t threads = std::min<uint64_t>({cores, 32, (n + kMinPerThread - 1) / kMinPerThread});
  if (threads <= 1) {
    fn(uint64_t{0}, n);
    return;
  }
  std::vector<std::thread> pool;
  const uint64_t step = (n + threads - 1) / threads;
  for (uint64_t lo = 0; lo < n; lo += step) pool.emplace_back(fn, lo, std::min(n, lo + step));
  for (std::thread& t : pool) t.join();
}

// Streams elements [0, n) of a generated tensor, rounded to and stored in `dt`.
void write_generated(safetensors::Writer& w, const TensorDist& dist, uint64_t n, DType dt) {
  constexpr uint64_t kChunk = 1u << 22;  // elements per write: 8-16 MB in flight, not the tensor
  const uint64_t esz = static_cast<uint64_t>(dtype_bytes(dt));
  std::vector<uint8_t> buf(static_cast<size_t>(std::min(n, kChunk) * esz));
  for (uint64_t begin = 0; begin < n; begin += kChunk) {
    const uint64_t count = std::min(kChunk, n - begin);
    parallel_ranges(count, [&](uint64_t lo, uint64_t hi) {
      for (uint64_t i = lo; i < hi; ++i) {
        const uint32_t bits = dtype_bits(sample_rounded(dist, begin + i, dt), dt);
        std::memcpy(&buf[static_cast<size_t>(i * esz)], &bits, static_cast<size_t>(esz));
      }
    });
    w.append(buf.data(), count * esz);
  }
}

// Floats that already hold values of `dt` (an output of the stack), stored in `dt`.
void write_floats(safetensors::Writer& w, const std::vector<float>& v, DType dt) {
  if (dt == DType::fp32) {
    w.append(v.data(), v.size() * sizeof(float));
    return;
  }
  constexpr size_t kChunk = 1u << 22;
  std::vector<uint16_t> buf(std::min(v.size(), kChunk));
  for (size_t begin = 0; begin < v.size(); begin += kChunk) {
    const size_t count = std::min(kChunk, v.size() - begin);
    for (size_t i = 0; i < count; ++i) buf[i] = static_cast<uint16_t>(dtype_bits(v[begin + i], dt));
    w.append(buf.data(), count * sizeof(uint16_t));
  }
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    num += d * d;
    den += static_cast<double>(b[i]) * b[i];
  }
  return den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
}

std::string gib(uint64_t bytes) { return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / kBytesPerGiB); }

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { TLB_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~Stream() {
    if (s) cudaStreamDestroy(s);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
};

void require_device() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  std::string why;
  if (e != cudaSuccess) {
    why = cudaGetErrorString(e);
    cudaGetLastError();
  } else if (n == 0) {
    why = "no CUDA device present";
  }
  if (!why.empty())
    throw DeviceError("export: the reference and golden outputs are computed on a CUDA device, "
                      "and none is usable (" + why + "); --no-outputs writes the weights and input only",
                      false);
}

// A few elements of every tensor of the device data must equal the host generator's: the
// file's weights and the outputs computed from the device's copy are then the same model.
void check_device_data_matches_host(const CaseData& data, DType rounding) {
  const LayerShape& s = data.shape();
  const CaseSpec& c = data.spec();
  auto check = [&](const void* base, uint32_t layer, TensorId t, uint64_t n, const std::string& name) {
    const TensorDist dist = tensor_dist(c.seed, static_cast<uint32_t>(c.id), layer, t, s.d_model, s.d_ff);
    for (uint64_t i : {uint64_t{0}, n / 2, n - 1}) {
      float got = 0.0f;  // the golden's data: fp32 storage of dtype-rounded values
      TLB_CUDA_CHECK(cudaMemcpy(&got, static_cast<const float*>(base) + i, sizeof got,
                                cudaMemcpyDeviceToHost));
      const float want = sample_rounded(dist, i, rounding);
      if (f32_bits(got) != f32_bits(want))
        throw std::runtime_error(fmt::format(
            "export: the device's {} element {} is {} but the host generator gives {}; the file "
            "would not describe the model whose outputs it holds",
            name, i, got, want));
    }
  };
  for (const ExportWeight& w : export_weights(s)) {
    const LayerWeights& lw = data.layer(w.layer);
    const void* p = nullptr;
    switch (w.tensor) {
      case TensorId::ln1_gamma: p = lw.ln1_gamma; break;
      case TensorId::ln1_beta: p = lw.ln1_beta; break;
      case TensorId::w_qkv: p = lw.w_qkv; break;
      case TensorId::b_qkv: p = lw.b_qkv; break;
      case TensorId::w_out: p = lw.w_out; break;
      case TensorId::b_out: p = lw.b_out; break;
      case TensorId::ln2_gamma: p = lw.ln2_gamma; break;
      case TensorId::ln2_beta: p = lw.ln2_beta; break;
      case TensorId::w_ff1: p = lw.w_ff1; break;
      case TensorId::b_ff1: p = lw.b_ff1; break;
      case TensorId::w_ff2: p = lw.w_ff2; break;
      case TensorId::b_ff2: p = lw.b_ff2; break;
      default: break;
    }
    uint64_t n = 1;
    for (int64_t d : w.shape) n *= static_cast<uint64_t>(d);
    check(p, w.layer, w.tensor, n, w.name);
  }
  check(data.input(), 0, TensorId::input, static_cast<uint64_t>(s.tokens() * s.d_model), "input");
}

struct Outputs {
  std::vector<float> golden;
  std::vector<float> reference;      // empty when omitted
  std::string reference_source;
  std::string reference_omitted;
};

// Golden first (it exists for every case), then the reference, or the attn-only
// configuration where the dense reference cannot fit (the baseline rule of docs/design.md §4),
// or nothing with the reason.
Outputs compute_outputs(const CaseSpec& c, DType dtype) {
  require_device();
  Outputs out;
  Stream stream;
  {
    const CaseData data(c, DType::fp32, dtype, stream.s);
    check_device_data_matches_host(data, dtype);
    PathOptions opt;
    opt.golden = true;
    StackPath golden(data, opt, stream.s);
    golden.poison();
    golden.run();
    out.golden = golden.output_host();
  }

  const MemoryBudget budget = resolve_memory_budget(std::nullopt);
  const BaselineChoice baseline = choose_baseline(c, dtype, budget.bytes);
  if (!baseline.is_reference) {
    const uint64_t need = path_peak_bytes(c.shape, dtype, baseline.stages, "");
    if (need > budget.bytes) {
      out.reference_omitted = fmt::format(
          "neither the dense reference ({}) nor the attn-only configuration ({}) fits in {}",
          gib(baseline.reference_peak), gib(need), budget.source);
      return out;
    }
  }
  try {
    const CaseData data(c, dtype, dtype, stream.s);
    PathOptions opt;
    opt.stages = baseline.stages;
    StackPath path(data, opt, stream.s);
    path.poison();
    path.run();
    out.reference = path.output_host();
    out.reference_source =
        baseline.is_reference
            ? "reference path (cuBLAS GEMMs, dense attention, configuration 00000)"
            : "configuration " + stage_bits(baseline.stages) + " (attn only): " + baseline.reason;
  } catch (const DeviceOutOfMemory& e) {
    out.reference.clear();
    out.reference_omitted = std::string("out of device memory: ") + e.what();
  }
  return out;
}

safetensors::Metadata metadata_for(const CaseSpec& c, DType dtype, bool with_outputs,
                                   const Outputs* outputs) {
  const LayerShape& s = c.shape;
  safetensors::Metadata m = {
      {"format", "tlbench export: torch.nn.TransformerEncoder state_dict + input + outputs"},
      {"tool_version", TLBENCH_VERSION},
      {"git_commit", TLBENCH_GIT_COMMIT},
      {"case_id", std::to_string(c.id)},
      {"case_name", c.name},
      {"batch", std::to_string(s.batch)},
      {"seq", std::to_string(s.seq)},
      {"d_model", std::to_string(s.d_model)},
      {"heads", std::to_string(s.heads)},
      {"d_ff", std::to_string(s.d_ff)},
      {"layers", std::to_string(s.layers)},
      {"mask", std::string(to_string(s.mask))},
      {"activation", std::string(to_string(s.activation))},
      {"eps", fmt::format("{}", s.eps)},
      {"norm_first", "true"},
      {"batch_first", "true"},
      {"dtype", std::string(to_string(dtype))},
      {"seed", std::to_string(c.seed)},
  };
  if (s.mask == MaskKind::padding) m.emplace_back("valid_lens", nlohmann::json(s.valid_lens).dump());
  if (!with_outputs) {
    m.emplace_back("outputs", "none (exported with --no-outputs)");
    return m;
  }
  m.emplace_back("golden_output",
                 "fp32 IEEE end to end, attention streamed over keys, on the " +
                     std::string(to_string(dtype)) + "-rounded weights and input");
  if (!outputs->reference.empty()) {
    m.emplace_back("reference_output", outputs->reference_source);
    m.emplace_back("reference_vs_golden_rel_l2",
                   fmt::format("{:.6e}", rel_l2(outputs->reference, outputs->golden)));
  } else {
    m.emplace_back("reference_output", "omitted: " + outputs->reference_omitted);
  }
  return m;
}

}  // namespace

std::vector<ExportWeight> export_weights(const LayerShape& s) {
  const int64_t d = s.d_model, f = s.d_ff;
  std::vector<ExportWeight> w;
  for (uint32_t l = 0; l < static_cast<uint32_t>(s.layers); ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    w.push_back({p + "self_attn.in_proj_weight", l, TensorId::w_qkv, {3 * d, d}});
    w.push_back({p + "self_attn.in_proj_bias", l, TensorId::b_qkv, {3 * d}});
    w.push_back({p + "self_attn.out_proj.weight", l, TensorId::w_out, {d, d}});
    w.push_back({p + "self_attn.out_proj.bias", l, TensorId::b_out, {d}});
    w.push_back({p + "linear1.weight", l, TensorId::w_ff1, {f, d}});
    w.push_back({p + "linear1.bias", l, TensorId::b_ff1, {f}});
    w.push_back({p + "linear2.weight", l, TensorId::w_ff2, {d, f}});
    w.push_back({p + "linear2.bias", l, TensorId::b_ff2, {d}});
    w.push_back({p + "norm1.weight", l, TensorId::ln1_gamma, {d}});
    w.push_back({p + "norm1.bias", l, TensorId::ln1_beta, {d}});
    w.push_back({p + "norm2.weight", l, TensorId::ln2_gamma, {d}});
    w.push_back({p + "norm2.bias", l, TensorId::ln2_beta, {d}});
  }
  return w;
}

ExportSummary export_case(const CaseSpec& case_in, const ExportOptions& o, const std::string& path) {
  CaseSpec c = case_in;
  c.seed = data_seed(case_in, o.run_seed);
  const LayerShape& s = c.shape;
  if (s.d_model % s.heads != 0)
    throw ConfigError(fmt::format("case {}: heads {} do not divide d_model {}", c.id, s.heads, s.d_model));

  std::optional<Outputs> outputs;
  if (o.with_outputs) outputs = compute_outputs(c, o.dtype);

  const safetensors::Dtype file_dtype = safetensors::from_dtype(o.dtype);
  const std::vector<ExportWeight> weights = export_weights(s);
  std::vector<safetensors::TensorEntry> entries;
  for (const ExportWeight& w : weights) entries.push_back({w.name, file_dtype, w.shape});
  const std::vector<int64_t> activations = {s.batch, s.seq, s.d_model};
  entries.push_back({"input", file_dtype, activations});
  if (s.mask == MaskKind::padding)
    entries.push_back({"valid_lens", safetensors::Dtype::I32, {s.batch}});
  const bool with_reference = outputs && !outputs->reference.empty();
  if (with_reference) entries.push_back({"reference_output", file_dtype, activations});
  if (outputs) entries.push_back({"golden_output", safetensors::Dtype::F32, activations});

  safetensors::Writer writer(path, entries, metadata_for(c, o.dtype, o.with_outputs,
                                                         outputs ? &*outputs : nullptr));
  for (const ExportWeight& w : weights) {
    const TensorDist dist = tensor_dist(c.seed, static_cast<uint32_t>(c.id), w.layer, w.tensor,
                                        s.d_model, s.d_ff);
    uint64_t n = 1;
    for (int64_t d : w.shape) n *= static_cast<uint64_t>(d);
    write_generated(writer, dist, n, o.dtype);
  }
  write_generated(writer, tensor_dist(c.seed, static_cast<uint32_t>(c.id), 0, TensorId::input, s.d_model, s.d_ff),
                  static_cast<uint64_t>(s.tokens() * s.d_model), o.dtype);
  if (s.mask == MaskKind::padding) {
    const std::vector<int32_t> lens(s.valid_lens.begin(), s.valid_lens.end());
    writer.append(lens.data(), lens.size() * sizeof(int32_t));
  }
  if (with_reference) write_floats(writer, outputs->reference, o.dtype);
  if (outputs) write_floats(writer, outputs->golden, DType::fp32);

  ExportSummary sum;
  sum.path = path;
  sum.tensors = entries.size();
  sum.file_bytes = writer.finish();
  sum.seed = c.seed;
  if (outputs) {
    sum.reference_source = outputs->reference_source;
    sum.reference_omitted = outputs->reference_omitted;
    if (with_reference) sum.reference_vs_golden_rel_l2 = rel_l2(outputs->reference, outputs->golden);
  }
  return sum;
}

}  // namespace tlb
