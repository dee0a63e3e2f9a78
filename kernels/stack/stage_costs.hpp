// What each stage of one encoder layer must do at least: its FLOPs and the bytes it cannot
// avoid moving (every input read once and every output written once, in the path's dtype,
// the weights once per layer), and the floor those give at a GPU's ceilings. The stages are
// the layer's own, in order, whichever kernels run them (the fused techniques merge some of
// them into one kernel; their floors then add):
//
//   ln1       LayerNorm of the layer's input                    x -> normed
//   qkv       Q, K, V projection with its bias                  normed -> q, k, v
//   attn      softmax(Q K^T / sqrt(dh)) V over all heads        q, k, v -> o (no score matrix)
//   out_proj  output projection                                 o -> proj
//   ln2       bias and residual add, LayerNorm                  x, proj -> h1, normed
//   ffn_up    first FFN projection, bias, activation            normed -> hidden
//   ffn_down  second FFN projection, bias, residual add         hidden, h1 -> y
//
// These are the boundaries the layer stack times its stages at (StackPath::run_stage_events),
// in every configuration: the out-projection's bias and residual belong to ln2 (the fused
// add + LayerNorm applies them; the reference's bias kernel is the out-projection's). One
// exception moves work between layers: with norm on and ffn off, a layer's ffn_down is the
// bare product (hidden -> proj) and the next layer's ln1 adds its bias and residual
// (h1, proj -> y, normed): ResidualHandOff, and forward_stage_costs over the whole stack.
//
// FLOPs count the multiply-adds of the products as two (the attention's two products over
// all heads, halved under a causal mask, as forward_flops counts them) and nothing for the
// element-wise work, which is bound by its bytes. The GEMM and attention FLOPs of a layer's
// stages add up to forward_flops' per-layer share.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "common/types.hpp"

namespace tlb {

// A layer's stages in the order its forward runs them (each reads the one before's output).
enum class CostStage : int { ln1 = 0, qkv, attn, out_proj, ln2, ffn_up, ffn_down };
inline constexpr int kNumCostStages = 7;
std::string_view to_string(CostStage s);

struct StageCost {
  CostStage stage;
  double flops = 0;      // of one layer
  double min_bytes = 0;  // of one layer
  bool tensor = false;   // its FLOPs run on the matrix units (else it is element-wise)
};

// Whether a layer's ln1 takes the previous layer's bias and residual add, and whether its
// ffn_down gives its own to the next layer (StackPath::deferred_layers).
struct ResidualHandOff {
  bool takes = false, gives = false;
};

// One layer's stages in order, for `dtype` (fp32 moves 4-byte elements, fp16/bf16 two).
std::array<StageCost, kNumCostStages> layer_stage_costs(const LayerShape& s, DType dtype,
                                                        ResidualHandOff hand_off = {});
// The whole forward's stages: every layer's, summed, layer l giving its residual add to layer
// l + 1 where defers[l] (missing entries: false).
std::array<StageCost, kNumCostStages> forward_stage_costs(const LayerShape& s, DType dtype,
                                                          const std::vector<bool>& defers);

// A GPU's ceilings as measured: the matrix units' rate in the dtype and the copy bandwidth
// (bytes read plus bytes written per second).
struct Ceilings {
  double tensor_tflops = 0;
  double bandwidth_gbs = 0;
};

// The stage's floor in milliseconds at those ceilings: the longer of its FLOPs at the matrix
// rate (tensor stages) and its bytes at the bandwidth; 0 for a ceiling that is not positive.
double floor_ms(const StageCost& c, const Ceilings& k);
// How close a measured time came to its floor, floor / measured (1 = at the floor); NaN for a
// measured time that is not positive.
double floor_fraction(double floor, double measured_ms);

}  // namespace tlb
