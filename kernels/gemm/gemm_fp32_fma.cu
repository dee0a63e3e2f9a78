// fp32 `ieee` GEMM, out = epilogue(A · W^T) with plain fp32 FMA (no tensor cores, no TF32):
// register-blocked outer products over k-major shared-memory tiles that cp.async streams in
// (transposing on the way) through a three-stage ring, fused epilogue on 16-byte output runs.
// Any M; N and K multiples of 8.
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
// in 4x4 groups 64 rows and 64 columns apart. Shared memory holds each tile k-major, a row of
// BM (BN) floats per k, so one k of a thread's operands is TM / 4 + TN / 4 16-byte loads and
// feeds TM x TN FMAs: the 8x8 tile keeps a k of operands (16 registers) in flight while the
// previous k's 64 FMAs issue, and fits two CTAs per SM in 128 registers. Measured on an H200
// against cuBLAS: 0.85-0.86x, as much as tiles kept k-contiguous as in memory (64 registers
// of operands a step, one CTA per SM). 128 threads of 16x8 outputs, cuBLAS's shape, ran at
// 0.68-0.79x: two warps per scheduler left it waiting on the copies and on instruction fetch.
//
// kPairedW: W's tile holds each pair of output columns swapped (column 2c + 1 first), and the
// operands are unswapped as they are read. An SM sub-partition reads registers from two banks
// (by the register's parity, as public microbenchmarks of Ampere's register file read it); an
// FFMA whose two operands not covered by the reuse cache (here w and the accumulator: a is
// reused across a row) sit in one bank waits for the second read: the dispatch stalls ncu
// showed here (0.61 per issue, cuBLAS's SGEMM next to none). The 16-byte loads put w[4g + c]
// in a register of parity c, and ptxas keeps most accumulators of column 4g + c at parity c
// too (the 16-byte stores at the end pull them there). Counted over every FFMA of the kernel
// (SASS of ptxas 13.0), those whose source registers without a reuse flag all share one
// parity: 63 % in the plain 8x8 tile, 31 % with W's columns swapped, where w[4g + c] lands at
// parity 1 - c (the first FFMA of each row, whose a is read fresh too, has three operands in
// two banks whatever the layout). Measured on an H100: 43.2 -> 44.5 TFLOP/s on case 10's up
// projection, +3.0-3.7 % on all four IEEE rows of the GEMM table. The 4x4 tile counts 5 % as
// it is and keeps the plain layout.
template <int BM_, int BN_, int TM_, int TN_, int kMinBlocks_, bool kPairedW_ = false>
struct FmaConfig {
  static constexpr int BM = BM_, BN = BN_, TM = TM_, TN = TN_, kMinBlocks = kMinBlocks_;
  static constexpr bool kPairedW = kPairedW_;
  static constexpr int BK = 32;
  static constexpr int kStages = 3;
  static constexpr int kThreads = 256;
  static constexpr int kGroupsM = TM / 4, kGroupsN = TN / 4;
  static constexpr int kGroupStride = 64;  // 16 threads x 4 rows (columns)
  // A k-row is padded by four floats: the copies' 8 k x 4 rows per warp land in 32 banks.
  static constexpr int kPitchA = BM + 4, kPitchW = BN + 4;
  static constexpr int kStageFloats = BK * (kPitchA + kPitchW);
  static constexpr int kSmemBytes = kStages * kStageFloats * 4;
  static_assert(BM / kGroupsM == kGroupStride && BN / kGroupsN == kGroupStride, "16x16 threads, 4x4 groups");
  static_assert(BM % 32 == 0 && BN % 32 == 0 && BK % 8 == 0, "copies of 32 rows x 8 k");
};

// One operand tile's copies into k-major shared memory: 4-byte cp.async, each warp reading
// 4 rows x 8 k (four 32-byte sectors) per copy. Copy (r, g) of a thread is row
// 32 r + warp * 4 + lane / 8 at k = 8 g + lane % 8. Rows past the tensor read its last row
// instead: they only reach outputs that are never stored. The k groups of a last tile that
// lie past K are zero-filled. kSwapPairs stores row r at r ^ 1 (FmaConfig::kPairedW).
template <int kRows, int kKGroups, int kPitch, bool kSwapPairs = false>
struct TileCopy {
  const float* src[kRows];  // row r's element at k = lane % 8 of the next tile
  uint32_t dst;             // this thread's offset in bytes in a stage's tile

  __device__ TileCopy(const float* base, int64_t row0, int64_t rows, int64_t K, int tid) {
    const int lane = tid % 32, row = (tid / 32) * 4 + lane / 8;
    dst = static_cast<uint32_t>(4 * ((lane % 8) * kPitch + (kSwapPairs ? row ^ 1 : row)));
#pragma unroll
    for (int r = 0; r < kRows; ++r) src[r] = base + min(row0 + row + 32 * r, rows - 1) * K + lane % 8;
  }

  // Copies the tile at the pointers and moves them on by the tile's k. `groups` of its k groups
  // lie inside K: all of them but on a last tile that K ends inside, which takes a branch of
  // its own, so that every other tile's copies are plain loads at fixed offsets from the row
  // pointers.
  __device__ __forceinline__ void issue_and_advance(uint32_t tile, int groups) {
    const uint32_t to = tile + dst;
    if (groups == kKGroups) {
#pragma unroll
      for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int g = 0; g < kKGroups; ++g) ptx::cp_async_4(to + 4 * (32 * r + 8 * g * kPitch), src[r] + 8 * g);
    } else {
#pragma unroll
      for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int g = 0; g < kKGroups; ++g)
          ptx::cp_async_4_zfill(to + 4 * (32 * r + 8 * g * kPitch), g < groups ? src[r] + 8 * g : src[r], g < groups);
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) src[r] += 8 * kKGroups;
  }
};

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

  TileCopy<C::BM / 32, C::BK / 8, C::kPitchA> copy_a(A, m0, p.M, K, tid);
  TileCopy<C::BN / 32, C::BK / 8, C::kPitchW, C::kPairedW> copy_w(W, n0, p.N, K, tid);
  const int k_tiles = static_cast<int>((K + C::BK - 1) / C::BK);
  // The copies of tile `kt` (none past the last: its stage's group is left empty).
  auto load_tile = [&](int kt) {
    if (kt >= k_tiles) return;
    const uint32_t a_tile = smem_base + static_cast<uint32_t>((kt % C::kStages) * C::kStageFloats * 4);
    const int64_t left = K - static_cast<int64_t>(kt) * C::BK;  // K is a multiple of 8
    const int groups = left >= C::BK ? C::BK / 8 : static_cast<int>(left / 8);
    copy_a.issue_and_advance(a_tile, groups);
    copy_w.issue_and_advance(a_tile + C::BK * C::kPitchA * 4, groups);
  };

  float acc[C::TM][C::TN];
#pragma unroll
  for (int i = 0; i < C::TM; ++i)
#pragma unroll
    for (int j = 0; j < C::TN; ++j) acc[i][j] = 0.0f;

#pragma unroll
  for (int s = 0; s < C::kStages - 1; ++s) {
    load_tile(s);
    ptx::cp_async_commit();
  }
  for (int kt = 0; kt < k_tiles; ++kt) {
    // Tile kt has landed for every thread; the stage refilled next was read in kt - 1.
    ptx::cp_async_wait<C::kStages - 2>();
    __syncthreads();
    const float* stage = smem + (kt % C::kStages) * C::kStageFloats;
    const float* As = stage + ty * 4;
    const float* Ws = stage + C::BK * C::kPitchA + tx * 4;
#pragma unroll
    for (int k = 0; k < C::BK; ++k) {
      if (k == 1) {
        // The refill goes under the first k's FMAs rather than right after the barrier, where
        // its address arithmetic held every warp at once.
        load_tile(kt + C::kStages - 1);
        ptx::cp_async_commit();
      }
      float a[C::TM], w[C::TN];
#pragma unroll
      for (int g = 0; g < C::kGroupsM; ++g)
        *reinterpret_cast<float4*>(&a[4 * g]) =
            *reinterpret_cast<const float4*>(As + k * C::kPitchA + g * C::kGroupStride);
#pragma unroll
      for (int g = 0; g < C::kGroupsN; ++g) {
        const float4 f = *reinterpret_cast<const float4*>(Ws + k * C::kPitchW + g * C::kGroupStride);
        w[4 * g] = C::kPairedW ? f.y : f.x;
        w[4 * g + 1] = C::kPairedW ? f.x : f.y;
        w[4 * g + 2] = C::kPairedW ? f.w : f.z;
        w[4 * g + 3] = C::kPairedW ? f.z : f.w;
      }
      // k ascending per output, as a plain loop over K would add them.
#pragma unroll
      for (int i = 0; i < C::TM; ++i)
#pragma unroll
        for (int j = 0; j < C::TN; ++j) acc[i][j] = fmaf(a[i], w[j], acc[i][j]);
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
  switch (t) {
    case FmaTile::m128n128: return "fma_128x128x32_fp32";
    default: return "fma_64x64x32_fp32";
  }
}

void launch_gemm_fp32_fma(const GemmArgs& args, FmaTile t, cudaStream_t stream) {
  const GemmArgs a = with_split_map(args);
  // 128x128 (8x8 per thread, W's columns paired): the throughput tile, 99 KiB of ring, two
  // CTAs per SM in 128 registers. 64x64 (4x4): small GEMMs that would leave most SMs idle
  // with 128x128 tiles, 51 KiB, three per SM.
  if (t == FmaTile::m128n128) {
    launch_config<FmaConfig<128, 128, 8, 8, 2, true>>(a, stream);
  } else {
    launch_config<FmaConfig<64, 64, 4, 4, 3>>(a, stream);
  }
}

}  // namespace tlb::gemm_detail
