// Reference masked softmax over a materialised fp32 scores buffer: one block per row. Pass 1
// keeps a running (max, sum of exp) per thread and merges them across the block; pass 2 writes
// the probabilities in the working dtype (0 for masked keys). Two reads of each score and one
// write of each probability; any seq length.
#include "reference/masked_softmax.hpp"

#include <cmath>

#include "common/cuda_check.hpp"
#include "common/dtype_traits.cuh"
#include "reference/reference_device.cuh"

namespace tlb::reference {
namespace {

// Merges running softmax statistics (m, l) = (max, sum of exp(x - max)); -inf marks "nothing
// seen yet" and must not reach exp(-inf - -inf).
__device__ __forceinline__ void merge_stats(float& m, float& l, float m2, float l2) {
  const float mn = fmaxf(m, m2);
  const float a = m == -INFINITY ? 0.0f : l * expf(m - mn);
  const float b = m2 == -INFINITY ? 0.0f : l2 * expf(m2 - mn);
  m = mn;
  l = a + b;
}

template <typename T>
__global__ void masked_softmax_kernel(const float* scores, T* probs, int64_t rows, int64_t seq,
                                      int64_t heads, MaskKind mask, const int* __restrict__ valid_lens,
                                      float scale) {
  __shared__ float warp_m[32], warp_l[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = static_cast<int>(blockDim.x >> 5);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* x_row = scores + row * seq;
    T* p = probs + row * seq;
    const int64_t i = row % seq;
    const int64_t b = row / seq / heads;
    int64_t visible = seq;
    if (mask == MaskKind::causal) visible = i + 1;
    if (mask == MaskKind::padding) visible = min(max(static_cast<int64_t>(valid_lens[b]), int64_t{0}), seq);

    float m = -INFINITY, l = 0.0f;
    for (int64_t j = threadIdx.x; j < visible; j += blockDim.x) {
      const float x = x_row[j] * scale;
      if (x > m) {
        l = l * expf(m - x) + 1.0f;  // m = -inf: expf(-inf) = 0 and l is still 0
        m = x;
      } else if (x != -INFINITY) {  // an overflowed -inf score adds nothing (and no -inf - -inf)
        l += expf(x - m);  // NaN scores fall here and poison l, as they should
      }
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      const float m2 = __shfl_xor_sync(0xffffffffu, m, off);
      const float l2 = __shfl_xor_sync(0xffffffffu, l, off);
      merge_stats(m, l, m2, l2);
    }
    __syncthreads();  // the previous row's readers are done with warp_m / warp_l
    if (lane == 0) {
      warp_m[warp] = m;
      warp_l[warp] = l;
    }
    __syncthreads();
    m = warp_m[0];
    l = warp_l[0];
    for (int w = 1; w < warps; ++w) merge_stats(m, l, warp_m[w], warp_l[w]);

    const float inv_l = 1.0f / l;
    for (int64_t j = threadIdx.x; j < seq; j += blockDim.x) {
      const float prob = j < visible ? expf(x_row[j] * scale - m) * inv_l : 0.0f;
      p[j] = from_float<T>(prob);
    }
  }
}

}  // namespace

void masked_softmax(DType dtype, const float* scores, void* probs, int64_t batch, int64_t heads,
                    int64_t seq, MaskKind mask, const int* valid_lens, float scale,
                    cudaStream_t stream) {
  const int64_t rows = batch * heads * seq;
  if (rows <= 0) return;
  const int threads = row_threads(seq, 512);
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    masked_softmax_kernel<T><<<grid_for(rows, 1), threads, 0, stream>>>(
        scores, static_cast<T*>(probs), rows, seq, heads, mask, valid_lens, scale);
    TLB_LAUNCH_CHECK(stream);
  });
}

}  // namespace tlb::reference
