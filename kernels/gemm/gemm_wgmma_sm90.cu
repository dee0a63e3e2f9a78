// Hopper tensor-core GEMM, out = epilogue(A · W^T): TMA loads of 128-byte-swizzled K-major
// tiles into a multi-stage mbarrier pipeline, one producer warpgroup and one or two consumer
// warpgroups issuing wgmma (fp16/bf16 k16, tf32 k8) from shared memory, fp32 accumulation,
// the fused epilogue on 16-byte output runs. Small grids split K over a thread-block cluster
// and add the partial tiles through distributed shared memory, in a fixed order (the result
// does not depend on scheduling). Any M (TMA zero-fills the tails); N and K multiples of 8.
// sm_90a only; elsewhere the kernel body traps and the host never launches it.
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
#include "gemm/gemm_epilogue.cuh"
#include "gemm/gemm_internal.hpp"
#include "gemm/gemm_raster.cuh"
#include "gemm/gemm_wgmma.cuh"
#include "common/tensor_map.hpp"

namespace tlb::gemm_detail {
namespace {

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
  static_assert(kStageBytes % 1024 == 0, "stage buffers must stay 1024-byte aligned");
};


// Split K (gridDim.x = tiles x split, clusters of `split` consecutive CTAs along x): cluster
// rank r accumulates k-tiles [r * per, (r + 1) * per) of the same output tile, stages its
// partial sums in its shared memory, and after a cluster barrier reduces rows
// [r * BM / split, (r + 1) * BM / split) by reading every rank's partial through distributed
// shared memory in rank order, then applies the epilogue. split == 1 needs no cluster.
template <class C>
__global__ void __launch_bounds__(C::kThreads, 1)
    gemm_wgmma_sm90_kernel(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_w,
                           const GemmArgs p, const int split) {
  static_assert(!C::kRebalanceRegs || (128 * C::kProducerRegs + 256 * C::kConsumerRegs <= 64 * 1024 &&
                                        C::kThreads * C::kEpilogueRegs <= 64 * 1024),
                "the rebalanced registers must fit the SM's register file");
#if TLB_PTX_SM90A
  using T = typename C::Elem;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw_addr = ptx::smem_addr(smem_raw);
  const uint32_t base = (raw_addr + 1023u) & ~1023u;
  unsigned char* smem = smem_raw + (base - raw_addr);
  float* staging = reinterpret_cast<float*>(smem);      // after the main loop: BM x kStagePitch
  const uint32_t full_bar = base + C::kRegionBytes;     // tile of stage s has landed
  const uint32_t empty_bar = full_bar + C::STAGES * 8;  // every consumer is done with stage s

  const int tiles_m = static_cast<int>((p.M + C::BM - 1) / C::BM);
  const int tiles_n = static_cast<int>((p.N + C::BN - 1) / C::BN);
  const int tile = static_cast<int>(blockIdx.x) / split, rank = static_cast<int>(blockIdx.x) % split;
  const TileCoord coord = raster_tile(tile, tiles_m, tiles_n);
  const int m0 = coord.m * C::BM, n0 = coord.n * C::BN;
  const int k_tiles_all = static_cast<int>((p.K + C::BK - 1) / C::BK);
  const int per_rank = (k_tiles_all + split - 1) / split;
  const int kt_begin = min(k_tiles_all, rank * per_rank);
  const int k_tiles = min(k_tiles_all, kt_begin + per_rank) - kt_begin;  // may be 0
  // Broadcast from lane 0, warp-uniform to the compiler too: the descriptors derived from it
  // stay in uniform registers, which wgmma reads (the ping-pong kernel's mainloop: 44
  // instructions a k-tile this way, 128 without).
  const int warpgroup = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);

  if (threadIdx.x == 0) {
    for (int s = 0; s < C::STAGES; ++s) {
      ptx::mbarrier_init(full_bar + 8 * s, 1);
      ptx::mbarrier_init(empty_bar + 8 * s, 128 * C::kConsumers);
    }
    ptx::fence_mbarrier_init();
    ptx::prefetch_tensor_map(&tmap_a);
    ptx::prefetch_tensor_map(&tmap_w);
  }
  __syncthreads();
  // Under PDL everything up to pdl_wait overlaps the previous kernel's tail. W holds weights,
  // which no kernel of the forward writes, so the first stages' W tiles load now; A and the
  // residual may be the previous kernel's output and wait.
  const int preloaded = min(k_tiles, C::STAGES);
  if (threadIdx.x == 0) {
    for (int i = 0; i < preloaded; ++i) {
      ptx::mbarrier_arrive_expect_tx(full_bar + 8 * i, C::kStageBytes);
      ptx::tma_load_2d(base + i * C::kStageBytes + C::kABytes, &tmap_w, (kt_begin + i) * C::BK, n0, full_bar + 8 * i);
    }
  }
  // Each thread stores one 16-byte run of columns, the same in every row it visits. The 64-row
  // tiles serve small, latency-bound launches: there the epilogue's inputs load before the
  // main loop, not after it, where their latency would add to the launch's. The bias is a
  // weight and loads before the PDL wait; the residual may be the previous kernel's output and
  // loads right after it. (The 128-row tiles, throughput-bound and at their register budget,
  // load both in the epilogue.)
  constexpr int kVec = Pack16<T>::kCount;
  constexpr int kRunsPerRow = C::BN / kVec;
  static_assert(C::kThreads % kRunsPerRow == 0, "a thread's run of columns is fixed");
  constexpr int kRowStep = C::kThreads / kRunsPerRow;
  constexpr bool kEarlyInputs = !C::kRebalanceRegs;
  constexpr int kRowsPerThread = kEarlyInputs ? C::BM / kRowStep : 1;
  const int run = static_cast<int>(threadIdx.x) % kRunsPerRow;
  const int64_t n_run = static_cast<int64_t>(n0) + run * kVec;
  // Rows [row_begin, row_begin + rows_mine) of the tile are this CTA's to store: all of them,
  // or under split K the share its cluster rank reduces.
  const int rows_mine = C::BM / split, row_begin = rank * rows_mine;
  // The tile row of this thread's j-th run, in the 64-row tiles' early-input loops below.
  const auto my_row = [&](int j) { return row_begin + static_cast<int>(threadIdx.x) / kRunsPerRow + j * kRowStep; };
  float bias[kVec];
  Pack16<T> residual[kRowsPerThread];
  if constexpr (kEarlyInputs) {
    if (n_run < p.N) load_bias_run<T>(p, n_run, bias);
  }
  ptx::pdl_wait();
  ptx::pdl_launch_dependents();
  if constexpr (kEarlyInputs) {
    if (p.epilogue == GemmEpilogue::bias_residual && n_run < p.N) {
#pragma unroll
      for (int j = 0; j < kRowsPerThread; ++j) {
        const int row = my_row(j);
        const int64_t m = static_cast<int64_t>(m0) + row;
        if (row < row_begin + rows_mine && m < p.M)
          residual[j] = Pack16<T>::load_nc(static_cast<const T*>(p.residual) + m * p.N + n_run);
      }
    }
  }

  if (warpgroup == 0) {
    if constexpr (C::kRebalanceRegs) ptx::setmaxnreg_dec<C::kProducerRegs>();
    if (threadIdx.x == 0) {
      for (int i = 0; i < k_tiles; ++i) {
        const int s = i % C::STAGES, kt = kt_begin + i;
        const uint32_t dst = base + s * C::kStageBytes;
        if (i >= preloaded) {
          // Round r = i / STAGES reuses the stage once the consumers released round r - 1.
          ptx::mbarrier_wait(empty_bar + 8 * s, ((i / C::STAGES) & 1) ^ 1);
          ptx::mbarrier_arrive_expect_tx(full_bar + 8 * s, C::kStageBytes);
          ptx::tma_load_2d(dst + C::kABytes, &tmap_w, kt * C::BK, n0, full_bar + 8 * s);
        }
        ptx::tma_load_2d(dst, &tmap_a, kt * C::BK, m0, full_bar + 8 * s);
      }
    }
    // The producer warpgroup stays for the epilogue, and it passes the barrier that frees the
    // pipeline buffers with the consumers (see below).
    ptx::named_barrier_sync_divergent(1, C::kThreads);
    if constexpr (C::kRebalanceRegs) {
      __syncwarp();  // setmaxnreg is warp-aligned; lane 0 of warp 0 ran the TMA loop alone
      ptx::setmaxnreg_inc<C::kEpilogueRegs>();  // waits until the consumers have given theirs
    }
  } else {
    if constexpr (C::kRebalanceRegs) ptx::setmaxnreg_inc<C::kConsumerRegs>();
    const int consumer = warpgroup - 1;
    float acc[C::BN / 2];
#pragma unroll
    for (int i = 0; i < C::BN / 2; ++i) acc[i] = 0.0f;

    for (int i = 0; i < k_tiles; ++i) {
      const int s = i % C::STAGES;
      ptx::mbarrier_wait(full_bar + 8 * s, (i / C::STAGES) & 1);
      const uint32_t a_tile = base + s * C::kStageBytes + consumer * 64 * C::kRowBytes;
      const uint32_t w_tile = base + s * C::kStageBytes + C::kABytes;
      const uint64_t desc_a = ptx::wgmma_desc_k_major_sw128(a_tile);
      const uint64_t desc_w = ptx::wgmma_desc_k_major_sw128(w_tile);
      ptx::wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < C::kKSteps; ++ks) {
        // 32 bytes further along K = 2 in the descriptor's 16-byte address units.
        wgmma_k_step<T, C::BN>(acc, desc_a + 2 * ks, desc_w + 2 * ks);
      }
      ptx::wgmma_commit_group();
      // Keep this tile's MMAs in flight; the previous tile's are done, so its stage is free.
      ptx::wgmma_wait_group<1>();
      if (i > 0) ptx::mbarrier_arrive(empty_bar + 8 * ((i - 1) % C::STAGES));
    }
    ptx::wgmma_wait_group<0>();

    // Epilogue through shared memory (the pipeline buffers, now idle: every TMA load has been
    // consumed). Every consumer must be past its last wgmma before any overwrites them. Every
    // warp then reads the staged tile, and every warp passes this barrier too:
    // compute-sanitizer's racecheck flagged the producer warps' reads as unordered with the
    // consumers' writes (whichever barrier came between) as long as the consumers had passed
    // one barrier more than they had.
    ptx::named_barrier_sync_divergent(1, C::kThreads);
    // The bytes were last touched by the async proxy (TMA writes, wgmma reads).
    ptx::fence_proxy_async_shared();
    float* mine = staging + consumer * 64 * C::kStagePitch;
    const int lane = threadIdx.x & 31, warp_in_group = (threadIdx.x / 32) & 3;
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int j = 0; j < C::BN / 8; ++j) {
      const int row = warp_in_group * 16 + g, col = j * 8 + 2 * t;
      *reinterpret_cast<float2*>(&mine[row * C::kStagePitch + col]) = make_float2(acc[4 * j], acc[4 * j + 1]);
      *reinterpret_cast<float2*>(&mine[(row + 8) * C::kStagePitch + col]) =
          make_float2(acc[4 * j + 2], acc[4 * j + 3]);
    }
    if constexpr (C::kRebalanceRegs) ptx::setmaxnreg_dec<C::kEpilogueRegs>();
  }

  if constexpr (kEarlyInputs) {
    // The staged tile is complete once every warp of this CTA (split == 1), or of the cluster
    // (split K: every rank's partial), is past its staging. Warp 0 may arrive diverged (lane 0
    // from the TMA loop), hence the barrier that counts a warp once all its threads are there;
    // so does barrier.cluster.
    namespace cg = cooperative_groups;
    if (split == 1) {
      ptx::named_barrier_sync_divergent(2, C::kThreads);
    } else {
      cg::this_cluster().sync();
    }
    if (n_run < p.N) {
#pragma unroll
      for (int j = 0; j < kRowsPerThread; ++j) {
        const int row = my_row(j);
        const int64_t m = static_cast<int64_t>(m0) + row;
        if (row >= row_begin + rows_mine || m >= p.M) break;
        float v[kVec];
        if (split == 1) {
          load_staged_run<T>(&staging[row * C::kStagePitch + run * kVec], v);
        } else {
          // Every rank's partial of this row, through distributed shared memory, in rank order.
#pragma unroll
          for (int e = 0; e < kVec; ++e) v[e] = 0.0f;
          for (int q = 0; q < split; ++q) {
            float part[kVec];
            load_staged_run<T>(cg::this_cluster().map_shared_rank(staging, q) + row * C::kStagePitch + run * kVec,
                               part);
#pragma unroll
            for (int e = 0; e < kVec; ++e) v[e] += part[e];
          }
        }
        float r[kVec];
        if (p.epilogue == GemmEpilogue::bias_residual) {
          residual[j].to_floats(r);
        } else {
#pragma unroll
          for (int e = 0; e < kVec; ++e) r[e] = 0.0f;
        }
        epilogue_store_loaded<T>(p, m, n_run, v, bias, r);
      }
    }
    if (split > 1) cg::this_cluster().sync();  // no rank leaves while another reads its shared memory
  } else {
    // The 128-row tiles (never split): all twelve warps share the epilogue (two consumer
    // warpgroups alone are two warps per scheduler, too few to hide the loads and the
    // activation's math). A thread loads its run's bias once.
    ptx::named_barrier_sync_divergent(2, C::kThreads);
    if (n_run < p.N) {
      load_bias_run<T>(p, n_run, bias);
#pragma unroll 2
      for (int row = static_cast<int>(threadIdx.x) / kRunsPerRow; row < C::BM; row += kRowStep) {
        const int64_t m = static_cast<int64_t>(m0) + row;
        if (m >= p.M) break;
        float v[kVec];
        load_staged_run<T>(&staging[row * C::kStagePitch + run * kVec], v);
        epilogue_store_biased<T>(p, m, n_run, v, bias);
      }
    }
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
  configure_kernel<C>();
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(split));
  cfg.blockDim = dim3(C::kThreads);
  cfg.dynamicSmemBytes = C::kSmemBytes;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = static_cast<unsigned>(split);
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  int n = 0;
  TLB_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&n, gemm_wgmma_sm90_kernel<C>, &cfg));
  return n;
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

void launch_gemm_wgmma_sm90(const GemmArgs& a, WgmmaTile tile, int split, cudaStream_t stream) {
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
