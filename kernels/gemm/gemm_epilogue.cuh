// The fused GEMM epilogue, shared by every GEMM kernel: bias, bias + activation, bias +
// residual, or bias + QKV head split, applied in fp32 to one 16-byte run of output columns
// and rounded once to the output dtype.
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/dtype_traits.cuh"
#include "common/gelu_branch_free.hpp"
#include "gemm/gemm.hpp"

namespace tlb::gemm_detail {

__device__ __forceinline__ float activate(float x, Activation act) {
  switch (act) {
    case Activation::gelu: return gelu_branch_free(x);
    case Activation::gelu_tanh: return gelu_tanh_logistic(x);
    default: return fmaxf(x, 0.0f);
  }
}

// The 16-byte run at `src` as floats (read-only path), or zeros where src is null.
template <typename T>
__device__ __forceinline__ void load_run_or_zeros(const T* src, float (&v)[Pack16<T>::kCount]) {
  if (src != nullptr) {
    Pack16<T>::load_nc(src).to_floats(v);
  } else {
#pragma unroll
    for (int i = 0; i < Pack16<T>::kCount; ++i) v[i] = 0.0f;
  }
}

// The bias of output columns n..n+kCount-1 as floats (zeros without a bias). A thread that
// stores the same columns of many rows loads it once.
template <typename T>
__device__ __forceinline__ void load_bias_run(const GemmArgs& p, int64_t n, float (&b)[Pack16<T>::kCount]) {
  load_run_or_zeros<T>(p.bias != nullptr ? static_cast<const T*>(p.bias) + n : nullptr, b);
}

// The activation of every element of a run. The switch is outside the element loop: inside,
// each element would get its own branch and the run's elements their evaluation one after
// the other (the GELU's chain of dependent FMAs, eight times over, where the loop out here
// runs them side by side).
template <int kCount>
__device__ __forceinline__ void activate_run(float (&acc)[kCount], Activation act) {
  switch (act) {
    case Activation::gelu:
#pragma unroll
      for (int i = 0; i < kCount; ++i) acc[i] = activate(acc[i], Activation::gelu);
      break;
    case Activation::gelu_tanh:
#pragma unroll
      for (int i = 0; i < kCount; ++i) acc[i] = activate(acc[i], Activation::gelu_tanh);
      break;
    default:
#pragma unroll
      for (int i = 0; i < kCount; ++i) acc[i] = activate(acc[i], Activation::relu);
  }
}

// The epilogue's arithmetic on kCount consecutive columns of one row, in place: the bias,
// then the activation (bias_activation) or the residual (bias_residual). `bias` and
// `residual` are those columns' operands, already in registers (ignored where unused).
template <int kCount>
__device__ __forceinline__ void apply_epilogue(const GemmArgs& p, float (&acc)[kCount], const float (&bias)[kCount],
                                               const float (&residual)[kCount]) {
  if (p.bias != nullptr) {
#pragma unroll
    for (int i = 0; i < kCount; ++i) acc[i] += bias[i];
  }
  if (p.epilogue == GemmEpilogue::bias_activation) {
    activate_run(acc, p.activation);
  } else if (p.epilogue == GemmEpilogue::bias_residual) {
#pragma unroll
    for (int i = 0; i < kCount; ++i) acc[i] += residual[i];
  }
}

// Where output element (m, n) goes, in two parts, so that a thread storing many rows of the
// same columns works out the column's part once: element (m, n) is at
// epilogue_column<T>(p, n) + epilogue_row_offset(p, m). For the plain epilogues that is
// out[m][n]; for the head split, column n of the packed [q | k | v] product and row
// m = b * seq + s go to q, k or v [b][head][s][dim]. A 16-byte run (n % 8 == 0) never
// straddles a head (head_dim % 8 == 0). The divisions and strides are the dispatcher's
// QkvSplitMap (gemm_fused_supported keeps M and N at most 2^30, so indices fit 31 bits).
template <typename T>
__device__ __forceinline__ T* epilogue_column(const GemmArgs& p, int64_t n) {
  if (p.epilogue != GemmEpilogue::bias_qkv_split) return static_cast<T*>(p.out) + n;
  const QkvSplitMap& map = p.split;
  const auto n32 = static_cast<uint32_t>(n);
  const uint32_t which = map.width.div(n32), within = n32 - which * map.width.divisor;
  const uint32_t head = map.head_dim.div(within), dim = within - head * map.head_dim.divisor;
  T* base = static_cast<T*>(which == 0 ? p.q : which == 1 ? p.k : p.v);
  return base + head * map.head_stride + dim;
}
__device__ __forceinline__ int64_t epilogue_row_offset(const GemmArgs& p, int64_t m) {
  if (p.epilogue != GemmEpilogue::bias_qkv_split) return m * p.N;
  const QkvSplitMap& map = p.split;
  const auto m32 = static_cast<uint32_t>(m);
  const uint32_t b = map.seq.div(m32), s = m32 - b * map.seq.divisor;
  return b * map.batch_stride + static_cast<int64_t>(s) * map.head_dim.divisor;
}

// Applies the epilogue to acc[0..kCount) = columns n..n+kCount-1 of row m and stores them,
// with every operand it adds already in registers: that run's bias (load_bias_run) and, for
// bias_residual, row m's residual run (ignored otherwise). Callers guarantee m < M, n < N and
// n % kCount == 0; since N % 8 == 0 the whole run is in bounds.
template <typename T>
__device__ __forceinline__ void epilogue_store_loaded(const GemmArgs& p, int64_t m, int64_t n,
                                                      float (&acc)[Pack16<T>::kCount],
                                                      const float (&bias)[Pack16<T>::kCount],
                                                      const float (&residual)[Pack16<T>::kCount]) {
  apply_epilogue(p, acc, bias, residual);
  Pack16<T>::from_floats(acc).store(epilogue_column<T>(p, n) + epilogue_row_offset(p, m));
}

// Row m's residual run at columns n.. as floats, for bias_residual (zeros otherwise).
template <typename T>
__device__ __forceinline__ void load_residual_run(const GemmArgs& p, int64_t m, int64_t n,
                                                  float (&r)[Pack16<T>::kCount]) {
  load_run_or_zeros<T>(
      p.epilogue == GemmEpilogue::bias_residual ? static_cast<const T*>(p.residual) + m * p.N + n : nullptr, r);
}

// The same, loading the residual itself.
template <typename T>
__device__ __forceinline__ void epilogue_store_biased(const GemmArgs& p, int64_t m, int64_t n,
                                                      float (&acc)[Pack16<T>::kCount],
                                                      const float (&bias)[Pack16<T>::kCount]) {
  float r[Pack16<T>::kCount];
  load_residual_run<T>(p, m, n, r);
  epilogue_store_loaded<T>(p, m, n, acc, bias, r);
}

// The same, loading the bias itself: for callers that store each run once.
template <typename T>
__device__ __forceinline__ void epilogue_store(const GemmArgs& p, int64_t m, int64_t n,
                                               float (&acc)[Pack16<T>::kCount]) {
  float bias[Pack16<T>::kCount];
  load_bias_run<T>(p, n, bias);
  epilogue_store_biased<T>(p, m, n, acc, bias);
}

// kCount staged floats at `src` (16-byte aligned) into registers.
template <typename T>
__device__ __forceinline__ void load_staged_run(const float* src, float (&v)[Pack16<T>::kCount]) {
#pragma unroll
  for (int e = 0; e < Pack16<T>::kCount; e += 4) {
    const float4 f = *reinterpret_cast<const float4*>(src + e);
    v[e] = f.x;
    v[e + 1] = f.y;
    v[e + 2] = f.z;
    v[e + 3] = f.w;
  }
}

// Both tensor-core GEMMs stage their fp32 accumulators in shared memory so that each thread
// then owns one 16-byte output run: this applies the epilogue to the staged run at `src`
// (kCount floats, 16-byte aligned) for row m, columns n.., where they are inside the output.
template <typename T>
__device__ __forceinline__ void epilogue_store_staged(const GemmArgs& p, int64_t m, int64_t n,
                                                      const float* src) {
  if (m < p.M && n < p.N) {
    float v[Pack16<T>::kCount];
    load_staged_run<T>(src, v);
    epilogue_store<T>(p, m, n, v);
  }
}

// The epilogue as one compile-time operation, for kernels that instantiate their epilogue per
// operation instead of branching on GemmArgs per element (the ping-pong GEMM): the branches
// then vanish from the store loop and every element of a thread's runs is free to be computed
// side by side.
enum class EpilogueOp { bias, gelu, gelu_tanh, relu, residual, qkv_split };

template <EpilogueOp kOp>
using EpilogueOpTag = std::integral_constant<EpilogueOp, kOp>;

// Calls f(EpilogueOpTag<op>{}) with the operation `p` asks for.
template <typename F>
__host__ __forceinline__ decltype(auto) dispatch_epilogue_op(const GemmArgs& p, F&& f) {
  switch (p.epilogue) {
    case GemmEpilogue::bias_activation:
      switch (p.activation) {
        case Activation::gelu: return f(EpilogueOpTag<EpilogueOp::gelu>{});
        case Activation::gelu_tanh: return f(EpilogueOpTag<EpilogueOp::gelu_tanh>{});
        default: return f(EpilogueOpTag<EpilogueOp::relu>{});
      }
    case GemmEpilogue::bias_residual: return f(EpilogueOpTag<EpilogueOp::residual>{});
    case GemmEpilogue::bias_qkv_split: return f(EpilogueOpTag<EpilogueOp::qkv_split>{});
    default: return f(EpilogueOpTag<EpilogueOp::bias>{});
  }
}

// apply_epilogue for one operation: acc += bias (zeros without one), then the activation or
// the residual.
template <EpilogueOp kOp, int kCount>
__device__ __forceinline__ void apply_epilogue_op(float (&acc)[kCount], const float (&bias)[kCount],
                                                  const float (&residual)[kCount]) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) {
    const float x = acc[i] + bias[i];
    if constexpr (kOp == EpilogueOp::gelu) {
      acc[i] = activate(x, Activation::gelu);
    } else if constexpr (kOp == EpilogueOp::gelu_tanh) {
      acc[i] = activate(x, Activation::gelu_tanh);
    } else if constexpr (kOp == EpilogueOp::relu) {
      acc[i] = activate(x, Activation::relu);
    } else if constexpr (kOp == EpilogueOp::residual) {
      acc[i] = x + residual[i];
    } else {
      acc[i] = x;
    }
  }
}

}  // namespace tlb::gemm_detail
