// Accuracy reductions: candidate vs same-dtype reference (max abs/rel error, tolerance
// violations, NaN/Inf counts) and candidate vs fp32 golden (fp64 sums for relative L2).
// One grid-stride pass per comparison, per-block partials; any n, every dtype.
#include "accuracy/compare.hpp"

#include <cstdint>

#include "common/cuda_check.hpp"
#include "common/dtype_traits.cuh"

namespace tlb {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

__device__ __forceinline__ double warp_max(double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ unsigned long long warp_sum(unsigned long long v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    compare_to_reference_kernel(const T* __restrict__ cand, const T* __restrict__ ref, size_t n,
                                double atol, double rtol, CompareBlockPartial* partials) {
  double max_abs = 0, max_rel = 0;
  unsigned long long violations = 0, cand_nan = 0, cand_inf = 0, ref_nonfinite = 0;
  // A zero atol must not turn the relative error of an exact zero into 0/0.
  const double rel_floor = atol > 0 ? atol : 1e-30;
  for (size_t i = blockIdx.x * static_cast<size_t>(kThreads) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * kThreads) {
    const double c = to_float(cand[i]);
    const double r = to_float(ref[i]);
    if (isnan(c)) ++cand_nan;
    else if (isinf(c)) ++cand_inf;
    if (!isfinite(r)) ++ref_nonfinite;
    const double diff = fabs(c - r);
    // Written so that a NaN anywhere makes the element a violation; no FMA contraction, so the
    // bound is the one a host computes and a boundary element is judged the same everywhere.
    if (!(diff <= __dadd_rn(atol, __dmul_rn(rtol, fabs(r))))) ++violations;
    if (isfinite(c) && isfinite(r)) {
      max_abs = fmax(max_abs, diff);
      max_rel = fmax(max_rel, diff / fmax(fabs(r), rel_floor));
    }
  }
  __shared__ double s_abs[kWarps], s_rel[kWarps];
  __shared__ unsigned long long s_cnt[4][kWarps];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  max_abs = warp_max(max_abs);
  max_rel = warp_max(max_rel);
  violations = warp_sum(violations);
  cand_nan = warp_sum(cand_nan);
  cand_inf = warp_sum(cand_inf);
  ref_nonfinite = warp_sum(ref_nonfinite);
  if (lane == 0) {
    s_abs[warp] = max_abs;
    s_rel[warp] = max_rel;
    s_cnt[0][warp] = violations;
    s_cnt[1][warp] = cand_nan;
    s_cnt[2][warp] = cand_inf;
    s_cnt[3][warp] = ref_nonfinite;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    CompareBlockPartial p;
    for (int w = 0; w < kWarps; ++w) {
      p.max_abs = fmax(p.max_abs, s_abs[w]);
      p.max_rel = fmax(p.max_rel, s_rel[w]);
      p.violations += s_cnt[0][w];
      p.cand_nan += s_cnt[1][w];
      p.cand_inf += s_cnt[2][w];
      p.ref_nonfinite += s_cnt[3][w];
    }
    partials[blockIdx.x] = p;
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    compare_to_golden_kernel(const T* __restrict__ cand, const float* __restrict__ golden,
                             size_t n, GoldenBlockPartial* partials) {
  double err_sq = 0, golden_sq = 0;
  unsigned long long cand_nan = 0, cand_inf = 0;
  for (size_t i = blockIdx.x * static_cast<size_t>(kThreads) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * kThreads) {
    const double c = to_float(cand[i]);
    const double g = golden[i];
    if (isnan(c)) ++cand_nan;
    else if (isinf(c)) ++cand_inf;
    err_sq += (c - g) * (c - g);
    golden_sq += g * g;
  }
  __shared__ double s_sum[2][kWarps];
  __shared__ unsigned long long s_cnt[2][kWarps];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  err_sq = warp_sum(err_sq);
  golden_sq = warp_sum(golden_sq);
  cand_nan = warp_sum(cand_nan);
  cand_inf = warp_sum(cand_inf);
  if (lane == 0) {
    s_sum[0][warp] = err_sq;
    s_sum[1][warp] = golden_sq;
    s_cnt[0][warp] = cand_nan;
    s_cnt[1][warp] = cand_inf;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    GoldenBlockPartial p;
    for (int w = 0; w < kWarps; ++w) {
      p.err_sq += s_sum[0][w];
      p.golden_sq += s_sum[1][w];
      p.cand_nan += s_cnt[0][w];
      p.cand_inf += s_cnt[1][w];
    }
    partials[blockIdx.x] = p;
  }
}

}  // namespace

int compare_block_count(size_t n) {
  if (n == 0) return 0;
  // Four elements per thread at least, so small outputs do not launch idle blocks; the cap
  // keeps the host-side reduction tiny and the block count independent of the GPU.
  const size_t per_block = static_cast<size_t>(kThreads) * 4;
  const size_t blocks = (n + per_block - 1) / per_block;
  return static_cast<int>(blocks < kCompareMaxBlocks ? blocks : kCompareMaxBlocks);
}

void launch_compare_to_reference(const void* cand, const void* ref, DType dtype, size_t n,
                                 double atol, double rtol, CompareBlockPartial* partials,
                                 cudaStream_t stream) {
  const int blocks = compare_block_count(n);
  if (blocks == 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    compare_to_reference_kernel<T><<<blocks, kThreads, 0, stream>>>(
        static_cast<const T*>(cand), static_cast<const T*>(ref), n, atol, rtol, partials);
  });
  TLB_LAUNCH_CHECK(stream);
}

void launch_compare_to_golden(const void* cand, DType dtype, const float* golden, size_t n,
                              GoldenBlockPartial* partials, cudaStream_t stream) {
  const int blocks = compare_block_count(n);
  if (blocks == 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    compare_to_golden_kernel<T><<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(cand),
                                                                 golden, n, partials);
  });
  TLB_LAUNCH_CHECK(stream);
}

}  // namespace tlb
