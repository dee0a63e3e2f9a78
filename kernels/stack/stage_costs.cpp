#include "stack/stage_costs.hpp"

#include <algorithm>
#include <limits>

namespace tlb {

std::string_view to_string(CostStage s) {
  switch (s) {
    case CostStage::ln1: return "ln1";
    case CostStage::qkv: return "qkv";
    case CostStage::attn: return "attn";
    case CostStage::out_proj: return "out_proj";
    case CostStage::ln2: return "ln2";
    case CostStage::ffn_up: return "ffn_up";
    case CostStage::ffn_down: return "ffn_down";
  }
  return "?";
}

std::array<StageCost, kNumCostStages> layer_stage_costs(const LayerShape& s, DType dtype) {
  const double e = static_cast<double>(dtype_bytes(dtype));
  const double T = static_cast<double>(s.tokens()), d = static_cast<double>(s.d_model);
  const double f = static_cast<double>(s.d_ff), B = static_cast<double>(s.batch), S = static_cast<double>(s.seq);
  const double act = T * d * e;  // one [tokens, d_model] activation
  // A LayerNorm reads its input and gamma and beta, and writes its output.
  const double norm_bytes = 2 * act + 2 * d * e;
  // A projection [T x k] x [k x n] + bias reads A, W and the bias and writes [T x n]; with
  // the residual it also reads one [T x n].
  auto gemm_bytes = [&](double k, double n, bool residual) {
    return (T * k + k * n + n + T * n * (residual ? 2 : 1)) * e;
  };
  double attn_flops = 4.0 * B * S * S * d;
  if (s.mask == MaskKind::causal) attn_flops *= 0.5;
  return {{
      {CostStage::ln1, 0, norm_bytes, false},
      {CostStage::qkv, 2 * T * d * 3 * d, gemm_bytes(d, 3 * d, false), true},
      {CostStage::attn, attn_flops, 4 * act, true},  // q, k, v read, o written
      {CostStage::out_proj, 2 * T * d * d, gemm_bytes(d, d, true), true},
      {CostStage::ln2, 0, norm_bytes, false},
      {CostStage::ffn_up, 2 * T * d * f, gemm_bytes(d, f, false), true},
      {CostStage::ffn_down, 2 * T * f * d, gemm_bytes(f, d, true), true},
  }};
}

double floor_ms(const StageCost& c, const Ceilings& k) {
  const double compute = c.tensor && k.tensor_tflops > 0 ? c.flops / (k.tensor_tflops * 1e12) : 0;
  const double memory = k.bandwidth_gbs > 0 ? c.min_bytes / (k.bandwidth_gbs * 1e9) : 0;
  return std::max(compute, memory) * 1e3;
}

double floor_fraction(double floor, double measured_ms) {
  if (!(measured_ms > 0)) return std::numeric_limits<double>::quiet_NaN();
  return floor / measured_ms;
}

}  // namespace tlb
