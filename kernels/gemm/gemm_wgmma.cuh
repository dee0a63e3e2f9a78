// The wgmma of one k-step for the Hopper GEMM kernels: d[64 x BN] (+)= A[64 x k] * W[BN x k]^T
// with both operands K-major in 128-byte-swizzled shared memory, k = 16 (fp16, bf16) or 8
// (tf32), picked by element type and tile width at compile time.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "common/ptx_sm90.cuh"

namespace tlb::gemm_detail {

template <typename T, int BN>
__device__ __forceinline__ void wgmma_k_step(float (&acc)[BN / 2], uint64_t desc_a, uint64_t desc_w,
                                             int accumulate = 1) {
  constexpr bool kTf32 = sizeof(T) == 4, kBf16 = std::is_same_v<T, __nv_bfloat16>;
  if constexpr (BN == 256) {
    if constexpr (kTf32) {
      ptx::wgmma_m64n256k8_tf32(acc, desc_a, desc_w, accumulate);
    } else if constexpr (kBf16) {
      ptx::wgmma_m64n256k16_bf16(acc, desc_a, desc_w, accumulate);
    } else {
      ptx::wgmma_m64n256k16_f16(acc, desc_a, desc_w, accumulate);
    }
  } else if constexpr (BN == 192) {
    if constexpr (kTf32) {
      ptx::wgmma_m64n192k8_tf32(acc, desc_a, desc_w, accumulate);
    } else if constexpr (kBf16) {
      ptx::wgmma_m64n192k16_bf16(acc, desc_a, desc_w, accumulate);
    } else {
      ptx::wgmma_m64n192k16_f16(acc, desc_a, desc_w, accumulate);
    }
  } else if constexpr (BN == 128) {
    if constexpr (kTf32) {
      ptx::wgmma_m64n128k8_tf32(acc, desc_a, desc_w, accumulate);
    } else if constexpr (kBf16) {
      ptx::wgmma_m64n128k16_bf16(acc, desc_a, desc_w, accumulate);
    } else {
      ptx::wgmma_m64n128k16_f16(acc, desc_a, desc_w, accumulate);
    }
  } else {
    static_assert(BN == 64, "wgmma GEMM tiles are 64, 128, 192 or 256 wide");
    if constexpr (kTf32) {
      ptx::wgmma_m64n64k8_tf32(acc, desc_a, desc_w, accumulate);
    } else if constexpr (kBf16) {
      ptx::wgmma_m64n64k16_bf16(acc, desc_a, desc_w, accumulate);
    } else {
      ptx::wgmma_m64n64k16_f16(acc, desc_a, desc_w, accumulate);
    }
  }
}

}  // namespace tlb::gemm_detail
