// Hopper tensor-core GEMM, out = epilogue(A · W^T), one output tile per CTA: TMA loads of
// 128-byte-swizzled K-major tiles into a multi-stage mbarrier ring, one producer warpgroup and
// one or two consumer warpgroups issuing wgmma (fp16/bf16 k16, tf32 k8) from shared memory,
// fp32 accumulation, the fused epilogue on 16-byte output runs. Small grids split K over a
// thread-block cluster and add the partial tiles through distributed shared memory, in a fixed
// order (the result does not depend on scheduling). Any M (TMA zero-fills the tails); N and K
// multiples of 8. sm_90a only; elsewhere the kernel body traps and the host never launches it.
//
// The parts, in the order a tile meets them: tile_work (which tile and which k-tiles a CTA
// owns), preload_weights and produce (the TMA loop), EarlyInputs (the 64-row tiles' bias and
// residual, loaded before the main loop), mainloop (a consumer's k-loop), stage_accumulators
// (the accumulators into shared memory), then store_reduced (64-row tiles, with split K's
// reduction) or store_wide (128-row tiles), each thread storing its ColumnRun.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cooperative_groups.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>

#include "common/cuda_check.hpp"
#include "common/dtype_traits.cuh"
#include "common/launch.cuh"
#include "common/ptx.cuh"
#include "common/ptx_sm90.cuh"
#include "common/tensor_map.hpp"
#include "gemm/gemm_epilogue.cuh"
#include "gemm/gemm_internal.hpp"
#include "gemm/gemm_raster.cuh"
#include "gemm/gemm_ring.cuh"
#include "gemm/gemm_wgmma.cuh"

// The parts live in a named namespace: the portable compile passes keep only the trapping
// kernel stub and would otherwise flag every part as unreferenced.
namespace tlb::gemm_detail::wgmma {

// One CTA computes BM x BN = (64 x consumers) x BN_. Warpgroup 0 produces (one thread issues
// all TMA loads), each consumer warpgroup owns 64 rows and runs m64nBNk16 wgmma over the whole
// BN. A k-tile is 128 bytes of K per row (64 halves or 32 floats): the width of the 128-byte
// swizzle, so each operand tile is one TMA box and one descriptor walks it in 32-byte steps.
template <typename T, int BN_, int STAGES_, int CONSUMERS_>
struct WgmmaConfig {
  using Elem = T;
  static constexpr int kConsumers = CONSUMERS_;
  static constexpr int BM = 64 * kConsumers, BN = BN_, STAGES = STAGES_;
  static constexpr bool kTf32 = sizeof(T) == 4;
  static constexpr int kRowBytes = 128;
  static constexpr int BK = kRowBytes / static_cast<int>(sizeof(T));
  static constexpr int kKSteps = kRowBytes / 32;  // wgmma k16 (halves) or k8 (tf32): 32 bytes
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr int kABytes = BM * kRowBytes, kWBytes = BN * kRowBytes;
  static constexpr int kStageBytes = kABytes + kWBytes;  // multiple of 1024: tiles stay aligned
  static constexpr int kPipeBytes = STAGES * kStageBytes;
  static constexpr int kStagePitch = BN + 8;  // floats; see the bank note in gemm_mma.cu
  static constexpr int kStagingBytes = BM * kStagePitch * 4;
  // The staged tile reuses the ring's buffers once the main loop is done with them.
  static constexpr int kRegionBytes = kPipeBytes > kStagingBytes ? kPipeBytes : kStagingBytes;
  // + 1024 to align the tiles (the swizzle pattern is anchored at 1024-byte boundaries), then
  // a full and an empty barrier per stage.
  static constexpr int kSmemBytes = 1024 + kRegionBytes + STAGES * 16;
  // Registers: with two consumers the producer keeps 40 and consumers get 232 for the main
  // loop (128 x 40 + 256 x 232 <= 64 Ki, what the 384-thread entry allocation of 168 each
  // frees and takes); once the accumulators are staged every warpgroup returns to 168, so
  // that all twelve warps share the epilogue. One consumer's 32 or 64 accumulators need no
  // rebalancing; those tiles alone compile split K (the 168-register entry budget has no room
  // for its reduction). In every tile, every warp runs the epilogue (and the reduction).
  static constexpr bool kRebalanceRegs = kConsumers == 2;
  static constexpr int kProducerRegs = 40, kConsumerRegs = 232, kEpilogueRegs = 168;
  // The 64-row tiles serve small, latency-bound launches: there the epilogue's inputs load
  // before the main loop (EarlyInputs), and split K is available.
  static constexpr bool kEarlyInputs = !kRebalanceRegs;
  static_assert(kStageBytes % 1024 == 0, "stage buffers must stay 1024-byte aligned");
  static_assert(!kRebalanceRegs ||
                    (128 * kProducerRegs + 256 * kConsumerRegs <= 64 * 1024 && kThreads * kEpilogueRegs <= 64 * 1024),
                "the rebalanced registers must fit the SM's register file");
};

// Named barriers (0 is __syncthreads), each over every thread of the CTA.
// kDrainedBarrier: every consumer is past its last wgmma, so the ring's buffers may take the
// staged tile. kStagedBarrier: the staged tile is complete (split K uses the cluster barrier).
inline constexpr uint32_t kDrainedBarrier = 1;
inline constexpr uint32_t kStagedBarrier = 2;

// The scheduler: CTA x computes output tile x / split (in raster order, gemm_raster.cuh). Under
// split K (gridDim.x = tiles x split, clusters of `split` consecutive CTAs along x) cluster rank
// r = x % split accumulates k-tiles [r * per, (r + 1) * per) of the tile, stages its partial
// sums in its shared memory, and after a cluster barrier reduces rows
// [r * BM / split, (r + 1) * BM / split) by reading every rank's partial through distributed
// shared memory in rank order, then applies the epilogue. split == 1 needs no cluster.
struct TileWork {
  int m0, n0;             // the tile's first row and column
  int kt_begin, k_tiles;  // this CTA's k-tiles (k_tiles may be 0)
  int split;
  int row_begin, rows;  // the rows of the tile this CTA stores: all of them, or its rank's share
};

template <class C>
__device__ __forceinline__ TileWork tile_work(const GemmArgs& p, int split) {
  const int tiles_m = static_cast<int>((p.M + C::BM - 1) / C::BM);
  const int tiles_n = static_cast<int>((p.N + C::BN - 1) / C::BN);
  const int tile = static_cast<int>(blockIdx.x) / split, rank = static_cast<int>(blockIdx.x) % split;
  const TileCoord coord = raster_tile(tile, tiles_m, tiles_n);
  const int k_tiles_all = static_cast<int>((p.K + C::BK - 1) / C::BK);
  const int per_rank = (k_tiles_all + split - 1) / split;
  const int kt_begin = min(k_tiles_all, rank * per_rank);
  const int rows = C::BM / split;
  return {coord.m * C::BM, coord.n * C::BN, kt_begin, min(k_tiles_all, kt_begin + per_rank) - kt_begin,
          split, rank * rows, rows};
}

// Every stage's barriers: full completes on the producer's arrival plus the bytes, empty on one
// arrival per consumer thread.
template <class C>
__device__ __forceinline__ void init_ring(const Ring<C>& ring) {
  for (int s = 0; s < C::STAGES; ++s) {
    ptx::mbarrier_init(ring.full(s), 1);
    ptx::mbarrier_init(ring.empty(s), 128 * C::kConsumers);
  }
  ptx::fence_mbarrier_init();
}

// Under PDL everything up to pdl_wait overlaps the previous kernel's tail. W holds weights,
// which no kernel of the forward writes, so the first `preloaded` stages' W tiles load before
// the wait (one thread); A may be the previous kernel's output and waits.
template <class C>
__device__ __forceinline__ void preload_weights(const CUtensorMap* tmap_w, const TileWork& w, const Ring<C>& ring,
                                                int preloaded) {
  for (int i = 0; i < preloaded; ++i) {
    ptx::mbarrier_arrive_expect_tx(ring.full(i), C::kStageBytes);
    ptx::tma_load_2d(ring.stage(i) + C::kABytes, tmap_w, (w.kt_begin + i) * C::BK, w.n0, ring.full(i));
  }
}

// The producer (one thread): every k-tile's A, and W past the preloaded stages, each into its
// stage once the consumers released the stage's previous round.
template <class C>
__device__ __forceinline__ void produce(const CUtensorMap* tmap_a, const CUtensorMap* tmap_w, const TileWork& w,
                                        const Ring<C>& ring, int preloaded) {
  for (int i = 0; i < w.k_tiles; ++i) {
    const int s = i % C::STAGES, kt = w.kt_begin + i;
    if (i >= preloaded) {
      // Round r = i / STAGES reuses the stage once the consumers released round r - 1.
      ptx::mbarrier_wait(ring.empty(s), ((i / C::STAGES) & 1) ^ 1);
      ptx::mbarrier_arrive_expect_tx(ring.full(s), C::kStageBytes);
      ptx::tma_load_2d(ring.stage(s) + C::kABytes, tmap_w, kt * C::BK, w.n0, ring.full(s));
    }
    ptx::tma_load_2d(ring.stage(s), tmap_a, kt * C::BK, w.m0, ring.full(s));
  }
}

// A consumer's k-loop over its 64 rows: waits for each stage, issues its MMAs, and keeps one
// k-tile's MMAs in flight while it waits for the next; the stage of the k-tile before is then
// free. Returns with every MMA done.
template <class C>
__device__ __forceinline__ void mainloop(float (&acc)[C::BN / 2], int k_tiles, const Ring<C>& ring, int consumer) {
  using T = typename C::Elem;
#pragma unroll
  for (int i = 0; i < C::BN / 2; ++i) acc[i] = 0.0f;
  for (int i = 0; i < k_tiles; ++i) {
    const int s = i % C::STAGES;
    ptx::mbarrier_wait(ring.full(s), (i / C::STAGES) & 1);
    const uint64_t desc_a = ptx::wgmma_desc_k_major_sw128(ring.stage(s) + consumer * 64 * C::kRowBytes);
    const uint64_t desc_w = ptx::wgmma_desc_k_major_sw128(ring.stage(s) + C::kABytes);
    ptx::wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < C::kKSteps; ++ks) {
      // 32 bytes further along K = 2 in the descriptor's 16-byte address units.
      wgmma_k_step<T, C::BN>(acc, desc_a + 2 * ks, desc_w + 2 * ks);
    }
    ptx::wgmma_commit_group();
    ptx::wgmma_wait_group<1>();
    if (i > 0) ptx::mbarrier_arrive(ring.empty((i - 1) % C::STAGES));
  }
  ptx::wgmma_wait_group<0>();
}

// A consumer's accumulators into its 64 rows of the staged tile (BM x kStagePitch floats), in
// the wgmma fragment layout: row 16 x warp + g and + 8, columns 8j + 2t and + 1.
template <class C>
__device__ __forceinline__ void stage_accumulators(const float (&acc)[C::BN / 2], float* rows) {
  const int lane = threadIdx.x & 31, warp_in_group = (threadIdx.x / 32) & 3;
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int j = 0; j < C::BN / 8; ++j) {
    const int row = warp_in_group * 16 + g, col = j * 8 + 2 * t;
    *reinterpret_cast<float2*>(&rows[row * C::kStagePitch + col]) = make_float2(acc[4 * j], acc[4 * j + 1]);
    *reinterpret_cast<float2*>(&rows[(row + 8) * C::kStagePitch + col]) = make_float2(acc[4 * j + 2], acc[4 * j + 3]);
  }
}

// A thread's share of the epilogue: one 16-byte run of columns, the same in every row it
// visits (first_row(), then every kRowStep rows).
template <class C>
struct ColumnRun {
  using T = typename C::Elem;
  static constexpr int kVec = Pack16<T>::kCount;
  static constexpr int kRunsPerRow = C::BN / kVec;
  static constexpr int kRowStep = C::kThreads / kRunsPerRow;
  static_assert(C::kThreads % kRunsPerRow == 0, "a thread's run of columns is fixed");

  int index;  // the run within the tile's row
  int64_t n;  // its first output column

  __device__ static ColumnRun of_this_thread(int n0) {
    const int index = static_cast<int>(threadIdx.x) % kRunsPerRow;
    return {index, static_cast<int64_t>(n0) + index * kVec};
  }
  __device__ static int first_row() { return static_cast<int>(threadIdx.x) / kRunsPerRow; }
  __device__ const float* staged(const float* staging, int row) const {
    return staging + row * C::kStagePitch + index * kVec;
  }
};

// The 64-row tiles' epilogue inputs, loaded before the main loop, not after it, where their
// latency would add to the launch's: the bias is a weight and loads before the PDL wait, the
// residual may be the previous kernel's output and loads right after it. (The 128-row tiles,
// throughput-bound and at their register budget, load both in store_wide.)
template <class C>
struct EarlyInputs {
  using T = typename C::Elem;
  using Run = ColumnRun<C>;
  static constexpr int kRows = C::BM / Run::kRowStep;  // rows a thread visits

  float bias[Run::kVec];
  Pack16<T> residual[kRows];

  // The tile row of this thread's j-th visit, within the rows its CTA stores.
  __device__ static int row(const TileWork& w, int j) { return w.row_begin + Run::first_row() + j * Run::kRowStep; }

  __device__ void load_bias(const GemmArgs& p, const Run& run) {
    if (run.n < p.N) load_bias_run<T>(p, run.n, bias);
  }
  __device__ void load_residual(const GemmArgs& p, const TileWork& w, const Run& run) {
    if (p.epilogue != GemmEpilogue::bias_residual || run.n >= p.N) return;
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      const int r = row(w, j);
      const int64_t m = static_cast<int64_t>(w.m0) + r;
      if (r < w.row_begin + w.rows && m < p.M)
        residual[j] = Pack16<T>::load_nc(static_cast<const T*>(p.residual) + m * p.N + run.n);
    }
  }
};

// The 64-row tiles' epilogue: once every warp of the CTA (split == 1), or of the cluster (split
// K: every rank's partial), is past its staging, each thread sums its run of every rank's
// staged rows in rank order and stores it with the bias and residual loaded early. Warp 0 may
// arrive diverged (lane 0 from the TMA loop), hence the barrier that counts a warp once all its
// threads are there; so does barrier.cluster.
template <class C>
__device__ __forceinline__ void store_reduced(const GemmArgs& p, const TileWork& w, float* staging,
                                              const EarlyInputs<C>& in, const ColumnRun<C>& run) {
  using T = typename C::Elem;
  constexpr int kVec = ColumnRun<C>::kVec;
  namespace cg = cooperative_groups;
  if (w.split == 1) {
    ptx::named_barrier_sync_divergent(kStagedBarrier, C::kThreads);
  } else {
    cg::this_cluster().sync();
  }
  if (run.n < p.N) {
#pragma unroll
    for (int j = 0; j < EarlyInputs<C>::kRows; ++j) {
      const int row = EarlyInputs<C>::row(w, j);
      const int64_t m = static_cast<int64_t>(w.m0) + row;
      if (row >= w.row_begin + w.rows || m >= p.M) break;
      float v[kVec];
      if (w.split == 1) {
        load_staged_run<T>(run.staged(staging, row), v);
      } else {
#pragma unroll
        for (int e = 0; e < kVec; ++e) v[e] = 0.0f;
        for (int q = 0; q < w.split; ++q) {
          float part[kVec];
          load_staged_run<T>(run.staged(cg::this_cluster().map_shared_rank(staging, q), row), part);
#pragma unroll
          for (int e = 0; e < kVec; ++e) v[e] += part[e];
        }
      }
      float r[kVec];
      if (p.epilogue == GemmEpilogue::bias_residual) {
        in.residual[j].to_floats(r);
      } else {
#pragma unroll
        for (int e = 0; e < kVec; ++e) r[e] = 0.0f;
      }
      epilogue_store_loaded<T>(p, m, run.n, v, in.bias, r);
    }
  }
  if (w.split > 1) cg::this_cluster().sync();  // no rank leaves while another reads its shared memory
}

// The 128-row tiles' epilogue (never split): all twelve warps share it (two consumer warpgroups
// alone are two warps per scheduler, too few to hide the loads and the activation's math). A
// thread loads its run's bias once.
template <class C>
__device__ __forceinline__ void store_wide(const GemmArgs& p, const TileWork& w, const float* staging,
                                           const ColumnRun<C>& run) {
  using T = typename C::Elem;
  ptx::named_barrier_sync_divergent(kStagedBarrier, C::kThreads);
  if (run.n >= p.N) return;
  float bias[ColumnRun<C>::kVec];
  load_bias_run<T>(p, run.n, bias);
#pragma unroll 2
  for (int row = ColumnRun<C>::first_row(); row < C::BM; row += ColumnRun<C>::kRowStep) {
    const int64_t m = static_cast<int64_t>(w.m0) + row;
    if (m >= p.M) break;
    float v[ColumnRun<C>::kVec];
    load_staged_run<T>(run.staged(staging, row), v);
    epilogue_store_biased<T>(p, m, run.n, v, bias);
  }
}

}  // namespace tlb::gemm_detail::wgmma

namespace tlb::gemm_detail {
namespace {

using wgmma::WgmmaConfig;

template <class C>
__global__ void __launch_bounds__(C::kThreads, 1)
    gemm_wgmma_sm90_kernel(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_w,
                           const GemmArgs p, const int split) {
#if TLB_PTX_SM90A
  using namespace wgmma;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw_addr = ptx::smem_addr(smem_raw);
  const uint32_t base = (raw_addr + 1023u) & ~1023u;
  const Ring<C> ring{base, base + C::kRegionBytes, base + C::kRegionBytes + C::STAGES * 8};
  float* staging = reinterpret_cast<float*>(smem_raw + (base - raw_addr));  // after the main loop
  const TileWork w = tile_work<C>(p, split);
  // Broadcast from lane 0, warp-uniform to the compiler too: the descriptors derived from it
  // stay in uniform registers, which wgmma reads (the ping-pong kernel's mainloop: 44
  // instructions a k-tile this way, 128 without).
  const int warpgroup = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);

  if (threadIdx.x == 0) {
    init_ring(ring);
    ptx::prefetch_tensor_map(&tmap_a);
    ptx::prefetch_tensor_map(&tmap_w);
  }
  __syncthreads();
  const int preloaded = min(w.k_tiles, C::STAGES);
  if (threadIdx.x == 0) preload_weights(&tmap_w, w, ring, preloaded);
  const ColumnRun<C> run = ColumnRun<C>::of_this_thread(w.n0);
  EarlyInputs<C> early;
  if constexpr (C::kEarlyInputs) early.load_bias(p, run);
  ptx::pdl_wait();
  ptx::pdl_launch_dependents();
  if constexpr (C::kEarlyInputs) early.load_residual(p, w, run);

  if (warpgroup == 0) {
    if constexpr (C::kRebalanceRegs) ptx::setmaxnreg_dec<C::kProducerRegs>();
    if (threadIdx.x == 0) produce(&tmap_a, &tmap_w, w, ring, preloaded);
    // The producer warpgroup stays for the epilogue, and passes the barrier that frees the
    // ring's buffers with the consumers (see below).
    ptx::named_barrier_sync_divergent(kDrainedBarrier, C::kThreads);
    if constexpr (C::kRebalanceRegs) {
      __syncwarp();  // setmaxnreg is warp-aligned; lane 0 of warp 0 ran the TMA loop alone
      ptx::setmaxnreg_inc<C::kEpilogueRegs>();  // waits until the consumers have given theirs
    }
  } else {
    if constexpr (C::kRebalanceRegs) ptx::setmaxnreg_inc<C::kConsumerRegs>();
    const int consumer = warpgroup - 1;
    float acc[C::BN / 2];
    mainloop(acc, w.k_tiles, ring, consumer);
    // The staged tile overwrites the ring's buffers (idle now: every TMA load has been
    // consumed), so every consumer must be past its last wgmma first. Every warp then reads
    // the staged tile, and every warp passes this barrier too: compute-sanitizer's racecheck
    // flagged the producer warps' reads as unordered with the consumers' writes (whichever
    // barrier came between) as long as the consumers had passed one barrier more than they had.
    ptx::named_barrier_sync_divergent(kDrainedBarrier, C::kThreads);
    ptx::fence_proxy_async_shared();  // the bytes were last touched by TMA writes and wgmma reads
    stage_accumulators<C>(acc, staging + consumer * 64 * C::kStagePitch);
    if constexpr (C::kRebalanceRegs) ptx::setmaxnreg_dec<C::kEpilogueRegs>();
  }

  if constexpr (C::kEarlyInputs) {
    store_reduced(p, w, staging, early, run);
  } else {
    store_wide(p, w, staging, run);
  }
#else
  static_assert(C::kKSteps > 0);
  __trap();  // never launched: the host checks for an sm_90a image first
#endif
}

// ptxas (CUDA 13.0, sm_90a): the two-consumer tiles take 168 registers per thread at entry
// (the 384-thread cap), then 40 producer / 232 consumer after setmaxnreg; no spills, no wgmma
// serialisation warnings.
template <typename T, WgmmaTile kTile>
struct WgmmaTileConfig;
// 128x256, 4 stages: 48 KiB per stage, 193 KiB of shared memory, one CTA per SM.
template <typename T>
struct WgmmaTileConfig<T, WgmmaTile::m128n256> { using type = WgmmaConfig<T, 256, 4, 2>; };
// 128x128, 6 stages: 32 KiB per stage, 193 KiB; for grids the 128x256 tile leaves uneven.
template <typename T>
struct WgmmaTileConfig<T, WgmmaTile::m128n128> { using type = WgmmaConfig<T, 128, 6, 2>; };
// The small-grid tiles (with split K): more CTAs on a small output, each pulling fewer bytes
// per k-tile. 64x128, 6 stages of 24 KiB; 64x64, 8 stages of 16 KiB. The deep pipelines keep
// a whole split's k-tiles in flight.
template <typename T>
struct WgmmaTileConfig<T, WgmmaTile::m64n128> { using type = WgmmaConfig<T, 128, 6, 1>; };
template <typename T>
struct WgmmaTileConfig<T, WgmmaTile::m64n64> { using type = WgmmaConfig<T, 64, 8, 1>; };

template <typename T, typename F>
decltype(auto) with_wgmma_config(WgmmaTile tile, F&& f) {
  switch (tile) {
    case WgmmaTile::m128n256: return f(typename WgmmaTileConfig<T, WgmmaTile::m128n256>::type{});
    case WgmmaTile::m64n128: return f(typename WgmmaTileConfig<T, WgmmaTile::m64n128>::type{});
    case WgmmaTile::m64n64: return f(typename WgmmaTileConfig<T, WgmmaTile::m64n64>::type{});
    default: return f(typename WgmmaTileConfig<T, WgmmaTile::m128n128>::type{});
  }
}

template <class C>
void configure_kernel() {
  allow_dynamic_smem(gemm_wgmma_sm90_kernel<C>, C::kSmemBytes);
}

template <class C>
int max_active_clusters(int split) {
  return cluster_capacity(gemm_wgmma_sm90_kernel<C>, dim3(C::kThreads), C::kSmemBytes, static_cast<unsigned>(split));
}

template <class C>
void launch_config(const GemmArgs& a, int split, cudaStream_t stream) {
  configure_kernel<C>();
  const CUtensorMap tmap_a = make_tensor_map_2d_sw128(a.A, a.dtype, static_cast<uint64_t>(a.M),
                                                      static_cast<uint64_t>(a.K), C::BM, C::BK);
  const CUtensorMap tmap_w = make_tensor_map_2d_sw128(a.W, a.dtype, static_cast<uint64_t>(a.N),
                                                      static_cast<uint64_t>(a.K), C::BN, C::BK);
  const int64_t tiles = ((a.M + C::BM - 1) / C::BM) * ((a.N + C::BN - 1) / C::BN);
  launch_kernel(gemm_wgmma_sm90_kernel<C>, dim3(static_cast<unsigned>(tiles * split)), dim3(C::kThreads),
                C::kSmemBytes, stream, static_cast<unsigned>(split), tmap_a, tmap_w, a, split);
  TLB_LAUNCH_CHECK(stream);
}

}  // namespace

bool wgmma_sm90_image_present() {
  // The kernel carries sm_90a machine code only if this build targeted it; a PTX JIT from an
  // older virtual architecture would run the trapping stub instead.
  cudaFuncAttributes attr{};
  TLB_CUDA_CHECK(cudaFuncGetAttributes(&attr, gemm_wgmma_sm90_kernel<WgmmaConfig<__half, 256, 4, 2>>));
  return attr.ptxVersion >= 90 && attr.binaryVersion == 90;
}

WgmmaTileShape wgmma_tile_shape(WgmmaTile t) {
  return with_wgmma_config<__half>(t, [](auto c) {
    using C = decltype(c);
    return WgmmaTileShape{C::BM, C::BN};
  });
}

std::string wgmma_tile_name(WgmmaTile t, DType d, int split) {
  return dispatch_dtype(d, [&](auto tag) {
    using T = decltype(tag);
    return with_wgmma_config<T>(t, [&](auto c) {
      using C = decltype(c);
      return "sm90_wgmma_" + std::to_string(C::BM) + "x" + std::to_string(C::BN) + "x" + std::to_string(C::BK) +
             "_s" + std::to_string(C::STAGES) + (split > 1 ? "_splitk" + std::to_string(split) : "") +
             (C::kTf32 ? "_tf32" : "");
    });
  });
}

int wgmma_max_active_clusters(WgmmaTile tile, DType d, int split) {
  // Per device, tile, dtype and split; asked once each (the dispatcher calls it per GEMM).
  static std::mutex mu;
  static std::map<std::tuple<int, int, int, int>, int> cache;
  int dev = 0;
  TLB_CUDA_CHECK(cudaGetDevice(&dev));
  const auto key = std::make_tuple(dev, static_cast<int>(tile), static_cast<int>(d), split);
  std::lock_guard<std::mutex> lock(mu);
  const auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  const int n = dispatch_dtype(d, [&](auto tag) {
    using T = decltype(tag);
    return with_wgmma_config<T>(tile, [&](auto c) { return max_active_clusters<decltype(c)>(split); });
  });
  cache.emplace(key, n);
  return n;
}

void launch_gemm_wgmma_sm90(const GemmArgs& args, WgmmaTile tile, int split, cudaStream_t stream) {
  const GemmArgs a = with_split_map(args);
  const WgmmaTileShape shape = wgmma_tile_shape(tile);
  if (split < 1 || split > kMaxWgmmaSplit || (split > 1 && shape.bm != 64) || shape.bm % split != 0) {
    throw std::invalid_argument("wgmma GEMM: split " + std::to_string(split) + " is not available for the " +
                                std::to_string(shape.bm) + "x" + std::to_string(shape.bn) + " tile");
  }
  dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    with_wgmma_config<T>(tile, [&](auto c) { launch_config<decltype(c)>(a, split, stream); });
  });
}

}  // namespace tlb::gemm_detail
