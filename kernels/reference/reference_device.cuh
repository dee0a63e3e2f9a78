// Device helpers shared by the reference kernels: an aligned vector of V elements (V = 1 for
// the scalar path, 16 bytes' worth for the vectorised one), block-wide sums, the activation
// functions, and launch-geometry helpers. Reference kernels stay simple; these keep them short.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "common/dtype_traits.cuh"
#include "common/types.hpp"

namespace tlb::reference {

// V consecutive elements, aligned to their size so a load is one access (16 bytes at most).
template <typename T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

// Elements of T in 16 bytes: the width of the vectorised path.
template <typename T>
constexpr int kVecWidth = 16 / static_cast<int>(sizeof(T));

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the
// result. `scratch` holds 32 floats; the leading barrier lets callers reuse it back to back.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  v = warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int warps = static_cast<int>(blockDim.x >> 5);
    float w = lane < warps ? scratch[lane] : 0.0f;
    w = warp_sum(w);
    if (lane == 0) scratch[0] = w;
  }
  __syncthreads();
  return scratch[0];
}

// PyTorch's three activations in fp32. relu keeps NaN (x < 0 is false for NaN) so a NaN can
// never be laundered into a zero.
__device__ __forceinline__ float activate(Activation a, float x) {
  switch (a) {
    case Activation::gelu: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case Activation::gelu_tanh: {
      const float inner = 0.79788456080286536f * (x + 0.044715f * x * x * x);
      return 0.5f * x * (1.0f + tanhf(inner));
    }
    default: return x < 0.0f ? 0.0f : x;
  }
}

// Grid-stride launches: enough blocks to fill any GPU several times over; the loops inside
// cover the rest, so no size overflows a grid dimension.
constexpr int64_t kMaxGridBlocks = 1 << 16;

inline unsigned grid_for(int64_t work_items, int64_t items_per_block) {
  const int64_t blocks = (work_items + items_per_block - 1) / items_per_block;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, kMaxGridBlocks));
}

// Threads across a row of `cvec` vectors: the smallest power of two >= cvec in [32, max].
inline int row_threads(int64_t cvec, int max_threads) {
  int t = 32;
  while (t < cvec && t < max_threads) t *= 2;
  return t;
}

}  // namespace tlb::reference
