// Flash attention forward for fp16/bf16 on mma.sync m16n8k16 (sm_80 and later): S = Q K^T and
// O += P V on tensor cores with fp32 accumulation, the online softmax in registers, masks in
// the tile; plus the split-KV combine step (any dtype, any head_dim up to 256). The tiles: head
// widths 64, 128 and 256 (narrower heads, multiples of 8, on the width above them with
// zero-filled columns: portable_width), any seq, every mask.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "attention/attention_kernels.hpp"
#include "attention/attention_tile.cuh"
#include "common/cuda_check.hpp"
#include "common/dtype_traits.cuh"
#include "common/launch.cuh"
#include "common/ptx.cuh"

namespace tlb::attn {
namespace {

// The compiled tile shapes (see TileShape). kMT: 16-row m tiles per warp. kQRegs: Q's
// fragments are loaded into registers once instead of re-read from shared memory for every key
// tile (affordable with one m tile per warp). kSingle: every key fits in one tile.
// Registers (sm_90a, no spills) and shared memory per block, head_dim 128 / 64:
//   q128w8    242 / 126 regs, 96 / 32 KB: one block per SM at 128, two at 64 (32-key tiles
//             there: 64-key scores next to Q and O would spill at the 128-register cap)
//   q128w4    255 / 189 regs, 64 / 32 KB, two blocks per SM
//   q64w4     255 / 180 regs, 80 / 40 KB, two blocks per SM; at 256 (the only tile there)
//             Q is re-read from shared memory and tiles are 32 keys: 254 regs, 96 KB
//   short64   160 / 116 regs, 48 / 24 KB
//   short128  190 / 152 regs, 80 / 40 KB
template <TileShape S, int kD>
struct Tile;
template <int kD>
struct Tile<TileShape::q128w8, kD> {
  static_assert(kD <= 128, "heads over 128 run q64w4 alone");
  static constexpr int kRows = 128, kMT = 1, kKV = kD == 128 ? 64 : 32;
  static constexpr bool kQRegs = true, kSingle = false;
};
template <int kD>
struct Tile<TileShape::q128w4, kD> {
  // 32-key tiles: with two m tiles per warp, 64-key scores would not fit next to O in 255
  // registers without spilling.
  static constexpr int kRows = 128, kMT = 2, kKV = 32;
  static constexpr bool kQRegs = false, kSingle = false;
};
template <int kD>
struct Tile<TileShape::q64w4, kD> {
  static constexpr int kRows = 64, kMT = 1, kKV = kD <= 128 ? 64 : 32;
  static constexpr bool kQRegs = kD <= 128, kSingle = false;
};
template <int kD>
struct Tile<TileShape::short64, kD> {
  static constexpr int kRows = 64, kMT = 1, kKV = 64;
  static constexpr bool kSingle = true;
};
template <int kD>
struct Tile<TileShape::short128, kD> {
  static constexpr int kRows = 64, kMT = 1, kKV = 128;
  static constexpr bool kSingle = true;
};

template <TileShape S>
constexpr int kThreadsOf = Tile<S, 64>::kRows / (16 * Tile<S, 64>::kMT) * 32;

// Blocks per SM the register allocation must leave room for (launch bounds).
template <int kD, TileShape S>
constexpr int min_blocks() {
  return kThreadsOf<S> == 128 || kD == 64 ? 2 : 1;
}

template <int kD, TileShape S>
constexpr int smem_bytes() {
  using C = Tile<S, kD>;
  return (C::kRows + (C::kSingle ? 2 : 4) * C::kKV) * kD * 2;
}

// S += Q K^T for this warp's rows against one key tile, over the first `steps` k16 steps of
// the head (kD / 16, or fewer for a narrow head: past its columns Q and K are zeros).
template <typename T, int kD, int kMT, int kKV, bool kQRegs>
__device__ __forceinline__ void compute_scores(float (&s)[kMT][kKV / 8][4],
                                               const uint32_t (&qf)[kMT][kD / 16][4],
                                               uint32_t sq, uint32_t sk, int warp_row, int lane,
                                               int steps = kD / 16) {
  // K as the col-major B operand: matrices (keys 0-7, cols lo), (keys 0-7, cols hi),
  // (keys 8-15, cols lo), (keys 8-15, cols hi) of a 16-key pair of n tiles.
  const int k_row = (lane & 7) + ((lane >> 4) << 3);
  const int k_hi = (lane >> 3) & 1;
#pragma unroll
  for (int ks = 0; ks < kD / 16; ++ks) {
    if (ks >= steps) break;
    uint32_t a[kMT][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
      if constexpr (kQRegs) {
#pragma unroll
        for (int r = 0; r < 4; ++r) a[mt][r] = qf[mt][ks][r];
      } else {
        load_q_frag<kD>(a[mt], sq, warp_row + mt * 16, ks, lane);
      }
    }
#pragma unroll
    for (int np = 0; np < kKV / 16; ++np) {
      uint32_t b[4];
      ptx::ldmatrix_x4(b, sk + 2 * swizzled<kD>(np * 16 + k_row, 2 * ks + k_hi));
      const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        ptx::mma_m16n8k16<T>(s[mt][2 * np], a[mt], b0);
        ptx::mma_m16n8k16<T>(s[mt][2 * np + 1], a[mt], b1);
      }
    }
  }
}

// O += P V: P comes straight from the score accumulators (the C layout of two adjacent n8
// tiles is the A layout of one k16 step), rounded to T as the second product's input. Only the
// first `steps` pairs of n8 tiles of O (kD / 16, or fewer for a narrow head, whose other
// columns are never stored).
template <typename T, int kD, int kMT, int kKV>
__device__ __forceinline__ void accumulate_pv(float (&o)[kMT][kD / 8][4],
                                              const float (&s)[kMT][kKV / 8][4], uint32_t sv,
                                              int lane, int steps = kD / 16) {
  // V is stored key-major, so the transposing ldmatrix yields the B operand: matrices
  // (keys 0-7, d lo), (keys 8-15, d lo), (keys 0-7, d hi), (keys 8-15, d hi).
  const int v_row = lane & 15;
  const int v_hi = lane >> 4;
#pragma unroll
  for (int kk = 0; kk < kKV / 16; ++kk) {
    uint32_t a[kMT][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
      a[mt][0] = pack2<T>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
      a[mt][1] = pack2<T>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
      a[mt][2] = pack2<T>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
      a[mt][3] = pack2<T>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
    }
#pragma unroll
    for (int dp = 0; dp < kD / 16; ++dp) {
      if (dp >= steps) break;
      uint32_t b[4];
      ptx::ldmatrix_x4_trans(b, sv + 2 * swizzled<kD>(kk * 16 + v_row, 2 * dp + v_hi));
      const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        ptx::mma_m16n8k16<T>(o[mt][2 * dp], a[mt], b0);
        ptx::mma_m16n8k16<T>(o[mt][2 * dp + 1], a[mt], b1);
      }
    }
  }
}

// One block: kRows query rows of one (batch, head) against the keys of its range (all of them,
// or one split's). Key/value tiles are double-buffered with cp.async: the next tile's loads
// are in flight while this one is multiplied. kNarrow: the head has p.head_dim < kD columns.
template <typename T, int kD, TileShape kShape, bool kNarrow>
__global__ void __launch_bounds__(kThreadsOf<kShape>, min_blocks<kD, kShape>())
    flash_fwd_mma16(const FlashParams p) {
  ptx::pdl_wait();  // PDL: the inputs may be the previous kernel's output
  ptx::pdl_launch_dependents();
  using C = Tile<kShape, kD>;
  constexpr int kRows = C::kRows, kMT = C::kMT, kKV = C::kKV;
  constexpr int kThreads = kThreadsOf<kShape>;
  constexpr int kNT = kKV / 8, kDN = kD / 8, kKS = kD / 16;
  constexpr int kTileBytes = kKV * kD * 2;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + kRows * kD;
  T* sV = sK + (C::kSingle ? 1 : 2) * kKV * kD;
  const uint32_t sq = ptx::smem_addr(sQ), sk = ptx::smem_addr(sK), sv = ptx::smem_addr(sV);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int width = kNarrow ? p.head_dim : kD;
  const int head_steps = kNarrow ? (width + 15) / 16 : kD / 16;  // k16 steps (and n16 of O) of the head
  const auto [c, split, kr, n_tiles, causal, gQ, gK, gV] = block_work<T>(p, kRows, kKV, width);
  const int warp_row = warp * 16 * kMT;           // in the block's tile
  const int64_t row0 = c.q0 + warp_row;           // in the sequence

  float o[kMT][kDN][4];
  float m[kMT][2], l[kMT][2];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int dn = 0; dn < kDN; ++dn)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mt][dn][e] = 0.0f;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      m[mt][h] = neg_inf();
      l[mt][h] = 0.0f;
    }
  }

  if (n_tiles > 0) {
    uint32_t qf[kMT][kKS][4];
    load_tile_async<T, kD, kRows, kThreads, kNarrow>(sQ, gQ, c.q0, p.seq, tid, width);
    load_tile_async<T, kD, kKV, kThreads, kNarrow>(sK, gK, kr.begin, p.seq, tid, width);
    load_tile_async<T, kD, kKV, kThreads, kNarrow>(sV, gV, kr.begin, p.seq, tid, width);
    ptx::cp_async_commit();

    if constexpr (C::kSingle) {
      ptx::cp_async_wait<0>();
      __syncthreads();
      float s[kMT][kNT][4] = {};
      compute_scores<T, kD, kMT, kKV, false>(s, qf, sq, sk, warp_row, lane, head_steps);
      if (tile_needs_mask(p, kr.begin, kKV, kr.end, row0))
        mask_scores(s, row0, kr.begin, kr.end, causal, lane);
      softmax_update<true>(s, o, m, l, p.scale_log2);
      accumulate_pv<T, kD, kMT, kKV>(o, s, sv, lane, head_steps);
    } else {
      constexpr bool kQRegs = C::kQRegs;
      if constexpr (kQRegs) {
        ptx::cp_async_wait<0>();
        __syncthreads();
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int ks = 0; ks < kKS; ++ks) load_q_frag<kD>(qf[mt][ks], sq, warp_row + mt * 16, ks, lane);
      }
      // One barrier per key tile: it publishes tile `it` (loaded during the previous tile's
      // work) and tells that every warp is done with tile it-1, whose buffers then take it+1.
      for (int it = 0; it < n_tiles; ++it) {
        const int stage = it & 1;
        const int64_t kv0 = kr.begin + static_cast<int64_t>(it) * kKV;
        ptx::cp_async_wait<0>();
        __syncthreads();
        if (it + 1 < n_tiles) {
          load_tile_async<T, kD, kKV, kThreads, kNarrow>(sK + (stage ^ 1) * kKV * kD, gK, kv0 + kKV, p.seq, tid, width);
          load_tile_async<T, kD, kKV, kThreads, kNarrow>(sV + (stage ^ 1) * kKV * kD, gV, kv0 + kKV, p.seq, tid, width);
        }
        ptx::cp_async_commit();

        float s[kMT][kNT][4] = {};
        compute_scores<T, kD, kMT, kKV, kQRegs>(s, qf, sq, sk + stage * kTileBytes, warp_row, lane, head_steps);
        if (tile_needs_mask(p, kv0, kKV, kr.end, row0)) mask_scores(s, row0, kv0, kr.end, causal, lane);
        softmax_update<false>(s, o, m, l, p.scale_log2);
        accumulate_pv<T, kD, kMT, kKV>(o, s, sv + stage * kTileBytes, lane, head_steps);
      }
    }
  }
  store_rows<T, kD, kNarrow>(p, c, split, row0, o, m, l, lane);
}

// Merges the split-KV partials of one row per warp: O = sum_s 2^(m_s - M) O_s / sum_s 2^(m_s - M) l_s
// over the splits that saw a visible key (l_s > 0); a row with none is written as zeros. Lane
// i owns columns [i * kPer, (i + 1) * kPer) of the p.head_dim <= 32 * kPer columns.
template <typename T, int kPer>
__global__ void __launch_bounds__(128) flash_splitkv_combine(const FlashParams p) {
  ptx::pdl_wait();  // PDL: the inputs may be the previous kernel's output
  ptx::pdl_launch_dependents();
  const int64_t bhs = p.batch * p.heads * p.seq;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * 4 + (threadIdx.x >> 5);
  if (r >= bhs) return;
  const int lane = threadIdx.x & 31;
  const int width = p.head_dim, col0 = lane * kPer;
  if (col0 >= width) return;
  // Whole 16-byte runs where the lane's columns are all inside the row.
  const bool vector = kPer % 4 == 0 && col0 + kPer <= width;
  const int64_t bh = r / p.seq, row = r % p.seq;
  const int64_t split_stride = bhs;  // rows per split

  float mx = neg_inf();
  for (int sp = 0; sp < p.splits; ++sp) {
    const float2 ml = *reinterpret_cast<const float2*>(p.ml_part + (sp * split_stride + r) * 2);
    if (ml.y > 0.0f) mx = fmaxf(mx, ml.x);
  }
  float acc[kPer] = {};
  float lsum = 0.0f;
  for (int sp = 0; sp < p.splits; ++sp) {
    const int64_t pr = sp * split_stride + r;
    const float2 ml = *reinterpret_cast<const float2*>(p.ml_part + pr * 2);
    if (!(ml.y > 0.0f)) continue;  // no visible key in this range: its O is not meaningful
    const float w = ptx::ex2_approx(ml.x - mx);
    lsum = fmaf(w, ml.y, lsum);
    const float* src = p.o_part + pr * width + col0;
    if (vector) {
#pragma unroll
      for (int e = 0; e < kPer; e += 4) {
        const float4 v = *reinterpret_cast<const float4*>(src + e);
        acc[e] = fmaf(w, v.x, acc[e]);
        acc[e + 1] = fmaf(w, v.y, acc[e + 1]);
        acc[e + 2] = fmaf(w, v.z, acc[e + 2]);
        acc[e + 3] = fmaf(w, v.w, acc[e + 3]);
      }
    } else {
#pragma unroll
      for (int e = 0; e < kPer; ++e)
        if (col0 + e < width) acc[e] = fmaf(w, src[e], acc[e]);
    }
  }
  const float inv = lsum > 0.0f ? 1.0f / lsum : 0.0f;
  const int64_t b = bh / p.heads, h = bh % p.heads;
  T* dst = static_cast<T*>(p.o) + ((b * p.seq + row) * p.heads + h) * width + col0;
#pragma unroll
  for (int e = 0; e < kPer; ++e)
    if (col0 + e < width) dst[e] = from_float<T>(acc[e] * inv);
}

template <typename T, int kD, TileShape kShape, bool kNarrow>
void launch_tile(const FlashLaunch& l, cudaStream_t stream) {
  constexpr int kSmem = smem_bytes<kD, kShape>();
  auto kernel = flash_fwd_mma16<T, kD, kShape, kNarrow>;
  allow_dynamic_smem(kernel, kSmem);
  const int64_t n_qt = (l.p.seq + Tile<kShape, kD>::kRows - 1) / Tile<kShape, kD>::kRows;
  static_assert(Tile<kShape, kD>::kKV == tile_kv_cols(Family::mma16, kShape, kD), "plan and kernel disagree");
  const dim3 grid(static_cast<unsigned>(n_qt * l.p.batch * l.p.heads), static_cast<unsigned>(l.p.splits));
  launch_kernel(kernel, grid, dim3(kThreadsOf<kShape>), kSmem, stream, 1, l.p);
  TLB_LAUNCH_CHECK(stream);
}

template <typename T, int kD>
void launch_dim(const FlashLaunch& l, cudaStream_t stream) {
  switch (l.tile) {
    case TileShape::q128w8: return launch_tile<T, kD, TileShape::q128w8, false>(l, stream);
    case TileShape::q128w4: return launch_tile<T, kD, TileShape::q128w4, false>(l, stream);
    case TileShape::q64w4: return launch_tile<T, kD, TileShape::q64w4, false>(l, stream);
    case TileShape::short64: return launch_tile<T, kD, TileShape::short64, false>(l, stream);
    case TileShape::short128: return launch_tile<T, kD, TileShape::short128, false>(l, stream);
  }
  throw std::invalid_argument("flash attention: unknown tile shape");
}

// A head narrower than kD: the two standard tiles only (portable_width's comment).
template <typename T, int kD>
void launch_narrow(const FlashLaunch& l, cudaStream_t stream) {
  if (l.tile == TileShape::q128w8) return launch_tile<T, kD, TileShape::q128w8, true>(l, stream);
  if (l.tile == TileShape::q64w4) return launch_tile<T, kD, TileShape::q64w4, true>(l, stream);
  throw std::logic_error("flash attention: head_dim " + std::to_string(l.p.head_dim) +
                         " runs the q128w8 and q64w4 tiles only");
}

// A head over 128 columns: the q64w4 tile at width 256 (portable_width's comment).
template <typename T>
void launch_wide(const FlashLaunch& l, cudaStream_t stream) {
  if (l.tile != TileShape::q64w4)
    throw std::logic_error("flash attention: head_dim " + std::to_string(l.p.head_dim) + " runs the q64w4 tile only");
  if (l.p.head_dim == 256) return launch_tile<T, 256, TileShape::q64w4, false>(l, stream);
  launch_tile<T, 256, TileShape::q64w4, true>(l, stream);
}

template <typename T>
void launch_type(const FlashLaunch& l, cudaStream_t stream) {
  const int hd = l.p.head_dim;
  if (!mma16_head_dim_ok(hd))
    throw std::invalid_argument("flash attention: head_dim " + std::to_string(hd) +
                                " is not a multiple of 8 in 8..256");
  if (hd == 64) return launch_dim<T, 64>(l, stream);
  if (hd == 128) return launch_dim<T, 128>(l, stream);
  if (portable_width(hd) == 64) return launch_narrow<T, 64>(l, stream);
  if (portable_width(hd) == 128) return launch_narrow<T, 128>(l, stream);
  launch_wide<T>(l, stream);
}

template <typename T, int kPer>
void launch_combine(const FlashLaunch& l, cudaStream_t stream) {
  const int64_t rows = l.p.batch * l.p.heads * l.p.seq;
  launch_kernel(flash_splitkv_combine<T, kPer>, dim3(static_cast<unsigned>((rows + 3) / 4)), dim3(128), 0, stream, 1, l.p);
  TLB_LAUNCH_CHECK(stream);
}

}  // namespace

void launch_flash_mma16(const FlashLaunch& l, cudaStream_t stream) {
  if (l.dtype == DType::fp16) return launch_type<__half>(l, stream);
  if (l.dtype == DType::bf16) return launch_type<__nv_bfloat16>(l, stream);
  throw std::invalid_argument("flash attention mma16: fp16/bf16 only");
}

void launch_flash_combine(const FlashLaunch& l, cudaStream_t stream) {
  dispatch_dtype(l.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (l.p.head_dim <= 64) return launch_combine<T, 2>(l, stream);
    if (l.p.head_dim <= 128) return launch_combine<T, 4>(l, stream);
    if (l.p.head_dim <= 256) return launch_combine<T, 8>(l, stream);
    throw std::invalid_argument("flash attention combine: head_dim " + std::to_string(l.p.head_dim) + " over 256");
  });
}

}  // namespace tlb::attn
