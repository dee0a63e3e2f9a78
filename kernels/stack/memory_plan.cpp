#include "stack/memory_plan.hpp"

#include <algorithm>

#include <cstdint>
#include <string>

#include "attention/attention.hpp"
#include "gemm/gemm_cublas.hpp"
#include "stack/stage_args.hpp"

namespace tlb {
namespace {

// The support checks look at shapes, dtypes, alignment and overlap, never at memory: stand-ins
// 1 TiB apart (no tensor is that large, so none overlap) and aligned like the workspace's
// sub-buffers describe the stack's calls.
void* probe(uintptr_t i) { return reinterpret_cast<void*>(i << 40); }

}  // namespace

std::vector<bool> fused_layers(const std::string& policy, int64_t layers) {
  std::vector<bool> f(static_cast<size_t>(layers), true);
  if (policy.size() == static_cast<size_t>(layers))
    for (int64_t l = 0; l < layers; ++l) f[static_cast<size_t>(l)] = policy[static_cast<size_t>(l)] != 'E';
  return f;
}

std::vector<StageFallback> stage_fallbacks(const LayerShape& s, DType dtype, const StageSwitch& wanted,
                                           Fp32Math fp32_math) {
  std::vector<StageFallback> out;
  std::string why;
  auto check = [&](Stage st, bool supported, const std::string& part = "") {
    if (!supported) out.push_back({st, part + why});
    why.clear();
  };
  if (wanted[Stage::qkv])
    check(Stage::qkv, gemm_fused_supported(qkv_gemm_args(s, dtype, fp32_math, probe(1), probe(2), probe(3),
                                                         probe(4), probe(5), probe(6)), &why));
  if (wanted[Stage::attn]) check(Stage::attn, flash_attention_supported(s, dtype, &why));
  if (wanted[Stage::ffn]) {
    if (!gemm_fused_supported(ffn_up_args(s, dtype, fp32_math, probe(1), probe(2), probe(3), probe(4)), &why))
      check(Stage::ffn, false, "up projection: ");
    else
      check(Stage::ffn, gemm_fused_supported(ffn_down_args(s, dtype, fp32_math, probe(4), probe(5), probe(6),
                                                           probe(7), probe(8)), &why),
            "down projection: ");
  }
  if (wanted[Stage::norm]) {
    // Both forms the stack launches: normalise only (LN1), and add + bias + normalise.
    if (!add_layernorm_supported(add_norm_args(s, dtype, probe(1), nullptr, nullptr, nullptr, probe(2),
                                               probe(3), probe(4)), &why))
      check(Stage::norm, false);
    else
      check(Stage::norm, add_layernorm_supported(add_norm_args(s, dtype, probe(1), probe(5), probe(6), probe(7),
                                                               probe(2), probe(3), probe(4)), &why));
  }
  return out;
}

StageSwitch effective_stages(const LayerShape& s, DType dtype, const StageSwitch& wanted,
                             std::vector<std::string>* notes, Fp32Math fp32_math) {
  StageSwitch eff = wanted;
  for (const StageFallback& f : stage_fallbacks(s, dtype, wanted, fp32_math)) {
    eff[f.stage] = false;
    if (notes) notes->push_back(std::string(to_string(f.stage)) + ": " + f.why);
  }
  return eff;
}

bool out_projection_fused(const LayerShape& s, DType dtype, const StageSwitch& eff,
                          Fp32Math fp32_math, std::string* why) {
  if (!eff[Stage::attn]) return false;
  if (s.tokens() * s.d_model > kOutProjectionOursMaxOutputs) {
    if (why) *why = "cuBLAS is faster at this size";
    return false;
  }
  return gemm_fused_supported(out_proj_args(s, dtype, fp32_math, probe(1), probe(2), probe(3), probe(4)), why);
}

std::vector<BufferSpec> data_layout(const LayerShape& s, DType storage) {
  const uint64_t e = static_cast<uint64_t>(dtype_bytes(storage));
  const uint64_t d = static_cast<uint64_t>(s.d_model), f = static_cast<uint64_t>(s.d_ff);
  const uint64_t L = static_cast<uint64_t>(s.layers), T = static_cast<uint64_t>(s.tokens());
  const uint64_t per_layer = (3 * d * d + 3 * d) + (d * d + d) + (f * d + f) + (d * f + d) + 4 * d;
  return {
      {"weights", per_layer * L * e},
      {"input", T * d * e},
      {"valid_lens", static_cast<uint64_t>(s.batch) * sizeof(int)},
  };
}

std::vector<BufferSpec> workspace_layout(const LayerShape& s, DType dtype,
                                         const StageSwitch& stages, const std::string& policy,
                                         bool golden, bool keep_layer_outputs,
                                         Fp32Math fp32_math) {
  const DType work = golden ? DType::fp32 : dtype;
  const uint64_t e = static_cast<uint64_t>(dtype_bytes(work));
  const uint64_t d = static_cast<uint64_t>(s.d_model), f = static_cast<uint64_t>(s.d_ff);
  const uint64_t T = static_cast<uint64_t>(s.tokens());
  const uint64_t B = static_cast<uint64_t>(s.batch), H = static_cast<uint64_t>(s.heads);
  const uint64_t S = static_cast<uint64_t>(s.seq), L = static_cast<uint64_t>(s.layers);

  const std::vector<bool> fused = fused_layers(policy, s.layers);
  const StageSwitch eff =
      golden ? StageSwitch{} : effective_stages(s, dtype, stages, nullptr, fp32_math);
  const bool out_proj_ours = !golden && out_projection_fused(s, dtype, eff, fp32_math);
  bool any_reference_attn = false, any_flash_attn = false, any_f32_qkv = false;
  bool any_f32_out_proj = false, any_reference_ffn = false;
  // A fused QKV on cuBLAS keeps its product in fp32 before the split.
  const bool qkv_product =
      eff[Stage::qkv] && gemm_technique_needs_product(qkv_gemm_args(s, dtype, fp32_math, probe(1), probe(2),
                                                                    probe(3), probe(4), probe(5), probe(6)));
  for (bool fl : fused) {
    const bool flash = fl && eff[Stage::attn];
    any_flash_attn |= flash;
    any_reference_attn |= !flash;
    any_f32_qkv |= !(fl && eff[Stage::qkv]) || qkv_product;
    // cuBLAS's out-projection feeding the reference bias kernel keeps its product in fp32.
    any_f32_out_proj |= !(fl && eff[Stage::norm]) && !(fl && out_proj_ours);
    any_reference_ffn |= !(fl && eff[Stage::ffn]);
  }

  std::vector<BufferSpec> b = {
      {"stream_a", T * d * e},   // layer outputs ping-pong between stream_a and stream_b
      {"stream_b", T * d * e},
      {"normed", T * d * e},     // LN1 / LN2 output
      {"q", T * d * e},          // [batch, heads, seq, head_dim]
      {"k", T * d * e},
      {"v", T * d * e},
      {"attn_out", T * d * e},   // [batch, seq, d], heads concatenated
      {"h1", T * d * e},         // residual stream after attention
      {"proj", T * d * e},       // out- and down-projection products before bias/residual
      {"ffn_hidden", T * f * e},
  };
  // The reference's cuBLAS products in fp32, before its bias kernels round them once: the
  // packed q/k/v [T, 3d] (also a fused QKV's on cuBLAS), the FFN up [T, d_ff], the out- and
  // down-projections [T, d].
  uint64_t gemm_cols = 0;
  if (any_f32_qkv) gemm_cols = std::max(gemm_cols, 3 * d);
  if (any_reference_ffn) gemm_cols = std::max(gemm_cols, f);
  if (any_f32_out_proj || any_reference_ffn) gemm_cols = std::max(gemm_cols, d);
  if (gemm_cols > 0) b.push_back({"gemm_f32", T * gemm_cols * sizeof(float)});
  if (!golden) {
    if (any_reference_attn) {
      // fp32 scores; the probabilities in the dtype beside them (in place for fp32).
      b.push_back({"scores", B * H * S * S * sizeof(float)});
      if (dtype != DType::fp32) b.push_back({"probs", B * H * S * S * e});
      // The batched P·V GEMM's per-head operand pointers (V, P, O for each batch and head).
      b.push_back({"attn_pv_pointers", 3 * B * H * sizeof(void*)});
    }
    if (any_flash_attn) b.push_back({"flash_workspace", flash_attention_workspace_bytes(s, dtype)});
  }
  // The golden's streamed attention keeps its softmax statistics in registers: no scratch.
  if (keep_layer_outputs) b.push_back({"layer_outputs", L * T * d * e});
  return b;
}

uint64_t total_bytes(const std::vector<BufferSpec>& b) {
  uint64_t t = 0;
  for (const auto& x : b) t += x.bytes;
  return t;
}

uint64_t aligned_total_bytes(const std::vector<BufferSpec>& b) {
  uint64_t t = 0;
  for (const auto& x : b) t += (x.bytes + kBufferAlign - 1) / kBufferAlign * kBufferAlign;
  return t;
}

CaseMemory case_memory(const LayerShape& s, DType dtype) {
  CaseMemory m;
  m.data = aligned_total_bytes(data_layout(s, dtype));
  const uint64_t e = static_cast<uint64_t>(dtype_bytes(dtype));
  const uint64_t per_score = sizeof(float) + (dtype == DType::fp32 ? 0 : e);
  m.scores = static_cast<uint64_t>(s.batch * s.heads) * static_cast<uint64_t>(s.seq) *
             static_cast<uint64_t>(s.seq) * per_score;
  m.reference_path = aligned_total_bytes(workspace_layout(s, dtype, StageSwitch{}, ""));
  m.golden_peak = aligned_total_bytes(data_layout(s, DType::fp32)) +
                  aligned_total_bytes(workspace_layout(s, dtype, StageSwitch{}, "", true));
  return m;
}

uint64_t point_peak_bytes(const LayerShape& s, DType dtype, const StageSwitch& baseline,
                          const StageSwitch& candidate, const std::string& policy, Fp32Math fp32_math,
                          bool keep_layer_outputs) {
  return aligned_total_bytes(data_layout(s, dtype)) +
         aligned_total_bytes(workspace_layout(s, dtype, baseline, "", false, false, fp32_math)) +
         aligned_total_bytes(workspace_layout(s, dtype, candidate, policy, false, keep_layer_outputs, fp32_math)) +
         2 * kCublasWorkspaceBytes;
}

double forward_flops(const LayerShape& s) {
  const double T = static_cast<double>(s.tokens()), d = static_cast<double>(s.d_model);
  const double f = static_cast<double>(s.d_ff), S = static_cast<double>(s.seq);
  const double B = static_cast<double>(s.batch);
  const double gemms = 2.0 * T * (3 * d * d + d * d + 2 * d * f);
  double attn = 4.0 * B * S * S * d;  // q k^T and p v over all heads
  if (s.mask == MaskKind::causal) attn *= 0.5;
  return static_cast<double>(s.layers) * (gemms + attn);
}

}  // namespace tlb
