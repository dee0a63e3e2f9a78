// Portable tensor-core GEMM, out = epilogue(A · W^T): mma.sync (m16n8k16 fp16/bf16, m16n8k8
// tf32) fed by a multi-stage cp.async shared-memory pipeline, fp32 accumulation, the fused
// epilogue applied on 16-byte output runs. Any M (row tails zero-filled and predicated);
// N and K multiples of 8. Runs on sm_80 and later; the fallback of every other variant.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/cuda_check.hpp"
#include "common/dtype_traits.cuh"
#include "common/launch.cuh"
#include "common/ptx.cuh"
#include "gemm/gemm_epilogue.cuh"
#include "gemm/gemm_internal.hpp"
#include "gemm/gemm_raster.cuh"

namespace tlb::gemm_detail {
namespace {

// Shape of one CTA tile. Both operands are K-contiguous in global memory (A [M, K] and
// W [N, K]), so both are staged as rows of BK elements and read with non-transposed ldmatrix.
// One shared-memory row is kRowBytes = BK * sizeof(T) = 64 bytes: 32 halves or 16 floats, so
// fp16, bf16 and tf32 share the same byte geometry (an mma k-step is 32 bytes for all three).
template <typename T, int BM_, int BN_, int WARPS_M_, int WARPS_N_, int STAGES_>
struct MmaConfig {
  using Elem = T;
  static constexpr int BM = BM_, BN = BN_, WARPS_M = WARPS_M_, WARPS_N = WARPS_N_;
  static constexpr int STAGES = STAGES_;
  static constexpr bool kTf32 = sizeof(T) == 4;
  static constexpr int kThreads = WARPS_M * WARPS_N * 32;
  static constexpr int kRowBytes = 64;
  static constexpr int BK = kRowBytes / static_cast<int>(sizeof(T));
  static constexpr int kElemsPerChunk = 16 / static_cast<int>(sizeof(T));
  static constexpr int kChunksPerRow = kRowBytes / 16;  // 4
  static constexpr int kKSteps = kRowBytes / 32;         // mma k-steps per tile: 2
  static constexpr int kWarpM = BM / WARPS_M, kWarpN = BN / WARPS_N;
  static constexpr int kMI = kWarpM / 16, kNI = kWarpN / 8;
  static constexpr int kStageBytes = (BM + BN) * kRowBytes;
  static constexpr int kPipeBytes = STAGES * kStageBytes;
  // Epilogue staging: one warp-row of accumulators at a time (kWarpM x BN fp32). The 8-float
  // row pad puts the 4 rows a half-warp writes (float2 each) in 4 disjoint bank octets.
  static constexpr int kStagePitch = BN + 8;
  static constexpr int kStagingBytes = kWarpM * kStagePitch * 4;
  static constexpr int kSmemBytes = kPipeBytes > kStagingBytes ? kPipeBytes : kStagingBytes;
  static constexpr int kAChunksPerThread = BM * kChunksPerRow / kThreads;
  static constexpr int kWChunksPerThread = BN * kChunksPerRow / kThreads;
  static_assert(kMI >= 1 && kNI % 2 == 0, "warp tile is a multiple of 16x16");
  static_assert(BM * kChunksPerRow % kThreads == 0 && BN * kChunksPerRow % kThreads == 0,
                "tile loads split evenly over the threads");
  static_assert(STAGES >= 3, "at least two tiles in flight while one is consumed");
};

// Rows are 4 chunks of 16 bytes, so 8 consecutive rows span 512 bytes and an unswizzled
// ldmatrix phase (8 rows, one chunk column) would hit each bank group twice. XOR-ing the
// chunk index with row bits 1..2 gives the 8 rows of a phase 8 distinct 16-byte bank groups.
__device__ __forceinline__ uint32_t swizzled_offset(int row, int chunk) {
  return static_cast<uint32_t>(row * 64 + ((chunk ^ ((row >> 1) & 3)) << 4));
}

template <class C>
__global__ void __launch_bounds__(C::kThreads, 1) gemm_mma_kernel(const GemmArgs p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // cp.async and bf16/tf32 mma need sm_80; the host never launches this there
#else
  ptx::pdl_wait();  // PDL: the inputs may be the previous kernel's output
  ptx::pdl_launch_dependents();
  using T = typename C::Elem;
  extern __shared__ __align__(128) unsigned char smem[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warp_m = warp / C::WARPS_N, warp_n = warp % C::WARPS_N;

  const int tiles_m = static_cast<int>((p.M + C::BM - 1) / C::BM);
  const int tiles_n = static_cast<int>(p.N + C::BN - 1) / C::BN;
  const TileCoord tile = raster_tile(static_cast<int>(blockIdx.x), tiles_m, tiles_n);
  const int64_t m0 = static_cast<int64_t>(tile.m) * C::BM;
  const int64_t n0 = static_cast<int64_t>(tile.n) * C::BN;
  const int64_t K = p.K;
  const T* A = static_cast<const T*>(p.A);
  const T* W = static_cast<const T*>(p.W);

  // Per-thread copy assignments, fixed for the whole K loop: chunk c of the tile is row
  // c / 4, 16-byte column c % 4. Rows past M (or N) are zero-filled and never read.
  const T* a_src[C::kAChunksPerThread];
  bool a_row_ok[C::kAChunksPerThread];
  uint32_t a_dst[C::kAChunksPerThread];
  int a_col[C::kAChunksPerThread];
#pragma unroll
  for (int i = 0; i < C::kAChunksPerThread; ++i) {
    const int c = tid + i * C::kThreads, row = c / C::kChunksPerRow, chunk = c % C::kChunksPerRow;
    a_row_ok[i] = m0 + row < p.M;
    a_col[i] = chunk * C::kElemsPerChunk;
    a_src[i] = A + (a_row_ok[i] ? (m0 + row) * K : 0) + a_col[i];
    a_dst[i] = swizzled_offset(row, chunk);
  }
  const T* w_src[C::kWChunksPerThread];
  bool w_row_ok[C::kWChunksPerThread];
  uint32_t w_dst[C::kWChunksPerThread];
  int w_col[C::kWChunksPerThread];
#pragma unroll
  for (int i = 0; i < C::kWChunksPerThread; ++i) {
    const int c = tid + i * C::kThreads, row = c / C::kChunksPerRow, chunk = c % C::kChunksPerRow;
    w_row_ok[i] = n0 + row < p.N;
    w_col[i] = chunk * C::kElemsPerChunk;
    w_src[i] = W + (w_row_ok[i] ? (n0 + row) * K : 0) + w_col[i];
    w_dst[i] = C::BM * C::kRowBytes + swizzled_offset(row, chunk);
  }

  const uint32_t smem_base = ptx::smem_addr(smem);
  const int k_tiles = static_cast<int>((K + C::BK - 1) / C::BK);
  auto load_tile = [&](int kt, int stage) {
    const int64_t k0 = static_cast<int64_t>(kt) * C::BK;
    const uint32_t base = smem_base + stage * C::kStageBytes;
#pragma unroll
    for (int i = 0; i < C::kAChunksPerThread; ++i) {
      const bool ok = a_row_ok[i] && k0 + a_col[i] < K;
      ptx::cp_async_16_zfill(base + a_dst[i], ok ? a_src[i] + k0 : A, ok);
    }
#pragma unroll
    for (int i = 0; i < C::kWChunksPerThread; ++i) {
      const bool ok = w_row_ok[i] && k0 + w_col[i] < K;
      ptx::cp_async_16_zfill(base + w_dst[i], ok ? w_src[i] + k0 : W, ok);
    }
  };

  float acc[C::kMI][C::kNI][4];
#pragma unroll
  for (int i = 0; i < C::kMI; ++i)
#pragma unroll
    for (int j = 0; j < C::kNI; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;

  // Prologue: STAGES-1 tiles in flight. A group is committed even when empty so that the
  // wait count below always names the tile about to be consumed.
#pragma unroll
  for (int s = 0; s < C::STAGES - 1; ++s) {
    if (s < k_tiles) load_tile(s, s);
    ptx::cp_async_commit();
  }

  // ldmatrix row addresses of this lane. A (16x32 bytes per m16 tile): lanes 0-15 give rows
  // 0-15 of the low 16-byte half, lanes 16-31 the high half -> registers a0..a3 in mma order.
  // W (two n8 tiles x 32 bytes): lanes 0-7 rows 0-7 low, 8-15 rows 0-7 high, 16-23 rows 8-15
  // low, 24-31 rows 8-15 high -> b0,b1 of tile j and b0,b1 of tile j+1.
  const int a_ld_row = warp_m * C::kWarpM + (lane & 15);
  const int a_ld_half = lane >> 4;
  const int w_ld_row = warp_n * C::kWarpN + ((lane >> 4) << 3) + (lane & 7);
  const int w_ld_half = (lane >> 3) & 1;

  for (int kt = 0; kt < k_tiles; ++kt) {
    ptx::cp_async_wait<C::STAGES - 2>();
    // Tile kt is visible to all, and every warp is done with the stage refilled next.
    __syncthreads();
    {
      const int next = kt + C::STAGES - 1;
      if (next < k_tiles) load_tile(next, next % C::STAGES);
      ptx::cp_async_commit();
    }
    const uint32_t a_base = smem_base + (kt % C::STAGES) * C::kStageBytes;
    const uint32_t w_base = a_base + C::BM * C::kRowBytes;
#pragma unroll
    for (int ks = 0; ks < C::kKSteps; ++ks) {
      uint32_t af[C::kMI][4];
      uint32_t bf[C::kNI][2];
#pragma unroll
      for (int i = 0; i < C::kMI; ++i)
        ptx::ldmatrix_x4(af[i], a_base + swizzled_offset(a_ld_row + i * 16, ks * 2 + a_ld_half));
#pragma unroll
      for (int j = 0; j < C::kNI; j += 2) {
        uint32_t r[4];
        ptx::ldmatrix_x4(r, w_base + swizzled_offset(w_ld_row + j * 8, ks * 2 + w_ld_half));
        bf[j][0] = r[0];
        bf[j][1] = r[1];
        bf[j + 1][0] = r[2];
        bf[j + 1][1] = r[3];
      }
      if constexpr (C::kTf32) {
#pragma unroll
        for (int i = 0; i < C::kMI; ++i)
#pragma unroll
          for (int r = 0; r < 4; ++r) af[i][r] = ptx::to_tf32(af[i][r]);
#pragma unroll
        for (int j = 0; j < C::kNI; ++j)
#pragma unroll
          for (int r = 0; r < 2; ++r) bf[j][r] = ptx::to_tf32(bf[j][r]);
      }
#pragma unroll
      for (int i = 0; i < C::kMI; ++i)
#pragma unroll
        for (int j = 0; j < C::kNI; ++j) {
          if constexpr (C::kTf32) {
            ptx::mma_m16n8k8_tf32(acc[i][j], af[i], bf[j]);
          } else {
            ptx::mma_m16n8k16<T>(acc[i][j], af[i], bf[j]);
          }
        }
    }
  }
  ptx::cp_async_wait_all();
  __syncthreads();  // the pipeline buffers become the epilogue staging area

  // Epilogue: one warp-row at a time, accumulators go through shared memory so that each
  // thread then owns 16 contiguous output bytes (coalesced stores, 16-byte bias/residual
  // loads, one head per run in the qkv split).
  float* staging = reinterpret_cast<float*>(smem);
  constexpr int kVec = Pack16<T>::kCount;
  constexpr int kRunsPerRow = C::BN / kVec;
  const int g = lane >> 2, t = lane & 3;
#pragma unroll 1
  for (int pass = 0; pass < C::WARPS_M; ++pass) {
    if (warp_m == pass) {
#pragma unroll
      for (int i = 0; i < C::kMI; ++i)
#pragma unroll
        for (int j = 0; j < C::kNI; ++j) {
          const int row = i * 16 + g, col = warp_n * C::kWarpN + j * 8 + 2 * t;
          *reinterpret_cast<float2*>(&staging[row * C::kStagePitch + col]) =
              make_float2(acc[i][j][0], acc[i][j][1]);
          *reinterpret_cast<float2*>(&staging[(row + 8) * C::kStagePitch + col]) =
              make_float2(acc[i][j][2], acc[i][j][3]);
        }
    }
    __syncthreads();
    for (int idx = tid; idx < C::kWarpM * kRunsPerRow; idx += C::kThreads) {
      const int row = idx / kRunsPerRow, run = idx % kRunsPerRow;
      const int64_t m = m0 + pass * C::kWarpM + row, n = n0 + run * kVec;
      epilogue_store_staged<T>(p, m, n, &staging[row * C::kStagePitch + run * kVec]);
    }
    __syncthreads();
  }
#endif
}

template <class C>
void launch_config(const GemmArgs& a, cudaStream_t stream) {
  allow_dynamic_smem(gemm_mma_kernel<C>, C::kSmemBytes);
  const int64_t tiles = ((a.M + C::BM - 1) / C::BM) * ((a.N + C::BN - 1) / C::BN);
  launch_kernel(gemm_mma_kernel<C>, dim3(static_cast<unsigned>(tiles)), dim3(C::kThreads), C::kSmemBytes, stream, 1, a);
  TLB_LAUNCH_CHECK(stream);
}

// The tile configurations, one per MmaTile. ptxas (CUDA 13.0), registers per thread for
// fp16 / bf16 / tf32 on sm_90a (sm_80 within a few), no spills in any; dynamic smem per CTA
// (pipeline or epilogue staging, whichever is larger):
//   128x256, 8 warps, 4 stages: 234 / 234 / 242 regs, 96 KiB  -> 1 CTA per SM (registers)
//   128x128, 4 warps, 4 stages: 240 / 240 / 249 regs, 64 KiB  -> 2 CTAs per SM
//   128x64,  4 warps, 4 stages: 155 / 155 / 154 regs, 48 KiB  -> 3 CTAs per SM
//   64x64,   4 warps, 4 stages:  96 /  96 /  98 regs, 32 KiB  -> 4+ CTAs per SM
// Four stages everywhere: with 64-byte k-rows a stage is only 32 bytes of K per row, so
// three tiles in flight are what covers the global-memory latency.
template <typename T, MmaTile kTile>
struct TileConfig;
template <typename T>
struct TileConfig<T, MmaTile::m128n256_w8> { using type = MmaConfig<T, 128, 256, 2, 4, 4>; };
template <typename T>
struct TileConfig<T, MmaTile::m128n128_w4> { using type = MmaConfig<T, 128, 128, 2, 2, 4>; };
template <typename T>
struct TileConfig<T, MmaTile::m128n64_w4> { using type = MmaConfig<T, 128, 64, 2, 2, 4>; };
template <typename T>
struct TileConfig<T, MmaTile::m64n64_w4> { using type = MmaConfig<T, 64, 64, 2, 2, 4>; };

template <typename T, typename F>
decltype(auto) with_tile_config(MmaTile tile, F&& f) {
  switch (tile) {
    case MmaTile::m128n256_w8: return f(typename TileConfig<T, MmaTile::m128n256_w8>::type{});
    case MmaTile::m128n128_w4: return f(typename TileConfig<T, MmaTile::m128n128_w4>::type{});
    case MmaTile::m128n64_w4: return f(typename TileConfig<T, MmaTile::m128n64_w4>::type{});
    default: return f(typename TileConfig<T, MmaTile::m64n64_w4>::type{});
  }
}

}  // namespace

int mma_image_ptx_version() {
  // A build without an sm_80+ target runs these kernels as trapping stubs (PTX JIT-compiled
  // from an older virtual architecture); the dispatcher refuses to launch them then.
  cudaFuncAttributes attr{};
  TLB_CUDA_CHECK(cudaFuncGetAttributes(&attr, gemm_mma_kernel<MmaConfig<__half, 64, 64, 2, 2, 4>>));
  return attr.ptxVersion;
}

MmaTileShape mma_tile_shape(MmaTile t) {
  return with_tile_config<__half>(t, [&](auto c) {
    using C = decltype(c);
    return MmaTileShape{C::BM, C::BN, C::kThreads / 32};
  });
}

std::string mma_tile_name(MmaTile t, DType d) {
  return dispatch_dtype(d, [&](auto tag) {
    using T = decltype(tag);
    return with_tile_config<T>(t, [&](auto c) {
      using C = decltype(c);
      return "mma_" + std::to_string(C::BM) + "x" + std::to_string(C::BN) + "x" + std::to_string(C::BK) +
             "_w" + std::to_string(C::kThreads / 32) + "_s" + std::to_string(C::STAGES) +
             (C::kTf32 ? "_tf32" : "");
    });
  });
}

void launch_gemm_mma(const GemmArgs& args, MmaTile tile, cudaStream_t stream) {
  const GemmArgs a = with_split_map(args);
  dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    with_tile_config<T>(tile, [&](auto c) { launch_config<decltype(c)>(a, stream); });
  });
}

}  // namespace tlb::gemm_detail
