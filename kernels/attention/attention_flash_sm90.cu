// Flash attention forward on Hopper warpgroup MMA (sm_90a): S = Q K^T and O += P V as wgmma with
// Q and P as register operands and K, V read by the tensor cores straight from 128-byte-swizzled
// shared memory (no ldmatrix traffic for them); each warpgroup runs the softmax of one key tile
// while the tensor cores still multiply the previous tile's P V. The online softmax, masks,
// split-KV partials and epilogue are the mma.sync kernel's: the accumulator layouts agree.
// fp16/bf16, head_dim 64 and 128, any seq, every mask; 128 query rows (two warpgroups of 64) x
// 64-key tiles.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "attention/attention_kernels.hpp"
#include "attention/attention_tile.cuh"
#include "common/cuda_check.hpp"
#include "common/launch.cuh"
#include "common/ptx.cuh"
#include "common/ptx_sm90.cuh"

namespace tlb::attn {
namespace {

// 203 / 128 registers (sm_90a, no spills) and 97 / 49 KB of shared memory at head_dim 128 / 64:
// one block per SM at 128, two at 64.
constexpr int kRows = 128;    // two warpgroups x 64 query rows
constexpr int kKV = 64;       // keys per tile: S is 32 fp32 registers per thread
constexpr int kThreads = 256;

#if TLB_PTX_SM90A
// K and V tiles in the layout wgmma reads: head_dim split into 64-element (128-byte) column
// blocks, each block [kKV rows][64] with 16-byte chunk c of row r stored at chunk c ^ (r % 8),
// i.e. a stack of 1024-byte swizzle atoms (8 rows x 128 bytes). Tiles start 1024-byte aligned.
__device__ __forceinline__ int kv_offset(int row, int chunk) {
  return (chunk >> 3) * (kKV * 64) + row * 64 + (((chunk & 7) ^ (row & 7)) << 3);
}

template <typename T, int kD>
__device__ __forceinline__ void load_kv_tile(T* tile, const T* g, int64_t row0, int64_t seq, int tid) {
  constexpr int kChunks = kD / 8;
  static_assert((kKV * kChunks) % kThreads == 0, "tile must split evenly over the threads");
#pragma unroll
  for (int it = 0; it < kKV * kChunks / kThreads; ++it) {
    const int i = tid + it * kThreads;
    const int r = i / kChunks, ch = i % kChunks;
    const int64_t row = row0 + r;
    const bool valid = row < seq;
    ptx::cp_async_16_zfill(ptx::smem_addr(tile + kv_offset(r, ch)), valid ? g + row * kD + ch * 8 : g, valid);
  }
}

// d (64 x kN per warpgroup) += A (registers) * B (descriptor).
// d (64 x kN per warpgroup) = A (registers) * B (descriptor) + (accumulate ? d : 0).
template <typename T, int kTransB, int kN>
__device__ __forceinline__ void wgmma_rs(float (&d)[kN / 2], const uint32_t (&a)[4], uint64_t desc,
                                         int accumulate) {
  constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  if constexpr (kN == 64) {
    if constexpr (kBf16) ptx::wgmma_m64n64k16_rs_bf16<kTransB>(d, a, desc, accumulate);
    else ptx::wgmma_m64n64k16_rs_f16<kTransB>(d, a, desc, accumulate);
  } else {
    static_assert(kN == 128, "head_dim 64 or 128");
    if constexpr (kBf16) ptx::wgmma_m64n128k16_rs_bf16<kTransB>(d, a, desc, accumulate);
    else ptx::wgmma_m64n128k16_rs_f16<kTransB>(d, a, desc, accumulate);
  }
}

#endif  // TLB_PTX_SM90A

template <typename T, int kD>
__global__ void __launch_bounds__(kThreads, kD == 64 ? 2 : 1) flash_fwd_wgmma(const FlashParams p) {
#if TLB_PTX_SM90A
  ptx::pdl_wait();  // PDL: the inputs may be the previous kernel's output
  ptx::pdl_launch_dependents();
  constexpr int kNT = kKV / 8, kDN = kD / 8, kKS = kD / 16;
  constexpr int kTileElems = kKV * kD;
  constexpr uint32_t kTileBytes = kTileElems * 2;        // a multiple of 1024: stages stay aligned
  constexpr uint32_t kColBlockBytes = kKV * 128;         // one 64-column block of a K/V tile
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = ptx::smem_addr(smem_raw);
  T* sK = reinterpret_cast<T*>(smem_raw + ((1024u - (raw & 1023u)) & 1023u));
  T* sV = sK + 2 * kTileElems;
  T* sQ = sV + 2 * kTileElems;
  const uint32_t sk = ptx::smem_addr(sK), sv = ptx::smem_addr(sV), sq = ptx::smem_addr(sQ);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const auto [c, split, kr, n_tiles, causal, gQ, gK, gV] = block_work<T>(p, kRows, kKV, kD);
  // Warpgroup warp/4 owns rows 64*(warp/4)..+63 and, inside it, warp%4 owns 16 of them: the
  // rows of warp w are 16w..16w+15 of the block, as in the mma.sync kernel.
  const int warp_row = warp * 16;
  const int64_t row0 = c.q0 + warp_row;

  float o[1][kDN][4];
  float m[1][2], l[1][2];
  clear_row_state(o, m, l);
  float(&o_flat)[kDN * 4] = reinterpret_cast<float(&)[kDN * 4]>(o[0]);

  // S = Q K^T of tile `it` into s: K is the K-major B operand; a 16-column k step is a 32-byte
  // offset inside the 128-byte rows of its column block. The first step overwrites s.
  float s[1][kNT][4];
  float(&s_flat)[kNT * 4] = reinterpret_cast<float(&)[kNT * 4]>(s[0]);
  auto issue_scores = [&](const uint32_t (&qf)[kKS][4], int it) {
    const uint32_t k_tile = sk + (it & 1) * kTileBytes;
#pragma unroll
    for (int ks = 0; ks < kKS; ++ks) {
      const uint64_t desc = ptx::wgmma_desc_sw128(k_tile + (ks >> 2) * kColBlockBytes + (ks & 3) * 32, 16, 1024);
      wgmma_rs<T, 0, kKV>(s_flat, qf[ks], desc, ks > 0);
    }
    ptx::wgmma_commit_group();
  };
  auto mask_tile = [&](int it) {
    const int64_t kv0 = kr.begin + static_cast<int64_t>(it) * kKV;
    if (tile_needs_mask(p, kv0, kKV, kr.end, row0)) mask_scores(s, row0, kv0, kr.end, causal, lane);
  };

  if (n_tiles > 0) {
    // K and V of a tile live in separate double buffers; K runs one tile ahead of V, since
    // tile it+1's scores are computed while tile it's P V is still on the tensor cores.
    auto load_k = [&](int it) {
      load_kv_tile<T, kD>(sK + (it & 1) * kTileElems, gK, kr.begin + static_cast<int64_t>(it) * kKV, p.seq, tid);
    };
    auto load_v = [&](int it) {
      load_kv_tile<T, kD>(sV + (it & 1) * kTileElems, gV, kr.begin + static_cast<int64_t>(it) * kKV, p.seq, tid);
    };
    load_tile_async<T, kD, kRows, kThreads>(sQ, gQ, c.q0, p.seq, tid);
    load_k(0);
    load_v(0);
    if (n_tiles > 1) load_k(1);
    ptx::cp_async_commit();
    ptx::cp_async_wait<0>();
    ptx::fence_proxy_async_shared();  // cp.async writes (generic proxy) before wgmma reads (async)
    __syncthreads();
    uint32_t qf[kKS][4];
#pragma unroll
    for (int ks = 0; ks < kKS; ++ks) load_q_frag<kD>(qf[ks], sq, warp_row, ks, lane);

    float alpha[1][2];
    ptx::wgmma_fence();
    issue_scores(qf, 0);
    ptx::wgmma_wait_group<0>();
    fence_operands(s_flat);
    mask_tile(0);
    softmax_scores(s, m, l, alpha, p.scale_log2);  // O is still zero: nothing to rescale
    uint32_t pa[kKV / 16][4];
    pack_p<T>(pa, s);

    // O += P V of tile it: V is the MN-major B operand (a 16-key k step is two 8-row atoms,
    // 2048 bytes; the next 64 head-dim columns are the next column block).
    auto issue_pv = [&](int it) {
      const uint32_t v_tile = sv + (it & 1) * kTileBytes;
#pragma unroll
      for (int kk = 0; kk < kKV / 16; ++kk) {
        const uint64_t desc = ptx::wgmma_desc_sw128(v_tile + kk * 16 * 128, kColBlockBytes, 1024);
        wgmma_rs<T, 1, kD>(o_flat, pa[kk], desc, 1);
      }
      ptx::wgmma_commit_group();
    };
    // Resident and visible after this barrier: K of tile it+1 and V of tile it (loaded during
    // the previous step). Past it, every warpgroup is done with K of tile it and V of tile it-1,
    // whose buffers take K of it+2 and V of it+1.
    auto next_step = [&](int it) {
      ptx::cp_async_wait<0>();
      ptx::fence_proxy_async_shared();
      __syncthreads();
      if (it + 2 < n_tiles) load_k(it + 2);
      if (it + 1 < n_tiles) load_v(it + 1);
      ptx::cp_async_commit();
    };

    // Every tile but the last: tile it+1's scores, then tile it's P V; the softmax of tile it+1
    // runs while P V is still on the tensor cores. (The wgmma sequence is the same on every
    // pass, so ptxas can keep the groups in flight.)
    for (int it = 0; it + 1 < n_tiles; ++it) {
      next_step(it);
      ptx::wgmma_fence();
      issue_scores(qf, it + 1);
      issue_pv(it);
      ptx::wgmma_wait_group<1>();  // the scores; P V may still run
      fence_operands(s_flat);
      mask_tile(it + 1);
      const bool rescale = softmax_scores(s, m, l, alpha, p.scale_log2);
      ptx::wgmma_wait_group<0>();
      fence_operands(o_flat);
      if (rescale) rescale_o(o, alpha);
      pack_p<T>(pa, s);  // P of tile it is no longer read by the tensor cores
    }
    next_step(n_tiles - 1);
    ptx::wgmma_fence();
    issue_pv(n_tiles - 1);
    ptx::wgmma_wait_group<0>();
    fence_operands(o_flat);
  }
  store_rows<T, kD>(p, c, split, row0, o, m, l, lane);
#else
  __trap();  // never launched: the host launches this only where an sm_90a image runs
#endif
}

template <typename T, int kD>
void launch_wgmma(const FlashLaunch& l, cudaStream_t stream) {
  constexpr int kSmem = 1024 + (4 * kKV * kD + kRows * kD) * 2;
  auto kernel = flash_fwd_wgmma<T, kD>;
  allow_dynamic_smem(kernel, kSmem);
  const int64_t n_qt = (l.p.seq + kRows - 1) / kRows;
  const dim3 grid(static_cast<unsigned>(n_qt * l.p.batch * l.p.heads), static_cast<unsigned>(l.p.splits));
  launch_kernel(kernel, grid, dim3(kThreads), kSmem, stream, 1, l.p);
  TLB_LAUNCH_CHECK(stream);
}

template <typename T>
void launch_type(const FlashLaunch& l, cudaStream_t stream) {
  if (l.p.head_dim == 64) return launch_wgmma<T, 64>(l, stream);
  if (l.p.head_dim == 128) return launch_wgmma<T, 128>(l, stream);
  throw std::invalid_argument("flash attention wgmma: head_dim " + std::to_string(l.p.head_dim) + " not compiled");
}

}  // namespace

void launch_flash_wgmma(const FlashLaunch& l, cudaStream_t stream) {
  if (l.dtype == DType::fp16) return launch_type<__half>(l, stream);
  if (l.dtype == DType::bf16) return launch_type<__nv_bfloat16>(l, stream);
  throw std::invalid_argument("flash attention wgmma: fp16/bf16 only");
}

bool flash_wgmma_image_present() {
  // The kernel carries sm_90a machine code only if the build targeted it; any other image of it
  // is the trapping stub.
  cudaFuncAttributes attr{};
  TLB_CUDA_CHECK(cudaFuncGetAttributes(&attr, flash_fwd_wgmma<__half, 128>));
  return attr.ptxVersion >= 90 && attr.binaryVersion == 90;
}

}  // namespace tlb::attn
