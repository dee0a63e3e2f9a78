// Hopper tensor-core GEMM, out = epilogue(A · W^T): TMA loads of 128-byte-swizzled K-major
// tiles into a multi-stage mbarrier pipeline, one producer warpgroup and two consumer
// warpgroups issuing wgmma (fp16/bf16 k16, tf32 k8) from shared memory, fp32 accumulation,
// the fused epilogue on 16-byte output runs. Any M (TMA zero-fills the tails); N and K
// multiples of 8. sm_90a only; elsewhere the kernel body traps and the host never launches it.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "common/cuda_check.hpp"
#include "common/dtype_traits.cuh"
#include "common/ptx.cuh"
#include "common/ptx_sm90.cuh"
#include "gemm/gemm_epilogue.cuh"
#include "gemm/gemm_internal.hpp"
#include "gemm/tensor_map.hpp"

namespace tlb::gemm_detail {
namespace {

// One CTA computes BM x BN = 128 x BN_. Warpgroup 0 produces (one thread issues all TMA
// loads), warpgroups 1 and 2 consume 64 rows each with m64nBNk16 wgmma over the whole BN.
// A k-tile is 128 bytes of K per row (64 halves or 32 floats): the width of the 128-byte
// swizzle, so each operand tile is one TMA box and one descriptor walks it in 32-byte steps.
template <typename T, int BN_, int STAGES_>
struct WgmmaConfig {
  using Elem = T;
  static constexpr int BM = 128, BN = BN_, STAGES = STAGES_;
  static constexpr bool kTf32 = sizeof(T) == 4;
  static constexpr int kRowBytes = 128;
  static constexpr int BK = kRowBytes / static_cast<int>(sizeof(T));
  static constexpr int kKSteps = kRowBytes / 32;  // wgmma k16 (halves) or k8 (tf32): 32 bytes
  static constexpr int kConsumers = 2;
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr int kABytes = BM * kRowBytes, kWBytes = BN * kRowBytes;
  static constexpr int kStageBytes = kABytes + kWBytes;  // multiple of 1024: tiles stay aligned
  static constexpr int kPipeBytes = STAGES * kStageBytes;
  static constexpr int kStagePitch = BN + 8;  // floats; see the bank note in gemm_mma.cu
  static constexpr int kStagingBytes = kConsumers * 64 * kStagePitch * 4;
  static constexpr int kRegionBytes = kPipeBytes > kStagingBytes ? kPipeBytes : kStagingBytes;
  // + 1024 to align the tiles (the swizzle pattern is anchored at 1024-byte boundaries), then
  // a full and an empty barrier per stage.
  static constexpr int kSmemBytes = 1024 + kRegionBytes + STAGES * 16;
  // Registers: the producer keeps 40, consumers get 232 (128 x 40 + 256 x 232 <= 64 Ki).
  static constexpr int kProducerRegs = 40, kConsumerRegs = 232;
  static_assert(kStageBytes % 1024 == 0, "stage buffers must stay 1024-byte aligned");
};

template <class C>
__device__ __forceinline__ void wgmma_tile(float (&acc)[C::BN / 2], uint64_t desc_a, uint64_t desc_w) {
  using T = typename C::Elem;
  if constexpr (C::BN == 256) {
    if constexpr (C::kTf32) {
      ptx::wgmma_m64n256k8_tf32(acc, desc_a, desc_w);
    } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      ptx::wgmma_m64n256k16_bf16(acc, desc_a, desc_w);
    } else {
      ptx::wgmma_m64n256k16_f16(acc, desc_a, desc_w);
    }
  } else {
    if constexpr (C::kTf32) {
      ptx::wgmma_m64n128k8_tf32(acc, desc_a, desc_w);
    } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      ptx::wgmma_m64n128k16_bf16(acc, desc_a, desc_w);
    } else {
      ptx::wgmma_m64n128k16_f16(acc, desc_a, desc_w);
    }
  }
}

constexpr int kRasterRows = 8;  // as in gemm_mma.cu: W tiles of a group stay in L2

template <class C>
__global__ void __launch_bounds__(C::kThreads, 1)
    gemm_wgmma_sm90_kernel(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_w,
                           const GemmArgs p) {
#if TLB_PTX_SM90A
  using T = typename C::Elem;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw_addr = ptx::smem_addr(smem_raw);
  const uint32_t base = (raw_addr + 1023u) & ~1023u;
  unsigned char* smem = smem_raw + (base - raw_addr);
  const uint32_t full_bar = base + C::kRegionBytes;   // tile of stage s has landed
  const uint32_t empty_bar = full_bar + C::STAGES * 8;  // both consumers are done with stage s

  const int tiles_m = static_cast<int>((p.M + C::BM - 1) / C::BM);
  const int tiles_n = static_cast<int>((p.N + C::BN - 1) / C::BN);
  int tile_m, tile_n;
  {
    const int per_group = kRasterRows * tiles_n;
    const int group = blockIdx.x / per_group, in_group = blockIdx.x % per_group;
    const int first_m = group * kRasterRows;
    const int rows = min(tiles_m - first_m, kRasterRows);
    tile_m = first_m + in_group % rows;
    tile_n = in_group / rows;
  }
  const int m0 = tile_m * C::BM, n0 = tile_n * C::BN;
  const int k_tiles = static_cast<int>((p.K + C::BK - 1) / C::BK);
  const int warpgroup = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    for (int s = 0; s < C::STAGES; ++s) {
      ptx::mbarrier_init(full_bar + 8 * s, 1);
      ptx::mbarrier_init(empty_bar + 8 * s, 128 * C::kConsumers);
    }
    ptx::fence_mbarrier_init();
  }
  __syncthreads();

  if (warpgroup == 0) {
    ptx::setmaxnreg_dec<C::kProducerRegs>();
    if (threadIdx.x == 0) {
      ptx::prefetch_tensor_map(&tmap_a);
      ptx::prefetch_tensor_map(&tmap_w);
      for (int kt = 0; kt < k_tiles; ++kt) {
        const int s = kt % C::STAGES;
        // Round r = kt / STAGES reuses the stage once the consumers released round r - 1;
        // in round 0 the wait on parity 1 passes at once.
        ptx::mbarrier_wait(empty_bar + 8 * s, ((kt / C::STAGES) & 1) ^ 1);
        ptx::mbarrier_arrive_expect_tx(full_bar + 8 * s, C::kStageBytes);
        const uint32_t dst = base + s * C::kStageBytes;
        ptx::tma_load_2d(dst, &tmap_a, kt * C::BK, m0, full_bar + 8 * s);
        ptx::tma_load_2d(dst + C::kABytes, &tmap_w, kt * C::BK, n0, full_bar + 8 * s);
      }
    }
  } else {
    ptx::setmaxnreg_inc<C::kConsumerRegs>();
    const int consumer = warpgroup - 1;
    float acc[C::BN / 2];
#pragma unroll
    for (int i = 0; i < C::BN / 2; ++i) acc[i] = 0.0f;

    for (int kt = 0; kt < k_tiles; ++kt) {
      const int s = kt % C::STAGES;
      ptx::mbarrier_wait(full_bar + 8 * s, (kt / C::STAGES) & 1);
      const uint32_t a_tile = base + s * C::kStageBytes + consumer * 64 * C::kRowBytes;
      const uint32_t w_tile = base + s * C::kStageBytes + C::kABytes;
      const uint64_t desc_a = ptx::wgmma_desc_k_major_sw128(a_tile);
      const uint64_t desc_w = ptx::wgmma_desc_k_major_sw128(w_tile);
      ptx::wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < C::kKSteps; ++ks) {
        // 32 bytes further along K = 2 in the descriptor's 16-byte address units.
        wgmma_tile<C>(acc, desc_a + 2 * ks, desc_w + 2 * ks);
      }
      ptx::wgmma_commit_group();
      // Keep this tile's MMAs in flight; the previous tile's are done, so its stage is free.
      ptx::wgmma_wait_group<1>();
      if (kt > 0) ptx::mbarrier_arrive(empty_bar + 8 * ((kt - 1) % C::STAGES));
    }
    ptx::wgmma_wait_group<0>();

    // Epilogue through shared memory (the pipeline buffers, now idle: every TMA load has been
    // consumed). Both consumers must be past their last wgmma before either overwrites them.
    ptx::named_barrier_sync(1, 128 * C::kConsumers);
    // The bytes were last touched by the async proxy (TMA writes, wgmma reads).
    ptx::fence_proxy_async_shared();
    float* staging = reinterpret_cast<float*>(smem) + consumer * 64 * C::kStagePitch;
    const int lane = threadIdx.x & 31, warp_in_group = (threadIdx.x / 32) & 3;
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int j = 0; j < C::BN / 8; ++j) {
      const int row = warp_in_group * 16 + g, col = j * 8 + 2 * t;
      *reinterpret_cast<float2*>(&staging[row * C::kStagePitch + col]) = make_float2(acc[4 * j], acc[4 * j + 1]);
      *reinterpret_cast<float2*>(&staging[(row + 8) * C::kStagePitch + col]) =
          make_float2(acc[4 * j + 2], acc[4 * j + 3]);
    }
    ptx::named_barrier_sync(2 + consumer, 128);
    constexpr int kVec = Pack16<T>::kCount;
    constexpr int kRunsPerRow = C::BN / kVec;
    for (int idx = threadIdx.x & 127; idx < 64 * kRunsPerRow; idx += 128) {
      const int row = idx / kRunsPerRow, run = idx % kRunsPerRow;
      const int64_t m = static_cast<int64_t>(m0) + consumer * 64 + row;
      const int64_t n = static_cast<int64_t>(n0) + run * kVec;
      epilogue_store_staged<T>(p, m, n, &staging[row * C::kStagePitch + run * kVec]);
    }
  }
#else
  static_assert(C::kKSteps > 0 && C::kProducerRegs > 0 && C::kConsumerRegs > 0 && kRasterRows > 0);
  __trap();  // never launched: the host checks for an sm_90a image first
#endif
}

// ptxas (CUDA 13.0, sm_90a): 168 registers per thread at entry (the 384-thread cap), then
// 40 producer / 232 consumer after setmaxnreg; no spills, no wgmma serialisation warnings.
template <typename T, WgmmaTile kTile>
struct WgmmaTileConfig;
// 128x256, 4 stages: 48 KiB per stage, 193 KiB of shared memory, one CTA per SM.
template <typename T>
struct WgmmaTileConfig<T, WgmmaTile::m128n256> { using type = WgmmaConfig<T, 256, 4>; };
// 128x128, 6 stages: 32 KiB per stage, 193 KiB; for grids the 128x256 tile leaves uneven.
template <typename T>
struct WgmmaTileConfig<T, WgmmaTile::m128n128> { using type = WgmmaConfig<T, 128, 6>; };

template <typename T, typename F>
decltype(auto) with_wgmma_config(WgmmaTile tile, F&& f) {
  if (tile == WgmmaTile::m128n256) return f(typename WgmmaTileConfig<T, WgmmaTile::m128n256>::type{});
  return f(typename WgmmaTileConfig<T, WgmmaTile::m128n128>::type{});
}

template <class C>
void launch_config(const GemmArgs& a, cudaStream_t stream) {
  static std::atomic<uint64_t> configured{0};
  int dev = 0;
  TLB_CUDA_CHECK(cudaGetDevice(&dev));
  const uint64_t bit = 1ull << (dev & 63);
  if (!(configured.load(std::memory_order_relaxed) & bit)) {
    TLB_CUDA_CHECK(cudaFuncSetAttribute(gemm_wgmma_sm90_kernel<C>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        C::kSmemBytes));
    configured.fetch_or(bit, std::memory_order_relaxed);
  }
  const CUtensorMap tmap_a = make_tensor_map_2d_sw128(a.A, a.dtype, static_cast<uint64_t>(a.M),
                                                      static_cast<uint64_t>(a.K), C::BM, C::BK);
  const CUtensorMap tmap_w = make_tensor_map_2d_sw128(a.W, a.dtype, static_cast<uint64_t>(a.N),
                                                      static_cast<uint64_t>(a.K), C::BN, C::BK);
  const int64_t tiles = ((a.M + C::BM - 1) / C::BM) * ((a.N + C::BN - 1) / C::BN);
  gemm_wgmma_sm90_kernel<C><<<static_cast<unsigned>(tiles), C::kThreads, C::kSmemBytes, stream>>>(tmap_a, tmap_w, a);
  TLB_LAUNCH_CHECK(stream);
}

}  // namespace

bool wgmma_sm90_image_present() {
  // The kernel carries sm_90a machine code only if this build targeted it; a PTX JIT from an
  // older virtual architecture would run the trapping stub instead.
  cudaFuncAttributes attr{};
  TLB_CUDA_CHECK(cudaFuncGetAttributes(&attr, gemm_wgmma_sm90_kernel<WgmmaConfig<__half, 256, 4>>));
  return attr.ptxVersion >= 90 && attr.binaryVersion == 90;
}

WgmmaTileShape wgmma_tile_shape(WgmmaTile t) {
  return with_wgmma_config<__half>(t, [](auto c) {
    using C = decltype(c);
    return WgmmaTileShape{C::BM, C::BN};
  });
}

std::string wgmma_tile_name(WgmmaTile t, DType d) {
  return dispatch_dtype(d, [&](auto tag) {
    using T = decltype(tag);
    return with_wgmma_config<T>(t, [&](auto c) {
      using C = decltype(c);
      return "sm90_wgmma_" + std::to_string(C::BM) + "x" + std::to_string(C::BN) + "x" + std::to_string(C::BK) +
             "_s" + std::to_string(C::STAGES) + (C::kTf32 ? "_tf32" : "");
    });
  });
}

void launch_gemm_wgmma_sm90(const GemmArgs& a, WgmmaTile tile, cudaStream_t stream) {
  dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    with_wgmma_config<T>(tile, [&](auto c) { launch_config<decltype(c)>(a, stream); });
  });
}

}  // namespace tlb::gemm_detail
