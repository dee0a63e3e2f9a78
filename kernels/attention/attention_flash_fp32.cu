// Flash attention forward for fp32 storage, in the two fp32 math modes: `tf32` on mma.sync
// m16n8k8 (operands rounded to TF32, fp32 accumulate) and `ieee` on plain fp32 FMA. Both use
// the online softmax in fp32, masks in the tile, and the split-KV partial layout of the
// fp16/bf16 kernel. Head widths 64 and 128 (narrower heads, multiples of 8, on the width above
// them with zero-filled columns: portable_width), any seq, every mask; 64 query rows x 32 keys
// (tf32) or 64 keys (ieee) per step; the ieee kernel also at width 96 (fma_width).
#include <cstdint>
#include <stdexcept>
#include <string>

#include "attention/attention_kernels.hpp"
#include "attention/attention_tile.cuh"
#include "common/cuda_check.hpp"
#include "common/launch.cuh"
#include "common/ptx.cuh"

namespace tlb::attn {
namespace {

constexpr int kRows = 64;     // query rows per block
constexpr int kKV = 32;       // keys per tile (64 would double the fp32 tiles past 2 blocks/SM)
constexpr int kThreads = 128; // 4 warps

// ---------------------------------------------------------------------------------------------
// tf32 tensor-core kernel. Tiles are unpadded rows of kD floats (96 KB in all at head_dim 128, so
// the kernel also fits the 99 KB per block of Ada and consumer Ampere parts); an XOR on the
// 8-float group index keeps the fragment reads conflict-free. Q and K are read as float2 (two
// head-dim columns per lane) by lanes whose rows differ in row % 4: group ^= row % 4. V is read
// as single words by lanes whose rows differ in (row / 2) % 4: group ^= (row / 2) % 4. The XOR
// moves whole 16-byte chunks, so cp.async still copies them.
template <int kD>
struct Tf32Layout {
  static constexpr int kQ = kRows * kD, kK = kKV * kD, kV = kKV * kD;
  static constexpr int kBytes = (kQ + 2 * kK + 2 * kV) * 4;
};

enum class Swizzle { qk, v };

template <Swizzle kSw, int kD>
__device__ __forceinline__ int tf32_offset(int row, int col) {
  const int x = kSw == Swizzle::qk ? (row & 3) : ((row >> 1) & 3);
  return row * kD + (col ^ (x << 3));
}

// Rows [row0, row0 + kTileRows) of a [seq, kD] fp32 matrix into a tile by cp.async, 16-byte
// chunk ch of row r at float offset `at(r, ch)`; rows >= seq become zeros. kNarrow: the matrix
// is [seq, width] for a head narrower than the tile, and chunks from column width on become
// zeros too. Thread tid copies chunks tid, tid + kThreads, ... (convert_own_tf32 relies on that
// mapping).
template <int kD, int kTileRows, bool kNarrow, class At>
__device__ __forceinline__ void load_rows_async(float* tile, const float* g, int64_t row0, int64_t seq, int width,
                                                int tid, At at) {
  constexpr int kChunks = kD / 4;
  static_assert((kTileRows * kChunks) % kThreads == 0, "tile must split evenly over the threads");
  if (!kNarrow && row0 + kTileRows <= seq) {
    // Every row inside: one base address, the copies at fixed offsets from it, no selects (the
    // general form below was most of a step's integer work, all of it in one dependent run).
    const float* src = g + row0 * kD;
#pragma unroll
    for (int it = 0; it < kTileRows * kChunks / kThreads; ++it) {
      const int i = tid + it * kThreads;
      const int r = i / kChunks, ch = i % kChunks;
      ptx::cp_async_16_zfill(ptx::smem_addr(tile + at(r, ch)), src + i * 4, true);
    }
    return;
  }
#pragma unroll
  for (int it = 0; it < kTileRows * kChunks / kThreads; ++it) {
    const int i = tid + it * kThreads;
    const int r = i / kChunks, ch = i % kChunks;
    const int64_t row = row0 + r;
    const bool valid = row < seq && (!kNarrow || ch * 4 < width);
    ptx::cp_async_16_zfill(ptx::smem_addr(tile + at(r, ch)), valid ? g + row * (kNarrow ? width : kD) + ch * 4 : g,
                           valid);
  }
}

// The tf32 kernel's tiles: swizzled for its fragment reads. convert_own_tf32 later rounds
// exactly the chunks this thread copied.
template <Swizzle kSw, int kD, int kTileRows, bool kNarrow>
__device__ __forceinline__ void load_f32_async(float* tile, const float* g, int64_t row0,
                                               int64_t seq, int width, int tid) {
  load_rows_async<kD, kTileRows, kNarrow>(tile, g, row0, seq, width, tid,
                                          [](int r, int ch) { return tf32_offset<kSw, kD>(r, ch * 4); });
}

// Rounds this thread's chunks of a landed tile to TF32 in place (once per tile instead of once
// per fragment read). Visible to other threads after the next barrier.
template <Swizzle kSw, int kD, int kTileRows>
__device__ __forceinline__ void convert_own_tf32(float* tile, int tid) {
  constexpr int kChunks = kD / 4;
#pragma unroll
  for (int it = 0; it < kTileRows * kChunks / kThreads; ++it) {
    const int i = tid + it * kThreads;
    const int r = i / kChunks, ch = i % kChunks;
    float4* p = reinterpret_cast<float4*>(tile + tf32_offset<kSw, kD>(r, ch * 4));
    float4 v = *p;
    v.x = __uint_as_float(ptx::to_tf32(__float_as_uint(v.x)));
    v.y = __uint_as_float(ptx::to_tf32(__float_as_uint(v.y)));
    v.z = __uint_as_float(ptx::to_tf32(__float_as_uint(v.z)));
    v.w = __uint_as_float(ptx::to_tf32(__float_as_uint(v.w)));
    *p = v;
  }
}

// 233 / 158 registers (sm_90a, no spills), 96 / 48 KB of shared memory at head_dim 128 / 64.
// kNarrow: the head has p.head_dim < kD columns.
template <int kD, bool kNarrow>
__global__ void __launch_bounds__(kThreads, 2) flash_fwd_tf32(const FlashParams p) {
  ptx::pdl_wait();  // PDL: the inputs may be the previous kernel's output
  ptx::pdl_launch_dependents();
  using L = Tf32Layout<kD>;
  constexpr int kNT = kKV / 8, kDN = kD / 8;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  float* sQ = reinterpret_cast<float*>(smem_raw);
  float* sK = sQ + L::kQ;
  float* sV = sK + 2 * L::kK;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int width = kNarrow ? p.head_dim : kD;
  const auto [c, split, kr, n_tiles, causal, gQ, gK, gV] = block_work<float>(p, kRows, kKV, width);
  const int warp_row = warp * 16;
  const int64_t row0 = c.q0 + warp_row;

  float o[1][kDN][4];
  float m[1][2], l[1][2];
  clear_row_state(o, m, l);

  if (n_tiles > 0) {
    load_f32_async<Swizzle::qk, kD, kRows, kNarrow>(sQ, gQ, c.q0, p.seq, width, tid);
    load_f32_async<Swizzle::qk, kD, kKV, kNarrow>(sK, gK, kr.begin, p.seq, width, tid);
    load_f32_async<Swizzle::v, kD, kKV, kNarrow>(sV, gV, kr.begin, p.seq, width, tid);
    ptx::cp_async_commit();
    ptx::cp_async_wait<0>();
    convert_own_tf32<Swizzle::qk, kD, kRows>(sQ, tid);

    // One barrier per key tile: it publishes tile `it` (loaded during the previous tile's work,
    // each thread having rounded its own chunks) and tells that every warp is done with tile
    // it-1, whose buffers then take it+1.
    for (int it = 0; it < n_tiles; ++it) {
      const int stage = it & 1;
      const int64_t kv0 = kr.begin + static_cast<int64_t>(it) * kKV;
      float* k_tile = sK + stage * L::kK;
      float* v_tile = sV + stage * L::kV;
      ptx::cp_async_wait<0>();
      convert_own_tf32<Swizzle::qk, kD, kKV>(k_tile, tid);
      convert_own_tf32<Swizzle::v, kD, kKV>(v_tile, tid);
      __syncthreads();
      if (it + 1 < n_tiles) {
        load_f32_async<Swizzle::qk, kD, kKV, kNarrow>(sK + (stage ^ 1) * L::kK, gK, kv0 + kKV, p.seq, width, tid);
        load_f32_async<Swizzle::v, kD, kKV, kNarrow>(sV + (stage ^ 1) * L::kV, gV, kv0 + kKV, p.seq, width, tid);
      }
      ptx::cp_async_commit();

      // S = Q K^T. Within each 8-wide k step, logical k index t stands for head-dim column
      // 2t and t+4 for 2t+1 (the same permutation on both operands leaves the dot product
      // unchanged), so each lane reads its two columns with one 8-byte load.
      float s[1][kNT][4] = {};
#pragma unroll
      for (int ks = 0; ks < kD / 8; ++ks) {
        if (kNarrow && ks * 8 >= width) break;  // past the head Q and K are zeros
        const float2 qlo = *reinterpret_cast<const float2*>(sQ + tf32_offset<Swizzle::qk, kD>(warp_row + g, ks * 8 + 2 * t));
        const float2 qhi = *reinterpret_cast<const float2*>(sQ + tf32_offset<Swizzle::qk, kD>(warp_row + g + 8, ks * 8 + 2 * t));
        const uint32_t a[4] = {__float_as_uint(qlo.x), __float_as_uint(qhi.x), __float_as_uint(qlo.y),
                               __float_as_uint(qhi.y)};
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
          const float2 kv = *reinterpret_cast<const float2*>(k_tile + tf32_offset<Swizzle::qk, kD>(nt * 8 + g, ks * 8 + 2 * t));
          const uint32_t b[2] = {__float_as_uint(kv.x), __float_as_uint(kv.y)};
          ptx::mma_m16n8k8_tf32(s[0][nt], a, b);
        }
      }
      if (tile_needs_mask(p, kv0, kKV, kr.end, row0)) mask_scores(s, row0, kv0, kr.end, causal, lane);
      softmax_update<false>(s, o, m, l, p.scale_log2);

      // O += P V. The accumulator gives each lane P at keys 2t and 2t+1 of an 8-key step;
      // logical k index t stands for key 2t and t+4 for key 2t+1, and V is read to match.
#pragma unroll
      for (int kk = 0; kk < kNT; ++kk) {
        const uint32_t a[4] = {ptx::to_tf32(__float_as_uint(s[0][kk][0])), ptx::to_tf32(__float_as_uint(s[0][kk][2])),
                               ptx::to_tf32(__float_as_uint(s[0][kk][1])), ptx::to_tf32(__float_as_uint(s[0][kk][3]))};
#pragma unroll
        for (int dn = 0; dn < kDN; ++dn) {
          if (kNarrow && dn * 8 >= width) break;  // O's columns past the head are never stored
          const uint32_t b[2] = {__float_as_uint(v_tile[tf32_offset<Swizzle::v, kD>(kk * 8 + 2 * t, dn * 8 + g)]),
                                 __float_as_uint(v_tile[tf32_offset<Swizzle::v, kD>(kk * 8 + 2 * t + 1, dn * 8 + g)])};
          ptx::mma_m16n8k8_tf32(o[0][dn], a, b);
        }
      }
    }
  }
  store_rows<float, kD, kNarrow>(p, c, split, row0, o, m, l, lane);
}

// ---------------------------------------------------------------------------------------------
// `ieee` kernel: every product a plain fp32 FMA, 64 query rows x 64 keys per step. Lane l of
// warp w is thread (ty = 4w + l % 4, tx = l / 4): it owns query rows 4ty..4ty+3, so each warp
// owns 16 rows whole; for S it owns keys 4tx..4tx+3 and 32+4tx..+3 of the tile (4 x 8 scores
// from 4 + 8 shared loads per four head-dim columns), for O head-dim columns 32j + 4tx .. +3.
// Shared memory returns one 32-bit register a lane per clock, so the kernel's loads (3 floats
// for every 8 FMAs) would outlast its FMAs unless lanes share them: a 16-byte load whose lanes
// l and l ^ 1 (or l ^ 2) read the same address is documented to take half the wavefronts, and
// the four lanes of a tx read the same K row in S and V row in P V, the loads a thread makes
// most of (8 and 16 for every 4 and 4 of Q and P). What that buys here is a prediction until
// measured (results/perf-log.md, 2026-12-08). Q, K and V stay in their memory layout (rows of kD floats) and come in by cp.async: K and V have one buffer each, and
// each refills while the other is in use (V during S, the next K during PV), with a barrier
// between the two halves of a step. In Q and K a 16-byte chunk q of row r sits at
// q ^ (r / 4 % 8), so the eight keys (and four query rows) a warp reads at once, four apart,
// fall in distinct banks; V is read along its rows and stays as it is. P goes through the
// warp's own rows of shared memory to reach the O layout, chunk q of row r at
// q ^ (2 (r / 4 % 4)): the four rows a warp reads at once fall in distinct banks, and so do
// the eight chunks (two tx, four rows) that each quarter of the warp writes at once.
constexpr int kFmaKV = tile_kv_cols(Family::fp32fma, TileShape{}, 0);
static_assert(kFmaKV == 64, "the S layout below covers 64 keys: two groups of four per thread");

template <int kD>
struct FmaLayout {
  static constexpr int kQ = kRows * kD, kK = kFmaKV * kD, kV = kFmaKV * kD, kP = kRows * kFmaKV;
  static constexpr int kBytes = (kQ + kK + kV + kP) * 4;  // 64 / 88 / 112 KB at head_dim 64 / 96 / 128
  static constexpr int kMinBlocks = kD == 64 ? 3 : 2;
};

__device__ __forceinline__ int fma_chunk_offset(int row, int chunk, int row_floats) {
  return row * row_floats + ((chunk ^ ((row >> 2) & 7)) << 2);
}

// The `ieee` kernel's tiles, committed as one cp.async group: chunks swizzled (Q, K: read four
// head-dim columns of several rows at once) or not (V: read along a row).
template <int kD, int kTileRows, bool kSwizzle, bool kNarrow>
__device__ __forceinline__ void load_fma_tile(float* tile, const float* g, int64_t row0, int64_t seq, int width,
                                              int tid) {
  load_rows_async<kD, kTileRows, kNarrow>(tile, g, row0, seq, width, tid, [](int r, int ch) {
    return kSwizzle ? fma_chunk_offset(r, ch, kD) : r * kD + ch * 4;
  });
  ptx::cp_async_commit();
}

// kNarrow: the head has p.head_dim < kD columns (its output columns 32j + 4tx .. +3 are whole
// inside or outside it, p.head_dim being a multiple of 8).
template <int kD, bool kNarrow>
__global__ void __launch_bounds__(kThreads, FmaLayout<kD>::kMinBlocks) flash_fwd_fp32fma(const FlashParams p) {
  ptx::pdl_wait();  // PDL: the inputs may be the previous kernel's output
  ptx::pdl_launch_dependents();
  using L = FmaLayout<kD>;
  constexpr int kCols = kD / 32;  // float4 column groups per thread in O
  extern __shared__ __align__(128) unsigned char smem_raw[];
  float* sQ = reinterpret_cast<float*>(smem_raw);
  float* sK = sQ + L::kQ;
  float* sV = sK + L::kK;
  float* sP = sV + L::kV;

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int ty = 4 * (tid >> 5) + (lane & 3), tx = lane >> 2;
  const int width = kNarrow ? p.head_dim : kD;
  const BlockWork<float> w = block_work<float>(p, kRows, kFmaKV, width);
  const int64_t row0 = w.c.q0 + 4 * ty;

  float o[4][kCols][4] = {};
  float m[4], l[4];
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    m[r] = neg_inf();
    l[r] = 0.0f;
  }

  if (w.n_tiles > 0) {
    load_fma_tile<kD, kRows, true, kNarrow>(sQ, w.q, w.c.q0, p.seq, width, tid);
    load_fma_tile<kD, kFmaKV, true, kNarrow>(sK, w.k, w.kr.begin, p.seq, width, tid);
    // The swizzles of a thread's rows, worked out: its query rows 4ty + r share r / 4 % 8 = ty % 8
    // (and 2 (ty % 4) in P), its keys 4tx + c and 32 + 4tx + c share tx.
    const float* q_rows = sQ + (4 * ty) * kD;
    const float* k_rows = sK + (4 * tx) * kD;
    float* p_rows = sP + (4 * ty) * kFmaKV;
    const int q_sw = ty & 7, p_sw = 2 * (ty & 3);
    for (int it = 0; it < w.n_tiles; ++it) {
      const int64_t kv0 = w.kr.begin + static_cast<int64_t>(it) * kFmaKV;
      // K of this step has landed for every thread, and every warp is done with the previous
      // step's V: its buffer takes this step's.
      ptx::cp_async_wait<0>();
      __syncthreads();
      load_fma_tile<kD, kFmaKV, false, kNarrow>(sV, w.v, kv0, p.seq, width, tid);

      // S = Q K^T, head-dim columns ascending per score, in runs of eight chunks (32 columns):
      // the swizzles touch only a chunk's low three bits, so within a run they are the same for
      // every run, and the loop stays a run long (the whole head_dim unrolled overflowed the
      // instruction cache: 5 000 instructions a step at head_dim 128).
      float s[4][8] = {};
      // A narrow head's runs past its columns hold zeros of Q and K: skipped.
      const int runs = kNarrow ? (width + 31) / 32 : kD / 32;
#pragma unroll 1
      for (int run = 0; run < runs; ++run) {
#pragma unroll
        for (int u = 0; u < 8; ++u) {
          float4 qa[4], kb[8];
#pragma unroll
          for (int r = 0; r < 4; ++r)
            qa[r] = *reinterpret_cast<const float4*>(q_rows + r * kD + 32 * run + ((u ^ q_sw) << 2));
#pragma unroll
          for (int c = 0; c < 8; ++c)
            kb[c] = *reinterpret_cast<const float4*>(k_rows + ((c / 4) * 32 + c % 4) * kD + 32 * run + ((u ^ tx) << 2));
#pragma unroll
          for (int r = 0; r < 4; ++r)
#pragma unroll
            for (int c = 0; c < 8; ++c) {
              float& x = s[r][c];
              x = fmaf(qa[r].x, kb[c].x, x);
              x = fmaf(qa[r].y, kb[c].y, x);
              x = fmaf(qa[r].z, kb[c].z, x);
              x = fmaf(qa[r].w, kb[c].w, x);
            }
        }
      }
      if (tile_needs_mask(p, kv0, kFmaKV, w.kr.end, row0)) {
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
          for (int c = 0; c < 8; ++c) {
            const int64_t col = kv0 + (c / 4) * 32 + 4 * tx + c % 4;
            if (col >= w.kr.end || (w.causal && col > row0 + r)) s[r][c] = neg_inf();
          }
      }
      // Online softmax; the 8 lanes sharing a row are the lanes with the same lane % 4.
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        // Pairwise, not a chain: eight dependent steps a row were the step's longest wait.
        float mx = fmaxf(m[r], fmaxf(fmaxf(fmaxf(s[r][0], s[r][1]), fmaxf(s[r][2], s[r][3])),
                                     fmaxf(fmaxf(s[r][4], s[r][5]), fmaxf(s[r][6], s[r][7]))));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
        const float ms = mx == neg_inf() ? 0.0f : mx * p.scale_log2;
        const float alpha = ptx::ex2_approx(fmaf(m[r], p.scale_log2, -ms));
#pragma unroll
        for (int c = 0; c < 8; ++c) s[r][c] = ptx::ex2_approx(fmaf(s[r][c], p.scale_log2, -ms));
        const float sum = ((s[r][0] + s[r][1]) + (s[r][2] + s[r][3])) + ((s[r][4] + s[r][5]) + (s[r][6] + s[r][7]));
        l[r] = fmaf(l[r], alpha, sum);
        m[r] = mx;
#pragma unroll
        for (int j = 0; j < kCols; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) o[r][j][e] *= alpha;
#pragma unroll
        for (int h = 0; h < 2; ++h)
          *reinterpret_cast<float4*>(p_rows + r * kFmaKV + (((8 * h + tx) ^ p_sw) << 2)) =
              make_float4(s[r][4 * h], s[r][4 * h + 1], s[r][4 * h + 2], s[r][4 * h + 3]);
      }
      // V of this step has landed for every thread, and every warp is done with K: its buffer
      // takes the next step's. P's rows are the warp's own; the barrier orders them too.
      ptx::cp_async_wait<0>();
      __syncthreads();
      if (it + 1 < w.n_tiles) load_fma_tile<kD, kFmaKV, true, kNarrow>(sK, w.k, kv0 + kFmaKV, p.seq, width, tid);

      // O += P V, keys ascending per output, in runs of four chunks of P (16 keys): P's
      // swizzle moves chunk 4 run + u to run run ^ (p_sw / 4), chunk u ^ (p_sw % 4) there.
#pragma unroll 1
      for (int run = 0; run < kFmaKV / 16; ++run) {
      const int p_run = 16 * (run ^ (p_sw >> 2));
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int k4 = 4 * run + u;
        float4 pr[4];
#pragma unroll
        for (int r = 0; r < 4; ++r)
          pr[r] = *reinterpret_cast<const float4*>(p_rows + p_run + r * kFmaKV + ((u ^ (p_sw & 3)) << 2));
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
          for (int j = 0; j < kCols; ++j) {
            if (kNarrow && 32 * j >= width) break;  // columns past the head are never stored
            const float4 vv = *reinterpret_cast<const float4*>(sV + (4 * k4 + kk) * kD + 32 * j + 4 * tx);
#pragma unroll
            for (int r = 0; r < 4; ++r) {
              const float pk = kk == 0 ? pr[r].x : kk == 1 ? pr[r].y : kk == 2 ? pr[r].z : pr[r].w;
              o[r][j][0] = fmaf(pk, vv.x, o[r][j][0]);
              o[r][j][1] = fmaf(pk, vv.y, o[r][j][1]);
              o[r][j][2] = fmaf(pk, vv.z, o[r][j][2]);
              o[r][j][3] = fmaf(pk, vv.w, o[r][j][3]);
            }
          }
        }
      }
      }
    }
  }

  // Epilogue: row sums over the 8 lanes of the row, then o / l (or the split partials).
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    float lsum = l[r];
    lsum += __shfl_xor_sync(0xffffffffu, lsum, 4);
    lsum += __shfl_xor_sync(0xffffffffu, lsum, 8);
    lsum += __shfl_xor_sync(0xffffffffu, lsum, 16);
    const int64_t row = row0 + r;
    if (row >= p.seq) continue;
    if (p.splits == 1) {
      const float inv = lsum > 0.0f ? 1.0f / lsum : 0.0f;
      float* dst = static_cast<float*>(p.o) + ((w.c.b * p.seq + row) * p.heads + w.c.h) * width + 4 * tx;
#pragma unroll
      for (int j = 0; j < kCols; ++j) {
        if (kNarrow && 32 * j + 4 * tx >= width) continue;
        *reinterpret_cast<float4*>(dst + 32 * j) =
            make_float4(o[r][j][0] * inv, o[r][j][1] * inv, o[r][j][2] * inv, o[r][j][3] * inv);
      }
    } else {
      const int64_t prow = (static_cast<int64_t>(w.split) * p.batch * p.heads + w.c.bh) * p.seq + row;
      float* dst = p.o_part + prow * width + 4 * tx;
#pragma unroll
      for (int j = 0; j < kCols; ++j) {
        if (kNarrow && 32 * j + 4 * tx >= width) continue;
        *reinterpret_cast<float4*>(dst + 32 * j) = make_float4(o[r][j][0], o[r][j][1], o[r][j][2], o[r][j][3]);
      }
      if (tx == 0) {
        const float ms = m[r] == neg_inf() ? neg_inf() : m[r] * p.scale_log2;
        *reinterpret_cast<float2*>(p.ml_part + prow * 2) = make_float2(ms, lsum);
      }
    }
  }
}

template <auto kKernel, int kSmem>
void launch_fp32(const FlashLaunch& l, cudaStream_t stream) {
  allow_dynamic_smem(kKernel, kSmem);
  const int64_t n_qt = (l.p.seq + kRows - 1) / kRows;
  const dim3 grid(static_cast<unsigned>(n_qt * l.p.batch * l.p.heads), static_cast<unsigned>(l.p.splits));
  launch_kernel(kKernel, grid, dim3(kThreads), kSmem, stream, 1, l.p);
  TLB_LAUNCH_CHECK(stream);
}

void check_head_dim(int hd, const char* family) {
  if (!portable_head_dim_ok(hd))
    throw std::invalid_argument(std::string("flash attention ") + family + ": head_dim " + std::to_string(hd) +
                                " is not a multiple of 8 in 8..128");
}

// The two kernels' families: the kernel and its shared memory at each compiled width.
struct Tf32Kernels {
  template <int kD, bool kNarrow>
  static constexpr auto kernel = flash_fwd_tf32<kD, kNarrow>;
  template <int kD>
  static constexpr int smem = Tf32Layout<kD>::kBytes;
};
struct FmaKernels {
  template <int kD, bool kNarrow>
  static constexpr auto kernel = flash_fwd_fp32fma<kD, kNarrow>;
  template <int kD>
  static constexpr int smem = FmaLayout<kD>::kBytes;
};

// The family's kernel of width kD: its own at that head_dim, the narrow one for heads below it.
template <class K, int kD>
void launch_width(const FlashLaunch& l, cudaStream_t stream) {
  if (l.p.head_dim == kD) return launch_fp32<K::template kernel<kD, false>, K::template smem<kD>>(l, stream);
  launch_fp32<K::template kernel<kD, true>, K::template smem<kD>>(l, stream);
}

}  // namespace

// The tf32 kernel at widths 64 and 128 (portable_width), the FMA kernel also at 96 (fma_width).
void launch_flash_tf32(const FlashLaunch& l, cudaStream_t stream) {
  check_head_dim(l.p.head_dim, "tf32");
  if (portable_width(l.p.head_dim) == 64) return launch_width<Tf32Kernels, 64>(l, stream);
  launch_width<Tf32Kernels, 128>(l, stream);
}

void launch_flash_fp32fma(const FlashLaunch& l, cudaStream_t stream) {
  check_head_dim(l.p.head_dim, "fp32");
  switch (fma_width(l.p.head_dim)) {
    case 64: return launch_width<FmaKernels, 64>(l, stream);
    case 96: return launch_width<FmaKernels, 96>(l, stream);
    default: return launch_width<FmaKernels, 128>(l, stream);
  }
}

}  // namespace tlb::attn
