// The operands each hand-written stage is launched with, built in one place: the layer stack
// launches exactly these, and the memory plan asks the kernels' *_supported() about the same
// calls (with stand-in pointers) to know which stages fall back, so both agree on the buffers.
#pragma once

#include <cmath>

#include "attention/attention.hpp"
#include "common/types.hpp"
#include "gemm/gemm.hpp"
#include "layernorm/add_layernorm.hpp"

namespace tlb {

inline float attention_scale(const LayerShape& s) {
  return 1.0f / std::sqrt(static_cast<float>(s.head_dim()));
}

// qkv: [T, d] · Wqkv[3d, d]^T + bqkv, scattered to q, k, v in [batch, heads, seq, head_dim].
// The part every projection shares: out[M, N] = epilogue(A[M, K] · W[N, K]^T + bias).
inline GemmArgs linear_args(DType dt, Fp32Math math, GemmEpilogue epilogue, int64_t M, int64_t N,
                            int64_t K, const void* a, const void* w, const void* bias) {
  GemmArgs g;
  g.dtype = dt;
  g.fp32_math = math;
  g.epilogue = epilogue;
  g.M = M;
  g.N = N;
  g.K = K;
  g.A = a;
  g.W = w;
  g.bias = bias;
  return g;
}

inline GemmArgs qkv_gemm_args(const LayerShape& s, DType dt, Fp32Math math, const void* a,
                              const void* w_qkv, const void* b_qkv, void* q, void* k, void* v) {
  GemmArgs g = linear_args(dt, math, GemmEpilogue::bias_qkv_split, s.tokens(), 3 * s.d_model,
                           s.d_model, a, w_qkv, b_qkv);
  g.q = q;
  g.k = k;
  g.v = v;
  g.batch = s.batch;
  g.seq = s.seq;
  g.heads = s.heads;
  g.head_dim = s.head_dim();
  return g;
}

// ffn up: hidden[T, d_ff] = act(a · W1^T + b1).
inline GemmArgs ffn_up_args(const LayerShape& s, DType dt, Fp32Math math, const void* a,
                            const void* w1, const void* b1, void* hidden) {
  GemmArgs g = linear_args(dt, math, GemmEpilogue::bias_activation, s.tokens(), s.d_ff,
                           s.d_model, a, w1, b1);
  g.activation = s.activation;
  g.out = hidden;
  return g;
}

// ffn down: y[T, d] = residual + hidden · W2^T + b2.
inline GemmArgs ffn_down_args(const LayerShape& s, DType dt, Fp32Math math, const void* hidden,
                              const void* w2, const void* b2, const void* residual, void* y) {
  GemmArgs g = linear_args(dt, math, GemmEpilogue::bias_residual, s.tokens(), s.d_model, s.d_ff,
                           hidden, w2, b2);
  g.residual = residual;
  g.out = y;
  return g;
}

// out-projection (hand-written in layers where attn is): proj[T, d] = attn_out · Wo^T, plus
// bo when given (bias == nullptr leaves bo to the fused add + LayerNorm after it).
inline GemmArgs out_proj_args(const LayerShape& s, DType dt, Fp32Math math, const void* attn_out,
                              const void* w_out, const void* bias, void* proj) {
  GemmArgs g = linear_args(dt, math, GemmEpilogue::bias, s.tokens(), s.d_model, s.d_model,
                           attn_out, w_out, bias);
  g.out = proj;
  return g;
}

// norm: resid_out = x + delta + bias (when delta is given), norm_out = LN(resid).
inline AddNormArgs add_norm_args(const LayerShape& s, DType dt, const void* x, const void* delta,
                                 const void* bias, void* resid_out, void* norm_out,
                                 const void* gamma, const void* beta) {
  AddNormArgs n;
  n.dtype = dt;
  n.rows = s.tokens();
  n.cols = s.d_model;
  n.x = x;
  n.delta = delta;
  n.bias = bias;
  n.resid_out = resid_out;
  n.norm_out = norm_out;
  n.gamma = gamma;
  n.beta = beta;
  n.eps = s.eps;
  n.rsqrt = default_rsqrt_kind();
  return n;
}

inline AttentionArgs flash_args(const LayerShape& s, DType dt, Fp32Math math,
                                const int* valid_lens, const void* q, const void* k,
                                const void* v, void* o, void* workspace) {
  AttentionArgs a;
  a.dtype = dt;
  a.fp32_math = math;
  a.batch = s.batch;
  a.heads = s.heads;
  a.seq = s.seq;
  a.head_dim = s.head_dim();
  a.mask = s.mask;
  a.valid_lens = valid_lens;
  a.q = q;
  a.k = k;
  a.v = v;
  a.o = o;
  a.scale = attention_scale(s);
  a.workspace = workspace;
  return a;
}

}  // namespace tlb
