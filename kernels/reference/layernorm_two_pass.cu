// Reference two-pass LayerNorm: one block per row (grid-stride over rows); pass 1 sums for the
// mean, pass 2 sums squared deviations from it (no E[x^2] - mean^2 cancellation), pass 3
// writes. fp32 statistics for every dtype; any row length, 16-byte accesses when aligned.
#include "reference/layernorm_two_pass.hpp"

#include "common/cuda_check.hpp"
#include "common/dtype_traits.cuh"
#include "reference/reference_device.cuh"

namespace tlb::reference {
namespace {

template <typename T, int V>
__global__ void layernorm_two_pass_kernel(const T* __restrict__ x, const T* __restrict__ gamma,
                                          const T* __restrict__ beta, T* __restrict__ out,
                                          int64_t rows, int64_t cols, float eps) {
  using VT = Vec<T, V>;
  __shared__ float scratch[32];
  const int64_t cvec = cols / V;
  const float inv_cols = 1.0f / static_cast<float>(cols);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const VT* xr = reinterpret_cast<const VT*>(x + r * cols);
    float sum = 0.0f;
    for (int64_t c = threadIdx.x; c < cvec; c += blockDim.x) {
      const VT a = xr[c];
#pragma unroll
      for (int i = 0; i < V; ++i) sum += to_float(a.v[i]);
    }
    const float mean = block_sum(sum, scratch) * inv_cols;
    float sq = 0.0f;
    for (int64_t c = threadIdx.x; c < cvec; c += blockDim.x) {
      const VT a = xr[c];
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const float dev = to_float(a.v[i]) - mean;
        sq = fmaf(dev, dev, sq);
      }
    }
    const float var = block_sum(sq, scratch) * inv_cols;
    // IEEE sqrt and division: this kernel also serves the fp32 golden.
    const float rstd = 1.0f / sqrtf(var + eps);
    VT* orow = reinterpret_cast<VT*>(out + r * cols);
    for (int64_t c = threadIdx.x; c < cvec; c += blockDim.x) {
      const VT a = xr[c];
      const VT g = reinterpret_cast<const VT*>(gamma)[c];
      const VT b = reinterpret_cast<const VT*>(beta)[c];
      VT o;
#pragma unroll
      for (int i = 0; i < V; ++i)
        o.v[i] = from_float<T>((to_float(a.v[i]) - mean) * rstd * to_float(g.v[i]) +
                               to_float(b.v[i]));
      orow[c] = o;
    }
  }
}

}  // namespace

void layernorm_two_pass(DType dtype, const void* x, const void* gamma, const void* beta,
                        void* out, int64_t rows, int64_t cols, float eps, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int W = kVecWidth<T>;
    const bool vec = cols % W == 0 && aligned16(x) && aligned16(gamma) && aligned16(beta) &&
                     aligned16(out);
    const int64_t cvec = vec ? cols / W : cols;
    const int threads = row_threads(cvec, 512);
    const unsigned grid = grid_for(rows, 1);
    if (vec)
      layernorm_two_pass_kernel<T, W><<<grid, threads, 0, stream>>>(
          static_cast<const T*>(x), static_cast<const T*>(gamma), static_cast<const T*>(beta),
          static_cast<T*>(out), rows, cols, eps);
    else
      layernorm_two_pass_kernel<T, 1><<<grid, threads, 0, stream>>>(
          static_cast<const T*>(x), static_cast<const T*>(gamma), static_cast<const T*>(beta),
          static_cast<T*>(out), rows, cols, eps);
    TLB_LAUNCH_CHECK(stream);
  });
}

}  // namespace tlb::reference
