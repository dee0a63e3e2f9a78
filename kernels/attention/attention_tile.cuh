// Device pieces shared by the tensor-core attention kernels (fp16/bf16 m16n8k16 and tf32
// m16n8k8), which both hold S and O in the m16n8 accumulator layout: lane (g = lane/4,
// t = lane%4) owns rows g and g+8 of each 16-row tile and columns 2t, 2t+1 of each 8-column
// tile. Block coordinates, key ranges, masking, the online softmax and the epilogue (final
// output or split-KV partials) are written once here against that layout.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "attention/attention_kernels.hpp"
#include "common/dtype_traits.cuh"
#include "common/exp2_fma.hpp"
#include "common/ptx.cuh"

namespace tlb::attn {

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000u); }

// Which (batch*head, query tile) this block computes. Causal blocks are numbered heaviest
// tile first within each head, so the long rows start early and the short ones fill the tail
// of the grid. (Heaviest first across groups of heads sized to L2, every head's heaviest tile
// before any head's next, measured 2-5 % slower on an H200 at head_dim 128: 16 heads of 16384
// keys 651 -> 619 TFLOP/s, 8 x 16 heads of 4096 keys 562 -> 550.)
struct BlockCoord {
  int64_t bh, b, h, q0;
};
// `index` counts (batch*head, query tile) pairs: blockIdx.x for a block per tile, the work item
// of a persistent block.
__device__ __forceinline__ BlockCoord block_coord(const FlashParams& p, int q_rows, int64_t index) {
  const int64_t n_qt = (p.seq + q_rows - 1) / q_rows;
  int64_t qt = index % n_qt;
  const int64_t bh = index / n_qt;
  if (p.mask == static_cast<int>(MaskKind::causal)) qt = n_qt - 1 - qt;
  return {bh, bh / p.heads, bh % p.heads, qt * q_rows};
}

// Keys this block visits: [begin, end), and every key >= end is masked. end is seq, or
// valid_len under padding; causal stops at the tile's last query row (so fully masked key tiles
// are never loaded, and the keys past it are causally masked anyway); a split stops at its own
// range, so a tile running past it cannot count the next range's keys.
struct KeyRange {
  int64_t begin, end;
};
__device__ __forceinline__ KeyRange key_range(const FlashParams& p, const BlockCoord& c,
                                              int q_rows, int split) {
  int64_t end = p.seq;
  if (p.mask == static_cast<int>(MaskKind::padding)) {
    const int64_t v = p.valid_lens[c.b];
    end = v < 0 ? 0 : (v < p.seq ? v : p.seq);
  }
  if (p.mask == static_cast<int>(MaskKind::causal) && c.q0 + q_rows < end) end = c.q0 + q_rows;
  int64_t begin = 0;
  if (p.splits > 1) {
    begin = static_cast<int64_t>(split) * p.keys_per_split;
    if (begin + p.keys_per_split < end) end = begin + p.keys_per_split;
  }
  return {begin, end};
}

// What every attention kernel's block starts from: its (batch, head) and first query row, the
// keys of its split, how many kv_tile-key tiles they make, and the head's Q, K and V (each
// [seq, head_dim] of type T).
template <typename T>
struct BlockWork {
  BlockCoord c;
  int split;  // blockIdx.y: which range of keys (split-KV), 0 without splits
  KeyRange kr;
  int n_tiles;
  bool causal;
  const T *q, *k, *v;
};
template <typename T>
__device__ __forceinline__ BlockWork<T> block_work(const FlashParams& p, int q_rows, int kv_tile,
                                                   int head_dim, int64_t index, int split) {
  BlockWork<T> w;
  w.c = block_coord(p, q_rows, index);
  w.split = split;
  w.kr = key_range(p, w.c, q_rows, w.split);
  w.n_tiles = w.kr.end > w.kr.begin ? static_cast<int>((w.kr.end - w.kr.begin + kv_tile - 1) / kv_tile) : 0;
  w.causal = p.mask == static_cast<int>(MaskKind::causal);
  const int64_t head_off = w.c.bh * p.seq * head_dim;
  w.q = static_cast<const T*>(p.q) + head_off;
  w.k = static_cast<const T*>(p.k) + head_off;
  w.v = static_cast<const T*>(p.v) + head_off;
  return w;
}
// A block per (query tile, batch*head) along x and key range along y.
template <typename T>
__device__ __forceinline__ BlockWork<T> block_work(const FlashParams& p, int q_rows, int kv_tile,
                                                   int head_dim) {
  return block_work<T>(p, q_rows, kv_tile, head_dim, blockIdx.x, static_cast<int>(blockIdx.y));
}

// Whether any element of a key tile needs the mask for rows [row0, row0 + 16*MT): the tile
// runs past the block's key range, or (causal) reaches above the diagonal of the first row.
__device__ __forceinline__ bool tile_needs_mask(const FlashParams& p, int64_t kv0, int kv_cols,
                                                int64_t limit, int64_t row0) {
  return kv0 + kv_cols > limit ||
         (p.mask == static_cast<int>(MaskKind::causal) && kv0 + kv_cols - 1 > row0);
}

// Sets masked scores to -inf: key >= limit (the block's key range end), or (causal) key > query.
// The comparisons run on 32-bit offsets from the tile's corner (the tile's keys and rows are
// within a few hundred of it), not on 64-bit positions per element.
template <int MT, int NT>
__device__ __forceinline__ void mask_scores(float (&s)[MT][NT][4], int64_t row0, int64_t kv0,
                                            int64_t limit, bool causal, int lane) {
  const int g = lane >> 2, t = lane & 3;
  constexpr int64_t kFar = 1 << 30;  // beyond every tile: the comparison it feeds is decided
  const int keys = static_cast<int>(limit - kv0 < kFar ? limit - kv0 : kFar);  // visible: col < keys
  // Causal: col is visible while col <= row + diag.
  const int64_t d = row0 - kv0;
  const int diag = causal ? static_cast<int>(d < -kFar ? -kFar : (d > kFar ? kFar : d)) : kFar;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = mt * 16 + g + ((e >> 1) << 3);
        const int col = nt * 8 + 2 * t + (e & 1);
        if (col >= keys || col > row + diag) s[mt][nt][e] = neg_inf();
      }
}

// The online softmax's starting point: O = 0, running max -inf, running sum 0.
template <int MT, int DN>
__device__ __forceinline__ void clear_row_state(float (&o)[MT][DN][4], float (&m)[MT][2], float (&l)[MT][2]) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int dn = 0; dn < DN; ++dn)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mt][dn][e] = 0.0f;
    m[mt][0] = m[mt][1] = neg_inf();
    l[mt][0] = l[mt][1] = 0.0f;
  }
}

// Whether 8-key column nt of a tile takes exp2_fma when every `every`-th does (0: none).
__host__ __device__ constexpr bool fma_exp_column(int nt, int every) { return every > 0 && nt % every == every - 1; }

// The scores half of one online-softmax step over a tile of raw scores s (scale not yet
// applied): updates the running max m (raw units) and the running sum l (this lane's columns
// only; the quad's partial sums are added once at the end, since every rescale factor is shared
// by the row), leaves exp2(s*scale_log2 - m*scale_log2) in s and the factor O must be rescaled
// by in alpha. Returns whether any row of the warp needs a rescale: once the running maxima
// settle, most tiles leave every max of the warp unchanged (factor exactly 1), and the warp
// skips the O rescale, the bulk of the softmax's arithmetic. A row whose keys are all masked so
// far keeps m = -inf and contributes exact zeros, never NaN.
// kFmaExpEvery > 0: every kFmaExpEvery-th 8-column tile of s takes its exponentials on the FMA
// pipe (exp2_fma), the rest on the special-function unit.
template <int MT, int NT, int kFmaExpEvery = 0>
__device__ __forceinline__ bool softmax_scores(float (&s)[MT][NT][4], float (&m)[MT][2],
                                               float (&l)[MT][2], float (&alpha)[MT][2],
                                               float scale_log2) {
  bool rescale = false;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = m[mt][h];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * h], s[mt][nt][2 * h + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float ms = mx == neg_inf() ? 0.0f : mx * scale_log2;
      float sum = 0.0f;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 2 * h; e < 2 * h + 2; ++e) {
          const float x = fmaf(s[mt][nt][e], scale_log2, -ms);
          const float pv = fma_exp_column(nt, kFmaExpEvery) ? exp2_fma(x) : ptx::ex2_approx(x);
          s[mt][nt][e] = pv;
          sum += pv;
        }
      // (-inf - finite) gives factor 0 for a row's first visible key; an unchanged max
      // (including a still fully masked row) gives exactly 1.
      alpha[mt][h] = mx == m[mt][h] ? 1.0f : ptx::ex2_approx((m[mt][h] - mx) * scale_log2);
      rescale |= alpha[mt][h] != 1.0f;
      l[mt][h] = fmaf(l[mt][h], alpha[mt][h], sum);
      m[mt][h] = mx;
    }
  return __any_sync(0xffffffffu, rescale);
}

template <int MT, int DN>
__device__ __forceinline__ void rescale_o(float (&o)[MT][DN][4], const float (&alpha)[MT][2]) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int dn = 0; dn < DN; ++dn) {
      o[mt][dn][0] *= alpha[mt][0];
      o[mt][dn][1] *= alpha[mt][0];
      o[mt][dn][2] *= alpha[mt][1];
      o[mt][dn][3] *= alpha[mt][1];
    }
}

// One whole online-softmax step: scores, then the O rescale where a max moved.
// kFirst: O and l are still zero, nothing to rescale.
template <bool kFirst, int MT, int NT, int DN>
__device__ __forceinline__ void softmax_update(float (&s)[MT][NT][4], float (&o)[MT][DN][4],
                                               float (&m)[MT][2], float (&l)[MT][2],
                                               float scale_log2) {
  float alpha[MT][2];
  const bool rescale = softmax_scores(s, m, l, alpha, scale_log2);
  if constexpr (!kFirst) {
    if (rescale) rescale_o(o, alpha);
  }
}

// Writes this warp's rows: o / l in T to o[b, row, h, :] (rows < seq), or, for a split, the
// unnormalised fp32 O and (m*scale_log2, l) to the partial buffers for the combine step.
// Every lane must call it (the row sums are reduced across the quad). kNarrow: the kernel
// computed kD columns for a head of p.head_dim <= kD, and only those are stored.
template <typename T, int kD, bool kNarrow = false, int MT, int DN>
__device__ __forceinline__ void store_rows(const FlashParams& p, const BlockCoord& c, int split,
                                           int64_t row0, const float (&o)[MT][DN][4],
                                           const float (&m)[MT][2], const float (&l)[MT][2],
                                           int lane) {
  const int g = lane >> 2, t = lane & 3;
  const int width = kNarrow ? p.head_dim : kD;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float lsum = l[mt][h];
      lsum += __shfl_xor_sync(0xffffffffu, lsum, 1);
      lsum += __shfl_xor_sync(0xffffffffu, lsum, 2);
      const int64_t row = row0 + mt * 16 + g + 8 * h;
      if (row >= p.seq) continue;
      if (p.splits == 1) {
        const float inv = lsum > 0.0f ? 1.0f / lsum : 0.0f;
        T* dst = static_cast<T*>(p.o) + ((c.b * p.seq + row) * p.heads + c.h) * width + 2 * t;
#pragma unroll
        for (int dn = 0; dn < DN; ++dn) {
          if (kNarrow && dn * 8 >= width) break;
          const float x0 = o[mt][dn][2 * h] * inv, x1 = o[mt][dn][2 * h + 1] * inv;
          if constexpr (std::is_same_v<T, float>) {
            *reinterpret_cast<float2*>(dst + dn * 8) = make_float2(x0, x1);
          } else {
            *reinterpret_cast<uint32_t*>(dst + dn * 8) = pack2<T>(x0, x1);
          }
        }
      } else {
        const int64_t prow = (static_cast<int64_t>(split) * p.batch * p.heads + c.bh) * p.seq + row;
        float* dst = p.o_part + prow * width + 2 * t;
#pragma unroll
        for (int dn = 0; dn < DN; ++dn) {
          if (kNarrow && dn * 8 >= width) break;
          *reinterpret_cast<float2*>(dst + dn * 8) = make_float2(o[mt][dn][2 * h], o[mt][dn][2 * h + 1]);
        }
        if (t == 0) {
          const float ms = m[mt][h] == neg_inf() ? neg_inf() : m[mt][h] * p.scale_log2;
          *reinterpret_cast<float2*>(p.ml_part + prow * 2) = make_float2(ms, lsum);
        }
      }
    }
}

// ---- Warpgroup-MMA helpers (the sm_90a kernels).

// Keeps reads of wgmma accumulators after the wait that completes them.
template <int N>
__device__ __forceinline__ void fence_operands(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Keys are stored in this order within each group of 8 in attention's V^T workspace (the tf32
// wgmma kernel's V): position p holds key 2p (p < 4) or 2(p - 4) + 1. pack_p<float> below then
// needs no shuffle.
__host__ __device__ constexpr int tf32_v_position(int key_in_group) {
  return (key_in_group & 1) ? 4 + (key_in_group >> 1) : key_in_group >> 1;
}

// P (scores after the softmax) rounded to T as the A operand of P V (wgmma with A in
// registers). 16-bit: the accumulator layout of two adjacent n8 tiles is the A layout of one
// k16 step. tf32: a k8 step's A fragment holds k t and t + 4 where the accumulators hold
// columns 2t and 2t + 1 of an n8 tile; with V^T's keys in tf32_v_position's order, k t is key
// 2t and k t + 4 key 2t + 1, so each n8 tile is one k8 step as it stands.
template <typename T, int kNT, int kSteps>
__device__ __forceinline__ void pack_p(uint32_t (&pa)[kSteps][4], const float (&s)[1][kNT][4]) {
  if constexpr (std::is_same_v<T, float>) {
    static_assert(kSteps == kNT, "a tf32 k8 step per n8 tile");
#pragma unroll
    for (int kk = 0; kk < kNT; ++kk) {
      pa[kk][0] = ptx::to_tf32(__float_as_uint(s[0][kk][0]));  // row g, key 2t
      pa[kk][1] = ptx::to_tf32(__float_as_uint(s[0][kk][2]));  // row g + 8, key 2t
      pa[kk][2] = ptx::to_tf32(__float_as_uint(s[0][kk][1]));  // row g, key 2t + 1
      pa[kk][3] = ptx::to_tf32(__float_as_uint(s[0][kk][3]));  // row g + 8, key 2t + 1
    }
  } else {
    static_assert(kSteps == kNT / 2, "a k16 step per two n8 tiles");
#pragma unroll
    for (int kk = 0; kk < kNT / 2; ++kk) {
      pa[kk][0] = pack2<T>(s[0][2 * kk][0], s[0][2 * kk][1]);
      pa[kk][1] = pack2<T>(s[0][2 * kk][2], s[0][2 * kk][3]);
      pa[kk][2] = pack2<T>(s[0][2 * kk + 1][0], s[0][2 * kk + 1][1]);
      pa[kk][3] = pack2<T>(s[0][2 * kk + 1][2], s[0][2 * kk + 1][3]);
    }
  }
}

// ---- 16-bit tiles for the ldmatrix-fed kernels.

// Shared tiles are rows of kD 16-bit elements, i.e. kD/8 16-byte chunks. Chunk c of row r is
// stored at chunk c ^ (r % 8): the eight rows one ldmatrix phase reads then sit on eight
// different bank groups (128- and 256-byte rows would otherwise all start on bank 0).
template <int kD>
__device__ __forceinline__ int swizzled(int row, int chunk) {
  return row * kD + ((chunk ^ (row & 7)) << 3);
}

// rows [row0, row0 + kRows) of a [seq, kD] matrix into a swizzled tile; rows >= seq become
// zeros (their scores are masked, and a zero V row cannot turn a masked 0 into NaN). kNarrow:
// the matrix is [seq, width] for a head narrower than the tile (a multiple of 8 below kD), and
// the tile's columns from width on become zeros too.
template <typename T, int kD, int kRows, int kThreads, bool kNarrow = false>
__device__ __forceinline__ void load_tile_async(T* tile, const T* g, int64_t row0, int64_t seq,
                                                int tid, int width = kD) {
  constexpr int kChunks = kD / 8;
  static_assert((kRows * kChunks) % kThreads == 0, "tile must split evenly over the threads");
  const int stride = kNarrow ? width : kD;
#pragma unroll
  for (int it = 0; it < kRows * kChunks / kThreads; ++it) {
    const int i = tid + it * kThreads;
    const int r = i / kChunks, ch = i % kChunks;
    const int64_t row = row0 + r;
    const bool valid = row < seq && (!kNarrow || ch * 8 < width);
    const T* src = valid ? g + row * stride + ch * 8 : g;
    ptx::cp_async_16_zfill(ptx::smem_addr(tile + swizzled<kD>(r, ch)), src, valid);
  }
}

// A fragments of Q for k-step ks (16 head-dim columns), m tile mt of this warp. Lanes 0-15
// address rows 0-15 at the low 8 columns, lanes 16-31 the same rows at the high 8 columns.
template <int kD>
__device__ __forceinline__ void load_q_frag(uint32_t (&a)[4], uint32_t sq, int warp_row, int ks,
                                            int lane) {
  const int row = warp_row + (lane & 15);
  const int chunk = 2 * ks + (lane >> 4);
  ptx::ldmatrix_x4(a, sq + 2 * swizzled<kD>(row, chunk));
}

}  // namespace tlb::attn
