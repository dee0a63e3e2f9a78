// fp32 `ieee` GEMM, out = epilogue(A · W^T) with plain fp32 FMA (no tensor cores, no TF32):
// register-blocked outer products over shared-memory tiles that cp.async streams in through a
// three-stage ring, fused epilogue on 16-byte output runs. Any M; N and K multiples of 8.
#include <cstdint>
#include <type_traits>

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
// kPrefetch_: chunk q + 1's operands (and, past the last chunk, chunk 0 of the next k-tile,
// behind the tile's one barrier, moved from the top of the loop to before its last chunk)
// are read into a second set of registers while chunk q's FMAs issue.
template <int BM_, int BN_, int TM_, int TN_, int kMinBlocks_, bool kPrefetch_ = false>
struct FmaConfig {
  static constexpr int BM = BM_, BN = BN_, TM = TM_, TN = TN_, kMinBlocks = kMinBlocks_;
  static constexpr bool kPrefetch = kPrefetch_;
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
    const bool k_in = k0 + load_chunk * 4 < K;
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
  if constexpr (C::kPrefetch) {
    // A thread's fragments of chunk q of the tile at `As` (chunk_offset worked out as in the
    // loop below).
    auto load_frags = [&](const float* As, int q, float4 (&w)[C::TN], float4 (&a)[C::TM]) {
      const float* Ws = As + C::BM * C::BK;
#pragma unroll
      for (int j = 0; j < C::TN; ++j) {
        const int r = (j / 4) * C::kGroupStride + tx * 4 + j % 4;
        w[j] = *reinterpret_cast<const float4*>(Ws + r * 32 + ((q ^ (tx & 7)) << 2));
      }
#pragma unroll
      for (int i = 0; i < C::TM; ++i) {
        const int r = (i / 4) * C::kGroupStride + ty * 4 + i % 4;
        a[i] = *reinterpret_cast<const float4*>(As + r * 32 + ((q ^ (ty & 7)) << 2));
      }
    };
    float4 wf[2][C::TN], af[2][C::TM];
    ptx::cp_async_wait<C::kStages - 2>();
    __syncthreads();
    load_frags(smem, 0, wf[0], af[0]);
    for (int kt = 0; kt < k_tiles; ++kt) {
      // The stage refilled here held tile kt - 1, whose last reads came before the barrier
      // of iteration kt - 1.
      if (const int next = kt + C::kStages - 1; next < k_tiles)
        load_stage(next % C::kStages, static_cast<int64_t>(next) * C::BK);
      ptx::cp_async_commit();
      const float* As = smem + (kt % C::kStages) * C::kStageFloats;
#pragma unroll
      for (int q = 0; q < C::kChunks; ++q) {
        if (q + 1 < C::kChunks) {
          load_frags(As, q + 1, wf[(q + 1) & 1], af[(q + 1) & 1]);
        } else {
          // Tile kt + 1 has landed for every thread (and every read of tile kt is issued).
          ptx::cp_async_wait<C::kStages - 2>();
          __syncthreads();
          if (kt + 1 < k_tiles) load_frags(smem + ((kt + 1) % C::kStages) * C::kStageFloats, 0, wf[0], af[0]);
        }
        const float4(&w)[C::TN] = wf[q & 1];
        const float4(&a)[C::TM] = af[q & 1];
#pragma unroll
        for (int i = 0; i < C::TM; ++i)
#pragma unroll
          for (int j = 0; j < C::TN; ++j) {
            float& o = acc[i][j];
            o = fmaf(a[i].x, w[j].x, o);
            o = fmaf(a[i].y, w[j].y, o);
            o = fmaf(a[i].z, w[j].z, o);
            o = fmaf(a[i].w, w[j].w, o);
          }
      }
    }
  } else {
    for (int kt = 0; kt < k_tiles; ++kt) {
      // Tile kt has landed for every thread; the stage refilled next was read in kt - 1.
      ptx::cp_async_wait<C::kStages - 2>();
      __syncthreads();
      if (const int next = kt + C::kStages - 1; next < k_tiles)
        load_stage(next % C::kStages, static_cast<int64_t>(next) * C::BK);
      ptx::cp_async_commit();
      const float* As = smem + (kt % C::kStages) * C::kStageFloats;
      const float* Ws = As + C::BM * C::BK;
      // chunk_offset with the swizzle worked out: a thread's rows of A are g * 64 + ty * 4 + i,
      // its rows of W g * 64 + tx * 4 + j, so r / 4 % 8 is ty % 8 for all of the first, tx % 8
      // for all of the second.
#pragma unroll
      for (int q = 0; q < C::kChunks; ++q) {
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


// The 128x128 tile as cuBLAS's sm80 FFMA kernel lays it out: 128 threads, 4 warps as 2 x 2 of
// 64 x 64, lanes as 8 x 4 threads; each thread TM x TN = 8 x 16 outputs, rows
// wm * 64 + g * 32 + lm * 4 + i (g < 2, i < 4), columns wn * 64 + h * 16 + ln * 4 + j
// (h < 4, j < 4). The tiles are transposed on their way into shared memory (k-outer rows of
// BM floats, 4-byte cp.async), so that one k of a thread's fragments is two float4 of A and
// four of W, each read by a warp in one wavefront (8 or 4 distinct 16-byte runs in a row):
// 6 LDS.128 per 128 FMAs, against 16 per 256 with k-contiguous tiles. Rows are kPitch =
// BM + 4 floats apart, so that the copies' 8 k x 4 rows of a warp fall in distinct banks.
// Fragments of k + 1 are read while k's FMAs issue; the k-tile's one barrier sits before its
// last k, so the next tile's first fragments are read under that k's FMAs.
template <int BK_, int kStages_, int kMinBlocks_>
struct FmaTConfig {
  static constexpr int BM = 128, BN = 128, TM = 8, TN = 16, BK = BK_, kStages = kStages_;
  static constexpr int kMinBlocks = kMinBlocks_;
  static constexpr int kThreads = 128;
  static constexpr int kPitch = BM + 4;
  static constexpr int kTileFloats = BK * kPitch;  // one operand's tile
  static constexpr int kStageFloats = 2 * kTileFloats;
  static constexpr int kSmemBytes = kStages * kStageFloats * 4;
  static constexpr int kCopyRows = kThreads / 8;  // rows one pass of copies covers, 8 k each
  static constexpr int kRowPasses = BM / kCopyRows, kKPasses = BK / 8;
  static_assert(BK % 8 == 0, "whole 8-k copy passes, and an even k count (fragment parity)");
  static_assert(kRowPasses * kCopyRows == BM, "whole passes");
};

template <class C>
__global__ void __launch_bounds__(C::kThreads, C::kMinBlocks) gemm_fp32_fma_t_kernel(const GemmArgs p) {
  ptx::pdl_wait();
  ptx::pdl_launch_dependents();
  extern __shared__ __align__(16) float smem[];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp / 2, wn = warp % 2, lm = lane / 4, ln = lane % 4;
  const int tiles_n = static_cast<int>((p.N + C::BN - 1) / C::BN);
  const int64_t m0 = static_cast<int64_t>(blockIdx.x / tiles_n) * C::BM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x % tiles_n) * C::BN;
  const float* A = static_cast<const float*>(p.A);
  const float* W = static_cast<const float*>(p.W);
  const int64_t K = p.K;
  const uint32_t smem_base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));

  // Copies: element k = copy_k + 8 e of rows copy_row + 16 i; a warp's 32 copies are 4 rows x
  // 32 bytes of memory. Rows past M (N) read row M - 1 (N - 1), zero-filled, so one pointer per
  // row serves every e (immediate offsets). Where BK does not divide K the first tile is the
  // short one: tile t covers k from t * BK - pad (pad = k_tiles * BK - K, a multiple of 8), and
  // only tile 0, copied before the loop, has passes to zero-fill (k < 0: the zeros come first,
  // so every output still adds its products in ascending k).
  const int copy_k = tid % 8, copy_row = tid / 8;
  const uint32_t copy_dst = static_cast<uint32_t>(4 * (copy_k * C::kPitch + copy_row));
  const float* a_src = A + (m0 + copy_row) * K + copy_k;
  const float* w_src = W + (n0 + copy_row) * K + copy_k;
  const int a_last = static_cast<int>(p.M - 1 - m0 - copy_row), w_last = static_cast<int>(p.N - 1 - n0 - copy_row);
  const int k32 = static_cast<int>(K);  // K * BM < 2^31 (launch_t_config)
  const int k_tiles = static_cast<int>((K + C::BK - 1) / C::BK);
  const int pad = k_tiles * C::BK - k32;
  auto copy_tile = [&](auto first, int stage, int64_t k0) {
    const uint32_t a_base = smem_base + static_cast<uint32_t>(stage * C::kStageFloats * 4) + copy_dst;
    const uint32_t w_base = a_base + static_cast<uint32_t>(C::kTileFloats * 4);
#pragma unroll
    for (int i = 0; i < C::kRowPasses; ++i) {
      const int r = i * C::kCopyRows;
      const float* a_row = a_src + k0 + static_cast<int64_t>(min(r, a_last) * k32);
      const float* w_row = w_src + k0 + static_cast<int64_t>(min(r, w_last) * k32);
      const bool a_ok = r <= a_last, w_ok = r <= w_last;
#pragma unroll
      for (int e = 0; e < C::kKPasses; ++e) {
        const uint32_t dst = static_cast<uint32_t>(4 * (8 * e * C::kPitch + r));
        if constexpr (decltype(first)::value) {
          const bool k_in = 8 * e >= pad;
          ptx::cp_async_4_zfill(a_base + dst, k_in ? a_row + 8 * e : A, k_in && a_ok);
          ptx::cp_async_4_zfill(w_base + dst, k_in ? w_row + 8 * e : W, k_in && w_ok);
        } else {
          ptx::cp_async_4_zfill(a_base + dst, a_row + 8 * e, a_ok);
          ptx::cp_async_4_zfill(w_base + dst, w_row + 8 * e, w_ok);
        }
      }
    }
  };
  auto load_stage = [&](int stage, int t) {
    copy_tile(std::false_type{}, stage, static_cast<int64_t>(t) * C::BK - pad);
  };

  float acc[C::TM][C::TN];
#pragma unroll
  for (int i = 0; i < C::TM; ++i)
#pragma unroll
    for (int j = 0; j < C::TN; ++j) acc[i][j] = 0.0f;

  const int a_off = wm * 64 + lm * 4, w_off = C::kTileFloats + wn * 64 + ln * 4;
  auto load_frags = [&](const float* st, int k, float4 (&a)[C::TM / 4], float4 (&w)[C::TN / 4]) {
#pragma unroll
    for (int g = 0; g < C::TM / 4; ++g) a[g] = *reinterpret_cast<const float4*>(st + k * C::kPitch + a_off + g * 32);
#pragma unroll
    for (int h = 0; h < C::TN / 4; ++h) w[h] = *reinterpret_cast<const float4*>(st + k * C::kPitch + w_off + h * 16);
  };

  copy_tile(std::true_type{}, 0, -pad);  // k_tiles >= 1 (K > 0)
  ptx::cp_async_commit();
#pragma unroll
  for (int s = 1; s < C::kStages - 1; ++s) {
    if (s < k_tiles) load_stage(s, s);
    ptx::cp_async_commit();
  }
  float4 af[2][C::TM / 4], wf[2][C::TN / 4];
  ptx::cp_async_wait<C::kStages - 2>();
  __syncthreads();
  load_frags(smem, 0, af[0], wf[0]);
  for (int kt = 0; kt < k_tiles; ++kt) {
    // The stage refilled here held tile kt - 1, whose last reads came before the barrier of
    // iteration kt - 1.
    if (const int next = kt + C::kStages - 1; next < k_tiles) load_stage(next % C::kStages, next);
    ptx::cp_async_commit();
    const float* st = smem + (kt % C::kStages) * C::kStageFloats;
#pragma unroll
    for (int k = 0; k < C::BK; ++k) {
      if (k + 1 < C::BK) {
        load_frags(st, k + 1, af[(k + 1) & 1], wf[(k + 1) & 1]);
      } else {
        // Tile kt + 1 has landed for every thread (and every read of tile kt is issued).
        ptx::cp_async_wait<C::kStages - 2>();
        __syncthreads();
        // (Past the last tile: a stage's stale contents, never used; unconditional, so that
        // the two register sets keep fixed registers.)
        load_frags(smem + ((kt + 1) % C::kStages) * C::kStageFloats, 0, af[0], wf[0]);
      }
      const float4(&a)[C::TM / 4] = af[k & 1];
      const float4(&w)[C::TN / 4] = wf[k & 1];
#pragma unroll
      for (int g = 0; g < C::TM / 4; ++g)
#pragma unroll
        for (int h = 0; h < C::TN / 4; ++h) {
          const float av[4] = {a[g].x, a[g].y, a[g].z, a[g].w}, wv[4] = {w[h].x, w[h].y, w[h].z, w[h].w};
#pragma unroll
          for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[g * 4 + i][h * 4 + j] = fmaf(av[i], wv[j], acc[g * 4 + i][h * 4 + j]);
        }
    }
  }
  ptx::cp_async_wait_all();

#pragma unroll
  for (int r = 0; r < C::TM; ++r) {
    const int64_t m = m0 + wm * 64 + (r / 4) * 32 + lm * 4 + r % 4;
    if (m >= p.M) continue;
#pragma unroll
    for (int h = 0; h < C::TN / 4; ++h) {
      const int64_t n = n0 + wn * 64 + h * 16 + ln * 4;
      if (n >= p.N) continue;
      float v[4] = {acc[r][h * 4], acc[r][h * 4 + 1], acc[r][h * 4 + 2], acc[r][h * 4 + 3]};
      epilogue_store<float>(p, m, n, v);
    }
  }
}

// The copies' row offsets are 32-bit (rows * K < 2^31): beyond that K the launch takes the
// 8-warp kernel instead.
template <class C>
void launch_t_config(const GemmArgs& a, cudaStream_t stream) {
  if (a.K * C::BM >= (int64_t{1} << 31)) {
    launch_config<FmaConfig<128, 128, 8, 8, 1>>(a, stream);
    return;
  }
  const int64_t tiles = ((a.M + C::BM - 1) / C::BM) * ((a.N + C::BN - 1) / C::BN);
  allow_dynamic_smem(gemm_fp32_fma_t_kernel<C>, C::kSmemBytes);
  launch_kernel(gemm_fp32_fma_t_kernel<C>, dim3(static_cast<unsigned>(tiles)), dim3(C::kThreads), C::kSmemBytes,
                stream, 1, a);
  TLB_LAUNCH_CHECK(stream);
}

}  // namespace

std::string fma_tile_name(FmaTile t) {
  switch (t) {
    case FmaTile::m128n128: return "fma_128x128x32_fp32";
    case FmaTile::m128n128_pf: return "fma_128x128x32_pf_fp32";
    case FmaTile::m128n128_t4w: return "fma_128x128x16_w4_fp32";
    case FmaTile::m128n128_t4w_k32: return "fma_128x128x32_w4_fp32";
    default: return "fma_64x64x32_fp32";
  }
}

void launch_gemm_fp32_fma(const GemmArgs& a, FmaTile t, cudaStream_t stream) {
  // 128x128 (8x8 per thread): the throughput tile, 96 KiB of ring, one CTA per SM with the
  // registers ptxas wants (254: every chunk's operands loaded ahead; held to 128 for two CTAs
  // per SM, the loop's pointers spilled and operands moved between registers: 0.86x on an
  // H200). 64x64 (4x4): small GEMMs that would leave most SMs idle with 128x128 tiles, 48
  // KiB, three per SM.
  if (t == FmaTile::m128n128) {
    launch_config<FmaConfig<128, 128, 8, 8, 1>>(a, stream);
  } else if (t == FmaTile::m128n128_pf) {
    launch_config<FmaConfig<128, 128, 8, 8, 1, true>>(a, stream);
  } else if (t == FmaTile::m128n128_t4w) {
    launch_t_config<FmaTConfig<16, 4, 2>>(a, stream);
  } else if (t == FmaTile::m128n128_t4w_k32) {
    launch_t_config<FmaTConfig<32, 3, 2>>(a, stream);
  } else {
    launch_config<FmaConfig<64, 64, 4, 4, 3>>(a, stream);
  }
}

}  // namespace tlb::gemm_detail
