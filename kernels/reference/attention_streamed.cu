// Golden attention in IEEE fp32, streamed over keys: each block owns a run of queries of one
// (batch, head); key/value tiles pass through shared memory and every query keeps a running
// max, sum and output in registers (online softmax), so no score matrix exists. Any head_dim.
//
// Layout of the work. G threads share one query (G = head_dim rounded up to a multiple of 32,
// divided by 32, as a power of two: dh 64 -> 2, dh 128 -> 4), each holding 8 float4 "units" of
// q and of the output: unit u of thread g covers dims 4(uG + g) .. 4(uG + g) + 3, so the G
// threads of a query read G adjacent 16-byte words of a key row (no bank conflicts) and their
// partial dot products meet in log2(G) xor-shuffles. 128 threads per block, so 128/G queries
// per block and 128/G keys per shared tile: 2 tiles x (128/G keys) x (32G dims) x 4 B = 32 KB
// for every G. Scores are taken 16 keys at a time (one rescale of the output per 16 keys).
// Under a causal mask a block stops at its last query's key, and blocks are issued heaviest
// first so the short ones fill the tail. head_dim > 1024 takes a one-warp-per-query kernel
// that accumulates in the output row (slow, but such heads are rare and still correct).
#include "reference/attention_streamed.hpp"

#include <cmath>
#include <stdexcept>

#include "common/cuda_check.hpp"
#include "reference/reference_device.cuh"

namespace tlb::reference {
namespace {

constexpr int kThreads = 128;
constexpr int kUnits = 8;  // float4 units of q and of o per thread: 64 registers together

template <int G>
struct StreamTile {
  static constexpr int kQueries = kThreads / G;
  static constexpr int kKeys = kThreads / G;
  static constexpr int kDims = kUnits * G * 4;  // head_dim padded with zeros
  static constexpr int kSub = kKeys < 16 ? kKeys : 16;
  static_assert(kKeys % kSub == 0, "sub-tiles must divide the tile");
};

struct Visible {
  int64_t block_end;  // keys any query of the block may see
  int64_t query_end;  // keys this query sees
};

__device__ __forceinline__ Visible visible_keys(MaskKind mask, const int* valid_lens, int64_t b,
                                                int64_t seq, int64_t first_query,
                                                int64_t block_queries, int64_t query) {
  Visible r{seq, seq};
  if (mask == MaskKind::causal) {
    r.block_end = min(seq, first_query + block_queries);
    r.query_end = min(seq, query + 1);
  } else if (mask == MaskKind::padding) {
    r.block_end = min(max(static_cast<int64_t>(valid_lens[b]), int64_t{0}), seq);
    r.query_end = r.block_end;
  }
  if (query >= seq) r.query_end = 0;
  return r;
}

template <int G>
__global__ void __launch_bounds__(kThreads, 4)
    attention_streamed_kernel(const float* __restrict__ q, const float* __restrict__ k,
                              const float* __restrict__ v, float* __restrict__ o, int64_t seq,
                              int heads, int head_dim, MaskKind mask,
                              const int* __restrict__ valid_lens, float scale) {
  using Tile = StreamTile<G>;
  constexpr int kUnitsPerRow = Tile::kDims / 4;
  __shared__ float4 k_tile[Tile::kKeys][kUnitsPerRow];
  __shared__ float4 v_tile[Tile::kKeys][kUnitsPerRow];

  const int tid = threadIdx.x;
  const int g = tid % G;
  const int h = blockIdx.y, b = blockIdx.z;
  const int64_t first_query = static_cast<int64_t>(gridDim.x - 1 - blockIdx.x) * Tile::kQueries;
  const int64_t query = first_query + tid / G;
  const int64_t bh = static_cast<int64_t>(b) * heads + h;
  const float* k_head = k + bh * seq * head_dim;
  const float* v_head = v + bh * seq * head_dim;
  const Visible vis = visible_keys(mask, valid_lens, b, seq, first_query, Tile::kQueries, query);

  float4 q_reg[kUnits], acc[kUnits];
  {
    const float* q_row = q + (bh * seq + min(query, seq - 1)) * head_dim;
#pragma unroll
    for (int u = 0; u < kUnits; ++u) {
      const int dim = (u * G + g) * 4;
      float e[4];
#pragma unroll
      for (int c = 0; c < 4; ++c) e[c] = (query < seq && dim + c < head_dim) ? q_row[dim + c] : 0.0f;
      q_reg[u] = make_float4(e[0], e[1], e[2], e[3]);
      acc[u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
  }
  float m = -INFINITY, l = 0.0f;

  float* k_flat = &k_tile[0][0].x;
  float* v_flat = &v_tile[0][0].x;
  for (int64_t key0 = 0; key0 < vis.block_end; key0 += Tile::kKeys) {
    __syncthreads();  // everyone is done with the previous tile
    for (int idx = tid; idx < Tile::kKeys * Tile::kDims; idx += kThreads) {
      const int key = idx / Tile::kDims, dim = idx % Tile::kDims;
      const int64_t gk = key0 + key;
      float kv = 0.0f, vv = 0.0f;
      if (gk < vis.block_end && dim < head_dim) {
        kv = k_head[gk * head_dim + dim];
        vv = v_head[gk * head_dim + dim];
      }
      k_flat[idx] = kv;
      v_flat[idx] = vv;
    }
    __syncthreads();

    const int tile_keys = static_cast<int>(min(static_cast<int64_t>(Tile::kKeys), vis.block_end - key0));
    for (int sub = 0; sub < tile_keys; sub += Tile::kSub) {
      float s[Tile::kSub];
#pragma unroll
      for (int j = 0; j < Tile::kSub; ++j) {
        float dot = 0.0f;
#pragma unroll
        for (int u = 0; u < kUnits; ++u) {
          const float4 kk = k_tile[sub + j][u * G + g];
          dot = fmaf(q_reg[u].x, kk.x, dot);
          dot = fmaf(q_reg[u].y, kk.y, dot);
          dot = fmaf(q_reg[u].z, kk.z, dot);
          dot = fmaf(q_reg[u].w, kk.w, dot);
        }
        s[j] = dot;
      }
      // Every lane of a query ends with the same bits: the butterfly adds the same pairs.
#pragma unroll
      for (int off = 1; off < G; off <<= 1)
#pragma unroll
        for (int j = 0; j < Tile::kSub; ++j) s[j] += __shfl_xor_sync(0xffffffffu, s[j], off);

      float tile_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < Tile::kSub; ++j) {
        s[j] = key0 + sub + j < vis.query_end ? s[j] * scale : -INFINITY;
        tile_max = fmaxf(tile_max, s[j]);
      }
      const float m_new = fmaxf(m, tile_max);
      if (m_new == -INFINITY) continue;  // nothing visible to this query yet
      const float correction = expf(m - m_new);  // 0 while m is still -inf
      l *= correction;
#pragma unroll
      for (int u = 0; u < kUnits; ++u) {
        acc[u].x *= correction;
        acc[u].y *= correction;
        acc[u].z *= correction;
        acc[u].w *= correction;
      }
#pragma unroll
      for (int j = 0; j < Tile::kSub; ++j) {
        const float p = expf(s[j] - m_new);  // masked keys: expf(-inf) = 0
        l += p;
#pragma unroll
        for (int u = 0; u < kUnits; ++u) {
          const float4 vv = v_tile[sub + j][u * G + g];
          acc[u].x = fmaf(p, vv.x, acc[u].x);
          acc[u].y = fmaf(p, vv.y, acc[u].y);
          acc[u].z = fmaf(p, vv.z, acc[u].z);
          acc[u].w = fmaf(p, vv.w, acc[u].w);
        }
      }
      m = m_new;
    }
  }

  if (query < seq) {
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    float* o_row = o + (static_cast<int64_t>(b) * seq + query) * heads * head_dim +
                   static_cast<int64_t>(h) * head_dim;
#pragma unroll
    for (int u = 0; u < kUnits; ++u) {
      const int dim = (u * G + g) * 4;
      const float e[4] = {acc[u].x, acc[u].y, acc[u].z, acc[u].w};
#pragma unroll
      for (int c = 0; c < 4; ++c)
        if (dim + c < head_dim) o_row[dim + c] = e[c] * inv;
    }
  }
}

// head_dim > 1024: one warp per query, lanes stride over head_dim, the output row itself holds
// the running sum (each lane only touches its own dims).
constexpr int kWideWarps = 4;

__global__ void __launch_bounds__(kWideWarps * 32)
    attention_streamed_wide_kernel(const float* __restrict__ q, const float* __restrict__ k,
                                   const float* __restrict__ v, float* __restrict__ o,
                                   int64_t seq, int heads, int head_dim, MaskKind mask,
                                   const int* __restrict__ valid_lens, float scale) {
  const int lane = threadIdx.x & 31;
  const int64_t query = static_cast<int64_t>(blockIdx.x) * kWideWarps + (threadIdx.x >> 5);
  if (query >= seq) return;  // whole warps leave; there is no block barrier below
  const int h = blockIdx.y, b = blockIdx.z;
  const int64_t bh = static_cast<int64_t>(b) * heads + h;
  const Visible vis = visible_keys(mask, valid_lens, b, seq, query, 1, query);
  const float* q_row = q + (bh * seq + query) * head_dim;
  float* o_row = o + (static_cast<int64_t>(b) * seq + query) * heads * head_dim +
                 static_cast<int64_t>(h) * head_dim;
  for (int d = lane; d < head_dim; d += 32) o_row[d] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  for (int64_t j = 0; j < vis.query_end; ++j) {
    const float* k_row = k + (bh * seq + j) * head_dim;
    const float* v_row = v + (bh * seq + j) * head_dim;
    float dot = 0.0f;
    for (int d = lane; d < head_dim; d += 32) dot = fmaf(q_row[d], k_row[d], dot);
    const float s = warp_sum(dot) * scale;
    const float m_new = fmaxf(m, s);
    const float correction = expf(m - m_new);
    const float p = expf(s - m_new);
    l = l * correction + p;
    for (int d = lane; d < head_dim; d += 32) o_row[d] = fmaf(p, v_row[d], o_row[d] * correction);
    m = m_new;
  }
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  for (int d = lane; d < head_dim; d += 32) o_row[d] *= inv;
}

template <int G>
std::string launch_tiled(const StreamedAttentionArgs& a, cudaStream_t stream) {
  using Tile = StreamTile<G>;
  const dim3 grid(static_cast<unsigned>((a.seq + Tile::kQueries - 1) / Tile::kQueries),
                  static_cast<unsigned>(a.heads), static_cast<unsigned>(a.batch));
  attention_streamed_kernel<G><<<grid, kThreads, 0, stream>>>(
      a.q, a.k, a.v, a.o, a.seq, static_cast<int>(a.heads), static_cast<int>(a.head_dim), a.mask,
      a.valid_lens, a.scale);
  TLB_LAUNCH_CHECK(stream);
  return "streamed_fp32_g" + std::to_string(G);
}

}  // namespace

std::string attention_streamed_fp32(const StreamedAttentionArgs& a, cudaStream_t stream) {
  if (a.batch <= 0 || a.heads <= 0 || a.seq <= 0 || a.head_dim <= 0)
    throw std::invalid_argument("streamed attention: batch, heads, seq and head_dim must be positive");
  if (a.batch > 65535 || a.heads > 65535)
    throw std::invalid_argument("streamed attention: batch and heads are limited to 65535");
  int groups = 1;  // threads per query: each covers 32 dims
  while (groups * kUnits * 4 < a.head_dim && groups <= 32) groups *= 2;
  switch (groups) {
    case 1: return launch_tiled<1>(a, stream);
    case 2: return launch_tiled<2>(a, stream);
    case 4: return launch_tiled<4>(a, stream);
    case 8: return launch_tiled<8>(a, stream);
    case 16: return launch_tiled<16>(a, stream);
    case 32: return launch_tiled<32>(a, stream);
    default: break;
  }
  const dim3 grid(static_cast<unsigned>((a.seq + kWideWarps - 1) / kWideWarps),
                  static_cast<unsigned>(a.heads), static_cast<unsigned>(a.batch));
  attention_streamed_wide_kernel<<<grid, kWideWarps * 32, 0, stream>>>(
      a.q, a.k, a.v, a.o, a.seq, static_cast<int>(a.heads), static_cast<int>(a.head_dim), a.mask,
      a.valid_lens, a.scale);
  TLB_LAUNCH_CHECK(stream);
  return "streamed_fp32_wide";
}

}  // namespace tlb::reference
