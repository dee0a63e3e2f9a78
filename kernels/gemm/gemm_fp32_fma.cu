// fp32 `ieee` GEMM, out = epilogue(A · W^T) with plain fp32 FMA (no tensor cores, no TF32):
// register-blocked outer products over shared-memory tiles that cp.async streams in through a
// three-stage ring, fused epilogue on 16-byte output runs. Any M; N and K multiples of 8.
#include <cstdint>

#include "common/cuda_check.hpp"
#include "common/dtype_traits.cuh"
#include "common/launch.cuh"
#include "common/ptx.cuh"
#include "gemm/gemm_epilogue.cuh"
#include "gemm/gemm_internal.hpp"

namespace tlb::gemm_detail {
namespace {

// 256 threads as a 16x16 grid (ty, tx = tid / 16, tid % 16); each thread owns TM x TN outputs
// in 4x4 groups 64 rows and 64 columns apart (warps of 4x8 threads, whose reads of W are
// broadcasts over 8 chunks instead of 16, measured 2-3 % slower on an H200). A and W tiles are
// kept as they are in memory, K-contiguous rows of BK = 32 floats (eight 16-byte chunks), so
// cp.async copies them without a transpose; a thread reads one chunk (four k) of each of its
// rows at a time. Chunk q of row r sits at q ^ (r / 4 % 8): the 16 rows a warp reads at once
// (one per tx, four apart) then fall in distinct banks.
template <int BM_, int BN_, int TM_, int TN_, int kMinBlocks_>
struct FmaConfig {
  static constexpr int BM = BM_, BN = BN_, TM = TM_, TN = TN_, kMinBlocks = kMinBlocks_;
  static constexpr int BK = 32, kChunks = BK / 4;
  static constexpr int kStages = 3;
  static constexpr int kThreads = 256;
  static constexpr int kGroupsM = TM / 4, kGroupsN = TN / 4;
  static constexpr int kGroupStride = 64;  // 16 threads x 4 rows (columns)
  static constexpr int kStageFloats = (BM + BN) * BK;
  static constexpr int kSmemBytes = kStages * kStageFloats * 4;
  static constexpr int kALoads = BM * kChunks / kThreads, kWLoads = BN * kChunks / kThreads;
  static_assert(BM / kGroupsM == kGroupStride && BN / kGroupsN == kGroupStride, "16x16 threads, 4x4 groups");
  static_assert(kALoads * kThreads == BM * kChunks && kWLoads * kThreads == BN * kChunks, "whole chunks per thread");
  static_assert(BK == 32, "chunk_offset's rows are 32 floats, eight chunks");
};

// Offset in floats of chunk q of row r in a tile of 32-float rows.
__device__ __forceinline__ int chunk_offset(int r, int q) { return r * 32 + ((q ^ ((r >> 2) & 7)) << 2); }

template <class C>
__global__ void __launch_bounds__(C::kThreads, C::kMinBlocks) gemm_fp32_fma_kernel(const GemmArgs p) {
  ptx::pdl_wait();  // PDL: the inputs may be the previous kernel's output
  ptx::pdl_launch_dependents();
  extern __shared__ __align__(16) float smem[];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int tiles_n = static_cast<int>((p.N + C::BN - 1) / C::BN);
  const int64_t m0 = static_cast<int64_t>(blockIdx.x / tiles_n) * C::BM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x % tiles_n) * C::BN;
  const float* A = static_cast<const float*>(p.A);
  const float* W = static_cast<const float*>(p.W);
  const int64_t K = p.K;
  const uint32_t smem_base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));

  // Copy slot i of a tile: row tid / 8 + 32 i, chunk tid % 8 (the same chunk, and the same
  // swizzle, for every slot of a thread); rows past M or N and chunks past K are zeros.
  const int load_row = tid / C::kChunks, load_chunk = tid % C::kChunks;
  const uint32_t load_dst = static_cast<uint32_t>(4 * chunk_offset(load_row, load_chunk));
  const float* a_src = A + (m0 + load_row) * K + load_chunk * 4;
  const float* w_src = W + (n0 + load_row) * K + load_chunk * 4;
  constexpr int kSlotRows = C::kThreads / C::kChunks;
  auto load_stage = [&](int stage, int64_t k0) {
    const uint32_t a_base = smem_base + static_cast<uint32_t>(stage * C::kStageFloats * 4) + load_dst;
    const uint32_t w_base = a_base + static_cast<uint32_t>(C::BM * C::BK * 4);
    const bool k_in = k0 + load_chunk * 4 < K;  // false past the last tile: the stage gets zeros
#pragma unroll
    for (int i = 0; i < C::kALoads; ++i) {
      const bool valid = k_in && m0 + load_row + i * kSlotRows < p.M;
      ptx::cp_async_16_zfill(a_base + i * kSlotRows * C::BK * 4, valid ? a_src + i * kSlotRows * K + k0 : A, valid);
    }
#pragma unroll
    for (int i = 0; i < C::kWLoads; ++i) {
      const bool valid = k_in && n0 + load_row + i * kSlotRows < p.N;
      ptx::cp_async_16_zfill(w_base + i * kSlotRows * C::BK * 4, valid ? w_src + i * kSlotRows * K + k0 : W, valid);
    }
  };

  float acc[C::TM][C::TN];
#pragma unroll
  for (int i = 0; i < C::TM; ++i)
#pragma unroll
    for (int j = 0; j < C::TN; ++j) acc[i][j] = 0.0f;

  const int k_tiles = static_cast<int>((K + C::BK - 1) / C::BK);
#pragma unroll
  for (int s = 0; s < C::kStages - 1; ++s) {
    if (s < k_tiles) load_stage(s, static_cast<int64_t>(s) * C::BK);
    ptx::cp_async_commit();
  }
  for (int kt = 0; kt < k_tiles; ++kt) {
    // Tile kt has landed for every thread; the stage refilled next was read in kt - 1.
    ptx::cp_async_wait<C::kStages - 2>();
    __syncthreads();
    const float* As = smem + (kt % C::kStages) * C::kStageFloats;
    const float* Ws = As + C::BM * C::BK;
    // chunk_offset with the swizzle worked out: a thread's rows of A are g * 64 + ty * 4 + i, its
    // rows of W g * 64 + tx * 4 + j, so r / 4 % 8 is ty % 8 for all of the first, tx % 8 for
    // all of the second.
#pragma unroll
    for (int q = 0; q < C::kChunks; ++q) {
      if (q == 1) {
        // The refill goes under chunk 0's FFMAs, without a branch so that its address arithmetic
        // interleaves with them: issued right after the barrier it held every warp at once
        // (ncu: a fifth of the idle cycles). Past the last tile it fills a stage no tile reads.
        const int next = kt + C::kStages - 1;
        load_stage(next % C::kStages, static_cast<int64_t>(next) * C::BK);
        ptx::cp_async_commit();
      }
      float4 w[C::TN];
#pragma unroll
      for (int j = 0; j < C::TN; ++j) {
        const int r = (j / 4) * C::kGroupStride + tx * 4 + j % 4;
        w[j] = *reinterpret_cast<const float4*>(Ws + r * 32 + ((q ^ (tx & 7)) << 2));
      }
#pragma unroll
      for (int g = 0; g < C::kGroupsM; ++g) {
        float4 a[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int r = g * C::kGroupStride + ty * 4 + i;
          a[i] = *reinterpret_cast<const float4*>(As + r * 32 + ((q ^ (ty & 7)) << 2));
        }
        // k ascending per output, as a plain loop over K would add them.
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < C::TN; ++j) {
            float& o = acc[g * 4 + i][j];
            o = fmaf(a[i].x, w[j].x, o);
            o = fmaf(a[i].y, w[j].y, o);
            o = fmaf(a[i].z, w[j].z, o);
            o = fmaf(a[i].w, w[j].w, o);
          }
      }
    }
  }
  ptx::cp_async_wait_all();

#pragma unroll
  for (int i = 0; i < C::TM; ++i) {
    const int64_t m = m0 + (i / 4) * C::kGroupStride + ty * 4 + i % 4;
    if (m >= p.M) continue;
#pragma unroll
    for (int g = 0; g < C::kGroupsN; ++g) {
      const int64_t n = n0 + g * C::kGroupStride + tx * 4;
      if (n >= p.N) continue;
      float v[4] = {acc[i][g * 4], acc[i][g * 4 + 1], acc[i][g * 4 + 2], acc[i][g * 4 + 3]};
      epilogue_store<float>(p, m, n, v);
    }
  }
}

template <class C>
void launch_config(const GemmArgs& a, cudaStream_t stream) {
  const int64_t tiles = ((a.M + C::BM - 1) / C::BM) * ((a.N + C::BN - 1) / C::BN);
  allow_dynamic_smem(gemm_fp32_fma_kernel<C>, C::kSmemBytes);
  launch_kernel(gemm_fp32_fma_kernel<C>, dim3(static_cast<unsigned>(tiles)), dim3(C::kThreads), C::kSmemBytes,
                stream, 1, a);
  TLB_LAUNCH_CHECK(stream);
}

}  // namespace

std::string fma_tile_name(FmaTile t) {
  return t == FmaTile::m128n128 ? "fma_128x128x32_fp32" : "fma_64x64x32_fp32";
}

void launch_gemm_fp32_fma(const GemmArgs& a, FmaTile t, cudaStream_t stream) {
  // 128x128 (8x8 per thread): the throughput tile, 96 KiB of ring, one CTA per SM with the
  // registers ptxas wants (254: every chunk's operands loaded ahead; held to 128 for two CTAs
  // per SM, the loop's pointers spilled and operands moved between registers: 0.86x on an
  // H200). 64x64 (4x4): small GEMMs that would leave most SMs idle with 128x128 tiles, 48
  // KiB, three per SM.
  if (t == FmaTile::m128n128) {
    launch_config<FmaConfig<128, 128, 8, 8, 1>>(a, stream);
  } else {
    launch_config<FmaConfig<64, 64, 4, 4, 3>>(a, stream);
  }
}

}  // namespace tlb::gemm_detail
