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

std::array<StageCost, kNumCostStages> layer_stage_costs(const LayerShape& s, DType dtype, ResidualHandOff hand_off) {
  const double e = static_cast<double>(dtype_bytes(dtype));
  const double T = static_cast<double>(s.tokens()), d = static_cast<double>(s.d_model);
  const double f = static_cast<double>(s.d_ff), B = static_cast<double>(s.batch), S = static_cast<double>(s.seq);
  const double act = T * d * e;  // one [tokens, d_model] activation
  // A LayerNorm reads its input and gamma and beta, and writes its output; one that first adds
  // a residual and a bias also reads the second input and the bias and writes the sum.
  const double norm_bytes = 2 * act + 2 * d * e;
  const double add_norm_bytes = 4 * act + 3 * d * e;
  // A projection [T x k] x [k x n] reads A and W and writes [T x n]; with its bias it reads
  // [n] more, with the residual one [T x n] more.
  auto gemm_bytes = [&](double k, double n, bool bias, bool residual) {
    return (T * k + k * n + (bias ? n : 0) + T * n * (residual ? 2 : 1)) * e;
  };
  double attn_flops = 4.0 * B * S * S * d;
  if (s.mask == MaskKind::causal) attn_flops *= 0.5;
  return {{
      {CostStage::ln1, 0, hand_off.takes ? add_norm_bytes : norm_bytes, false},
      {CostStage::qkv, 2 * T * d * 3 * d, gemm_bytes(d, 3 * d, true, false), true},
      {CostStage::attn, attn_flops, 4 * act, true},  // q, k, v read, o written
      {CostStage::out_proj, 2 * T * d * d, gemm_bytes(d, d, false, false), true},
      {CostStage::ln2, 0, add_norm_bytes, false},
      {CostStage::ffn_up, 2 * T * d * f, gemm_bytes(d, f, true, false), true},
      {CostStage::ffn_down, 2 * T * f * d, gemm_bytes(f, d, !hand_off.gives, !hand_off.gives), true},
  }};
}

std::array<StageCost, kNumCostStages> forward_stage_costs(const LayerShape& s, DType dtype,
                                                          const std::vector<bool>& defers) {
  std::array<StageCost, kNumCostStages> total = layer_stage_costs(s, dtype);
  for (StageCost& c : total) c.flops = c.min_bytes = 0;
  for (int64_t l = 0; l < s.layers; ++l) {
    auto deferred = [&](int64_t i) { return i >= 0 && static_cast<size_t>(i) < defers.size() && defers[static_cast<size_t>(i)]; };
    const auto layer = layer_stage_costs(s, dtype, {deferred(l - 1), deferred(l)});
    for (size_t i = 0; i < total.size(); ++i) {
      total[i].flops += layer[i].flops;
      total[i].min_bytes += layer[i].min_bytes;
    }
  }
  return total;
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
