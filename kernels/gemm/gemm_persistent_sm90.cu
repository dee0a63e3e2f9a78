// Hopper persistent GEMM, out = epilogue(A · W^T), for grids that fill the chip: one CTA per
// SM walks a static schedule of output tiles (or, stream-K, of runs of their k-tiles: see
// Schedule). A producer thread streams every tile's A and W k-tiles with TMA into one ring of
// mbarrier stages that runs on across tiles (the next tile's loads overlap this one's MMAs);
// two consumer warpgroups share the work in one of four schedules (PersistentSchedule):
// - ping-pong: 128 x 128 tiles taken in turn, 128 fp32 accumulators a thread. While one
//   consumer issues its tile's MMAs, the other applies the fused epilogue to its previous
//   tile, so the tensor cores do not wait for epilogues.
// - ping-pong wide: the same on 128 x 192 tiles, 192 accumulators a thread. A k-tile's 40 KiB
//   of operands feed 1.5x the MMAs of a 128 x 128 tile's 32 KiB (a sixth fewer bytes a FLOP
//   through L2, a ninth fewer read from shared memory by m64n192 wgmmas), and the epilogue
//   still hides under the other consumer's MMAs.
// - cooperative: 256 x 128 tiles, each consumer taking 128 of its rows. A k-tile's 48 KiB of
//   operands feed twice the MMAs of a 128 x 128 tile's 32 KiB, so a quarter fewer bytes per
//   FLOP cross L2 and shared memory (what the power cap charges for, results/perf-log.md),
//   but the tensor cores wait while both consumers run the epilogue.
// - cooperative wide: 128 x 256 tiles, each consumer taking 64 rows over the full width, one
//   m64n256 wgmma a k-step: the cooperative tile's bytes through L2, and a sixth fewer
//   operand bytes read from shared memory than two m64n128 wgmmas.
// Any schedule may run in clusters of two CTAs (one per SM still) that take vertically
// adjacent tiles, sharing each W k-tile: each CTA loads half of it and multicasts it to both.
// fp16/bf16 k16, tf32 k8, fp32 accumulation; any M (TMA zero-fills the tails); N and K
// multiples of 8. sm_90a only; elsewhere the kernel body traps and the host never launches it.
//
// The parts, in the order a tile meets them: Schedule (which tiles, or runs of k-tiles, a CTA
// or cluster owns), produce (the TMA loop), mma_tile (a consumer's k-loop), Partials (stream-K's
// hand-over of a cut tile's k-tiles from the runs that meet it to the one that ends it),
// store_tile (the epilogue, through the consumer's fp32 Staging) or store_tile_boxed (the same
// applied in the accumulators, written as boxes of output elements by stmatrix or 8-byte
// stores, each box stored by TMA or copied out by the consumer's threads), and, in
// ping-pong, the turn barriers that keep the two consumers' MMAs from running at the same time.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "common/cuda_check.hpp"
#include "common/device_caps.hpp"
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
namespace tlb::gemm_detail::persistent {

template <typename T, PersistentSchedule kSchedule>
struct PersistentConfig {
  using Elem = T;
  static constexpr bool kCooperative =
      kSchedule == PersistentSchedule::cooperative || kSchedule == PersistentSchedule::cooperative_wide;
  // A consumer's share of a tile: two 64-row wgmma blocks 128 (or, ping-pong wide, 192)
  // columns wide, or (cooperative wide) one block of 64 rows over 256 columns, whose m64n256
  // wgmma reads 64 + 256 operand rows from shared memory a k-step where the two m64n128 ones
  // read 2 x (64 + 128): a sixth fewer bytes for the same MMAs. 128 fp32 accumulators a
  // thread, or 192 on the 128 x 192 tiles (the consumers' 240 registers hold them with the
  // mainloop's, not all of the epilogue's: kConsumerRegs; 128 x 256 would need 256, more than
  // a thread has).
  static constexpr int kConsumerRows = kSchedule == PersistentSchedule::cooperative_wide ? 64 : 128;
  static constexpr int kRowBlocks = kConsumerRows / 64;  // the consumer's 64-row wgmma blocks
  // How many consumers work on one tile, and so how tall the tile is.
  static constexpr int kConsumersPerTile = kCooperative ? 2 : 1;
  static constexpr int BM = kConsumersPerTile * kConsumerRows;
  static constexpr int BN = kSchedule == PersistentSchedule::cooperative_wide ? 256
                            : kSchedule == PersistentSchedule::pingpong_wide  ? 192
                                                                              : 128;
  static constexpr int kAccPerRowBlock = BN / 2;  // a thread's fp32 accumulators of a 64-row block
  static constexpr int kRowBytes = 128;  // a k-tile is 128 bytes of K per row: one swizzle span
  static constexpr int BK = kRowBytes / static_cast<int>(sizeof(T));
  static constexpr int kKSteps = kRowBytes / 32;  // wgmma k16 (halves) or k8 (tf32): 32 bytes
  static constexpr int kThreads = 384;            // the producer warpgroup, then two consumers
  static constexpr int kATileBytes = BM * kRowBytes, kWTileBytes = BN * kRowBytes;
  static constexpr int kStageBytes = kATileBytes + kWTileBytes;  // A's k-tile, then W's
  // 160-192 KiB of stages: six of 32 KiB, four of 40 or of 48 KiB, 2-2.5 us of loads in
  // flight at the rate the tensor cores consume them. With each consumer's 16 KiB (cooperative
  // wide: 8 KiB) epilogue staging, the alignment slack and the barriers that is at most
  // 225 KiB, within a CTA's 227.
  static constexpr int STAGES = kStageBytes == 32 * 1024 ? 6 : 4;
  // k-tiles of MMAs a consumer keeps queued at the tensor cores. Ping-pong's consumer keeps
  // two, or the tensor cores run dry whenever its next group comes late behind the other
  // consumer's epilogue on the same schedulers; cooperative consumers issue side by side, and
  // with fewer, larger stages each one held back is a stage the producer cannot fill. On the
  // 128 x 192 tiles a k-tile's MMAs take 1.5x as long and the ring has four stages: one held
  // leaves the producer three to fill (2300 cycles of loads ahead, ping-pong's 2000).
  static constexpr int kMmaGroupsInFlight = kSchedule == PersistentSchedule::pingpong ? 2 : 1;
  // The fp32 staging's chunk loop is rolled, so every accumulator stays live through it: with
  // 192 of them that is more than a consumer's registers hold, and such tiles leave as boxes
  // only (copied out where the launch asks for the staging: the same bits).
  static constexpr bool kBoxedOnly = kSchedule == PersistentSchedule::pingpong_wide;
  static constexpr int kStageCols = 32;  // fp32 columns of a staged chunk
  static constexpr int kStagingBytes = kConsumerRows * kStageCols * 4;
  // + 1024 to align the stages (the swizzle pattern is anchored at 1024-byte boundaries), the
  // two consumers' staging, then a full and an empty barrier per stage and each consumer's
  // residual barrier.
  static constexpr int kSmemBytes = 1024 + STAGES * kStageBytes + 2 * kStagingBytes + STAGES * 16 + 2 * 8;
  // The 384-thread entry budget is 168 registers each; the producer gives back all but 40,
  // so the consumers' accumulators and epilogue get 232 (128 x 40 + 256 x 232 = 64 Ki), or,
  // beside 192 accumulators, all but 24 for 240 (ptxas spilled twice as much at 232).
  static constexpr int kProducerRegs = kSchedule == PersistentSchedule::pingpong_wide ? 24 : 40;
  static constexpr int kConsumerRegs = kSchedule == PersistentSchedule::pingpong_wide ? 240 : 232;
  static_assert(kMmaGroupsInFlight < STAGES, "the queued k-tiles hold stages");
  static_assert(kATileBytes % 1024 == 0 && kStageBytes % 1024 == 0, "stages must stay 1024-byte aligned");
  static_assert(kStagingBytes % 1024 == 0, "each consumer's staging holds a 128-byte-swizzled TMA box: 1024-aligned");
  static_assert(kSmemBytes <= 227 * 1024, "shared memory must fit one CTA's limit");
  static_assert(128 * kProducerRegs + 256 * kConsumerRegs <= 64 * 1024, "registers must fit the SM's file");
};

// A consumer's accumulators: its 64-row wgmma blocks, C::kAccPerRowBlock fp32s of each a thread.
template <class C>
using Accumulators = float[C::kRowBlocks][C::kAccPerRowBlock];

// Named barriers 1 and 2 (ping-pong): consumer c waits on 1 + c for its turn at the tensor
// cores, which the other consumer grants once it has issued its own tile's last MMA. 3 and 4: consumer c's
// 128 threads around each use of its staging (a staged chunk, a box) and stream-K's partials.
inline constexpr uint32_t kTurnBarrier = 1;
inline constexpr uint32_t kTurnThreads = 256;
inline constexpr uint32_t kStagingBarrier = 3;
// How long the producer sleeps per try on a full ring (an upper bound: it wakes when the
// stage is released).
inline constexpr uint32_t kProducerSuspendNs = 20000;

// One unit of a consumer's work: k-tiles [k_begin, k_end) of one output tile.
struct WorkUnit {
  TileCoord tile;
  int k_begin, k_end;

  __device__ int k_count() const { return k_end - k_begin; }
};

// The static persistent schedule, in raster order (gemm_raster.cuh); in ping-pong a CTA's j-th
// unit goes to consumer j % 2, cooperative consumers take every unit together.
// - Data-parallel (sk_tiles == 0): CTA c of G takes the tiles c, c + G, c + 2G, ..., whole.
// - Stream-K (sk_tiles > 0): tiles below dp_rounds x G go so, dp_rounds to each CTA; the
//   k-tiles of the sk_tiles after them (the partial wave, or the last full wave and the
//   partial one: fewer than 2G) are cut into G runs of equal length, CTA c taking run c, so
//   that no SM idles through the partial wave. A run meets at most three tiles and stops short
//   of a tile's end at most once (at its own end); what it computes of a tile whose end it
//   does not reach is left in the workspace as a partial (Partials), and the run that ends the
//   tile adds the partials of the runs before it that meet the tile, nearest first, then runs
//   the epilogue. A CTA takes its units longest first: the first one's MMAs hide the epilogue
//   of its last whole tile, and with three units the first is the whole middle tile, so the
//   one that writes a partial never waits behind the one that waits for partials on the same
//   consumer (a ping-pong CTA's units alternate between its two consumers, and writing never
//   waits). That order is ping-pong's; a cooperative CTA takes the unit it leaves a partial of
//   first (Schedule::partial_first).
// In clusters of two CTAs (cluster == 2) the schedule is the same over pairs of tiles: the
// cluster is one "CTA" of it (group()), taking a pair of vertically adjacent tiles where a CTA
// takes one, rank r the pair's tile r; tiles_m counts tile pairs then, and a raster group
// (gemm_raster.cuh) holds twice the tile rows (on case 13's 32768-row GEMMs, in the one table
// where the pairs gained, that taller group was most of it: results/perf-log.md, 2026-12-07;
// without pairs such groups only lost). Both CTAs of a cluster
// run the same units over the same k-tiles, so their rings step in lockstep and the W k-tile
// they share is loaded once for both (produce).
struct Schedule {
  int tiles_m, tiles_n, k_tiles;
  int dp_rounds, sk_tiles;
  // The order of a run's tiles: longest first (ping-pong), or the one it leaves a partial of
  // first and the one it adds partials to last (cooperative: see unit()).
  bool partial_first;
  int cluster;      // CTAs of a cluster along x: 1 or 2
  int raster_rows;  // rows of tiles (pairs) a raster group (gemm_raster.cuh)

  __device__ int group() const { return static_cast<int>(blockIdx.x) / cluster; }
  __device__ int groups() const { return static_cast<int>(gridDim.x) / cluster; }
  __device__ int rank() const { return static_cast<int>(blockIdx.x) % cluster; }
  // Where group c's run starts, in k-tiles from the first stream-K tile's first.
  __device__ int64_t run_begin(int c) const { return static_cast<int64_t>(sk_tiles) * k_tiles * c / groups(); }
  __device__ int units_of_this_cta() const {
    const int c = group(), g = groups();
    if (sk_tiles == 0) {
      const int total = tiles_m * tiles_n;
      return c < total ? (total - c + g - 1) / g : 0;
    }
    const int64_t lo = run_begin(c), hi = run_begin(c + 1);
    if (lo == hi) return dp_rounds;
    return dp_rounds + 1 + static_cast<int>((hi - 1) / k_tiles - lo / k_tiles);
  }
  __device__ WorkUnit unit(int j) const {
    const int c = group(), g = groups();
    if (sk_tiles == 0 || j < dp_rounds) return {own(raster(c + j * g)), 0, k_tiles};
    const int64_t lo = run_begin(c), hi = run_begin(c + 1);
    const int64_t first = lo / k_tiles, last = (hi - 1) / k_tiles;
    const int i = j - dp_rounds;
    const bool last_longer = hi - last * k_tiles > (first + 1) * k_tiles - lo;
    int64_t s;
    if (partial_first) {
      // Cooperative consumers wait for partials together, nothing beside them to hide the
      // wait: the run leaves its partial (of its last tile) before anything else, so that a
      // run adding partials (to its first tile, last) finds them written, not written at the
      // end of the runs before it, each of which would wait for the one before it in turn.
      s = i == 0 ? last : last - first == 2 && i == 1 ? first + 1 : first;
    } else if (last - first == 2) {
      // The run's tiles, longest first: the whole middle one of three, then the longer end
      // (ties: the first).
      s = i == 0 ? first + 1 : (i == 1) == last_longer ? last : first;
    } else {
      s = (i == 0) == last_longer ? last : first;
    }
    const int64_t base = s * k_tiles;
    return {own(raster(dp_rounds * g + static_cast<int>(s))),
            static_cast<int>(max(lo, base) - base), static_cast<int>(min(hi, base + k_tiles) - base)};
  }
  // The group's i-th tile (pair), in raster order.
  __device__ TileCoord raster(int i) const { return raster_tile(i, tiles_m, tiles_n, raster_rows); }
  // This CTA's tile of the group's tile (pair) t.
  __device__ TileCoord own(TileCoord t) const { return {t.m * cluster + rank(), t.n}; }
};

// The producer: one thread issues every TMA load of the CTA's units, k-tile by k-tile, each
// into the next stage once its consumers have released it. In a cluster of two, each CTA
// loads its own A k-tile and its half of the W k-tile both tiles share (tmap_w's box is half
// as tall), multicast into the same place of both CTAs' stages: a stage is free once the
// consumers of both CTAs have released it (they arrive on both empty barriers), and complete
// when its own A and both halves of W have landed (the peer's half may land before this
// thread expects the bytes: the phase's transaction count goes below zero meanwhile).
template <class C>
__device__ void produce(const CUtensorMap* tmap_a, const CUtensorMap* tmap_w, const Schedule& sched,
                        const Ring<C>& ring) {
  constexpr uint16_t kBothCtas = 0b11;  // clusters are of one or two CTAs (persistent_supported)
  const int w_rows = C::BN / sched.cluster;  // rows of W this CTA loads
  const uint32_t w_half = static_cast<uint32_t>(sched.rank() * w_rows * C::kRowBytes);
  RingSlot<C::STAGES> slot;
  const int units = sched.units_of_this_cta();
  for (int j = 0; j < units; ++j) {
    const WorkUnit u = sched.unit(j);
    const TileCoord t = u.tile;
    for (int kt = u.k_begin; kt < u.k_end; ++kt) {
      // A fresh barrier's "previous" phase counts as complete: the first round does not wait.
      // Past the first round the ring is mostly full and this waits about one k-tile's MMAs;
      // suspended, this thread's retries leave the issue slots of its scheduler to the
      // consumer warps beside it.
      ptx::mbarrier_wait_suspended(ring.empty(slot.stage), slot.phase ^ 1u, kProducerSuspendNs);
      const uint32_t dst = ring.stage(slot.stage), full = ring.full(slot.stage);
      ptx::mbarrier_arrive_expect_tx(full, C::kStageBytes);
      ptx::tma_load_2d(dst, tmap_a, kt * C::BK, t.m * C::BM, full);
      const int w_row = t.n * C::BN + sched.rank() * w_rows;
      if (sched.cluster == 1) {
        ptx::tma_load_2d(dst + C::kATileBytes, tmap_w, kt * C::BK, w_row, full);
      } else {
        ptx::tma_load_2d_multicast(dst + C::kATileBytes + w_half, tmap_w, kt * C::BK, w_row, full, kBothCtas);
      }
      slot.advance(1);
    }
  }
}

// A consumer warp is done with stage `stage`: one arrival on its empty barrier, and in a
// cluster of two on the peer's too (whose producer multicasts half of W into this CTA's
// stage), lane r arriving on rank r's.
template <class C>
__device__ __forceinline__ void release_stage(const Ring<C>& ring, int stage, int cluster) {
  const uint32_t lane = threadIdx.x & 31;
  if (cluster == 1) {
    if (lane == 0) ptx::mbarrier_arrive(ring.empty(stage));
  } else if (lane < static_cast<uint32_t>(cluster)) {
    ptx::mbarrier_arrive_cluster(ptx::map_shared_rank(ring.empty(stage), lane));
  }
  __syncwarp();
}

// One consumer's k-loop over its rows of a tile (`a_rows_bytes` into the stage's A k-tile):
// waits for each stage, issues its MMAs (the first k-step overwrites the accumulators) and
// keeps C::kMmaGroupsInFlight k-tiles' MMAs queued at the tensor cores, releasing each stage
// once the MMAs that read it are done. Returns with every MMA issued and the last
// min(k_tiles, kMmaGroupsInFlight) stages still held, from `held` on: the caller hands the
// turn on first (ping-pong), then waits for the MMAs and releases them (release_held).
template <class C>
__device__ __forceinline__ RingSlot<C::STAGES> mma_tile(Accumulators<C>& acc, int k_tiles, const Ring<C>& ring,
                                                        RingSlot<C::STAGES>& slot, uint32_t a_rows_bytes, int cluster) {
  using T = typename C::Elem;
  constexpr int kInFlight = C::kMmaGroupsInFlight;
  RingSlot<C::STAGES> held = slot;  // the oldest stage not yet released
  // The stage's full barrier and A descriptor walk the ring as running values (a descriptor's
  // address field is in 16-byte units and shared memory lies below 256 KiB, so adding to the
  // 64-bit descriptor never carries out of it). Formed from slot.stage each k-tile instead,
  // ptxas builds every wgmma's descriptor in vector registers and moves it to a uniform one:
  // twice the k-loop's instructions, which a ping-pong partner's epilogue then competes with.
  const uint64_t desc_stage0 = ptx::wgmma_desc_k_major_sw128(ring.stage(0) + a_rows_bytes);
  uint64_t desc_a = ptx::wgmma_desc_k_major_sw128(ring.stage(slot.stage) + a_rows_bytes);
  uint32_t full = ring.full(slot.stage);
  for (int kt = 0; kt < k_tiles; ++kt) {
    ptx::mbarrier_wait(full, slot.phase);
    const uint64_t desc_w = desc_a + ((C::kATileBytes - a_rows_bytes) >> 4);
    ptx::wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < C::kKSteps; ++ks) {
#pragma unroll
      for (int h = 0; h < C::kRowBlocks; ++h) {
        // Descriptor addresses are in 16-byte units: rows 64h.. start 64 x 128 bytes further,
        // k-step ks 32 bytes further along the swizzled row.
        wgmma_k_step<T, C::BN>(acc[h], desc_a + h * (64 * C::kRowBytes / 16) + 2 * ks, desc_w + 2 * ks,
                               kt > 0 || ks > 0);
      }
    }
    ptx::wgmma_commit_group();
    ptx::wgmma_wait_group<kInFlight>();
    // One arrival per warp on each CTA's empty barrier (they count every consumer warp that
    // reads the stage, in every CTA of the cluster): this warp's MMAs of k-tile kt - kInFlight are
    // done, so it is done with the stage.
    if (kt >= kInFlight) {
      release_stage(ring, held.stage, cluster);
      held.advance(1);
    }
    if (++slot.stage == C::STAGES) {  // the ring wraps: back to stage 0, the next round's phase
      slot.stage = 0;
      slot.phase ^= 1u;
      desc_a = desc_stage0;
      full = ring.full(0);
    } else {
      desc_a += C::kStageBytes >> 4;
      full += 8;
    }
  }
  return held;
}

// After wgmma_wait_group<0>: releases the stages mma_tile returned held.
template <class C>
__device__ __forceinline__ void release_held(const Ring<C>& ring, RingSlot<C::STAGES> held, int k_tiles, int cluster) {
  for (int i = 0; i < k_tiles && i < C::kMmaGroupsInFlight; ++i) {
    release_stage(ring, held.stage, cluster);
    held.advance(1);
  }
}

// Stream-K's hand-over between CTAs (Schedule): the workspace holds one partial tile per
// consumer that works on a tile (one per ping-pong CTA, two per cooperative one: a CTA's run
// stops short of a tile's end at most once) and a ready flag each, zero between launches (the
// reader clears it); `slot` below is such a tile's index. A partial keeps the wgmma fragment
// layout: thread t's accumulators, 16 bytes at a time, at float4 q x 128 + t, so both sides
// move whole 512-byte lines per warp.
struct Partials {
  float* tiles;
  int* ready;

  // Thread t's first float4 of the partial in `slot`, kQuads of them a thread.
  template <int kQuads>
  __device__ static float4* of(float* tiles, int slot) {
    return reinterpret_cast<float4*>(tiles) + static_cast<int64_t>(slot) * kQuads * 128 +
           static_cast<int>(threadIdx.x) % 128;
  }
  // The consumer's accumulators as the partial in `slot`; `barrier` is its 128 threads' own.
  template <int kRowBlocks, int kPerRowBlock>
  __device__ void publish(const float (&acc)[kRowBlocks][kPerRowBlock], int slot, uint32_t barrier) const {
    constexpr int kQuads = kRowBlocks * kPerRowBlock / 4;
    float4* dst = of<kQuads>(tiles, slot);
#pragma unroll
    for (int q = 0; q < kQuads; ++q) {
      const float* a = &acc[q / (kPerRowBlock / 4)][4 * (q % (kPerRowBlock / 4))];
      __stcg(dst + q * 128, make_float4(a[0], a[1], a[2], a[3]));
    }
    ptx::named_barrier_sync(barrier, 128);
    if (threadIdx.x % 128 == 0) {
      ptx::fence_acq_rel_gpu();
      ptx::store_flag_relaxed_gpu(ready + slot, 1);
    }
  }
  // Adds the partial in `slot` to the accumulators once it is there.
  template <int kRowBlocks, int kPerRowBlock>
  __device__ void accumulate(float (&acc)[kRowBlocks][kPerRowBlock], int slot, uint32_t barrier) const {
    constexpr int kQuads = kRowBlocks * kPerRowBlock / 4;
    if (threadIdx.x % 128 == 0) {
      while (ptx::load_flag_acquire_gpu(ready + slot) == 0) __nanosleep(200);
      ptx::store_flag_relaxed_gpu(ready + slot, 0);  // read once per launch: ready for the next
    }
    ptx::named_barrier_sync(barrier, 128);
    const float4* src = of<kQuads>(tiles, slot);
#pragma unroll
    for (int q = 0; q < kQuads; ++q) {
      const float4 v = __ldcg(src + q * 128);
      float* a = &acc[q / (kPerRowBlock / 4)][4 * (q % (kPerRowBlock / 4))];
      a[0] += v.x;
      a[1] += v.y;
      a[2] += v.z;
      a[3] += v.w;
    }
  }
};

// A consumer's epilogue staging: its rows (128, or 64 wide) x 32 fp32 columns, row-major, its 16-byte units
// XOR-swizzled by row. The swizzle keeps both sides free of bank conflicts: the fragment
// writes (a half-warp writes 8-byte pairs to rows g = 0..3, units 2jj and 2jj + 1, which the
// row's key 0, 3, 4, 7 sends to four different unit pairs) and the 16-byte run reads (eight
// threads read one row's eight units, or two rows' even units, which keys of opposite parity
// keep apart).
struct Staging {
  float* base;

  __device__ static int key(int row) { return ((row << 1) & 6) ^ (row & 1); }
  // Column col's element of row `row` (col % 4 selects inside the unit).
  __device__ float* at(int row, int col) const {
    return base + row * 32 + 4 * ((col / 4) ^ key(row)) + (col % 4);
  }
  // The kCount floats of row `row` from column col (a multiple of 4), unit by unit: the
  // swizzle does not keep a run's units next to each other.
  template <int kCount>
  __device__ void read_run(int row, int col, float (&v)[kCount]) const {
#pragma unroll
    for (int e = 0; e < kCount; e += 4) {
      float unit[4];
      load_staged_run<float>(at(row, col + e), unit);
#pragma unroll
      for (int i = 0; i < 4; ++i) v[e + i] = unit[i];
    }
  }
};

// Chunk kChunk of a consumer's accumulators (columns 32 kChunk.., every 64-row block) into
// its staging. In wgmma's layout (ptx_sm90.cuh) warp w holds rows 16w + g and 16w + g + 8 of
// each block, lane (g, t) columns 8j + 2t and 8j + 2t + 1.
template <class C, int kChunk>
__device__ __forceinline__ void stage_chunk(const Accumulators<C>& acc, const Staging& st) {
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = (static_cast<int>(threadIdx.x) % 128) / 32;
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int jj = 0; jj < C::kStageCols / 8; ++jj) {
    const int j = kChunk * (C::kStageCols / 8) + jj;
#pragma unroll
    for (int i = 0; i < 2 * C::kRowBlocks; ++i) {  // block i / 2, row g + 8 (i % 2) of this warp's 16
      const int row = (i / 2) * 64 + 16 * warp + g + 8 * (i % 2);
      *reinterpret_cast<float2*>(st.at(row, 8 * jj + 2 * t)) =
          make_float2(acc[i / 2][4 * j + 2 * (i % 2)], acc[i / 2][4 * j + 2 * (i % 2) + 1]);
    }
  }
}

// The same for a chunk known only at run time: accumulators are registers, so each chunk's
// staging code is its own copy and this picks one.
template <class C>
__device__ __forceinline__ void stage_chunk(const Accumulators<C>& acc, const Staging& st, int chunk) {
  [&]<int... kChunk>(std::integer_sequence<int, kChunk...>) {
    ((chunk == kChunk ? stage_chunk<C, kChunk>(acc, st) : void()), ...);
  }(std::make_integer_sequence<int, C::BN / C::kStageCols>{});
}

// The epilogue of one consumer's accumulators (output rows m0.., columns n0..), one
// operation compiled in. The accumulators go to the
// staging 32 columns at a time; from there each thread applies the epilogue to 16-byte runs
// of output columns, the same run of kRows rows per chunk, and stores them. The chunks are a
// loop (every output element's code unrolled is tens of KiB of straight-line code per tile,
// more than the instruction cache holds, which measured the epilogue as slow as the MMAs); the
// kRows runs of a chunk are computed together, 32 independent elements whose chains of
// dependent FMAs overlap, with the operands they add loaded ahead: the bias of the next chunk
// and the residual of this one before its staging barriers.
template <class C, EpilogueOp kOp>
__device__ __forceinline__ void store_tile(const GemmArgs& p, const Accumulators<C>& acc, const Staging& st,
                                           uint32_t barrier, int64_t m0, int64_t n0) {
  using T = typename C::Elem;
  using Run = Pack16<T>;
  constexpr int kVec = Run::kCount;
  constexpr int kRunsPerRow = C::kStageCols / kVec, kRowsPerPass = 128 / kRunsPerRow;
  // A thread's rows: 4 (16-bit types) or 8 (fp32), half that on wide tiles.
  constexpr int kRows = C::kConsumerRows / kRowsPerPass;
  constexpr int kChunks = C::BN / C::kStageCols;
  const int tid = static_cast<int>(threadIdx.x) % 128;
  const int run = tid % kRunsPerRow, row0 = tid / kRunsPerRow;
  const int64_t rows_left = p.M - m0 - row0;  // row r of the thread's is inside M if r * kRowsPerPass < this

  // The thread's rows are the same in every chunk: their offsets are worked out once a tile.
  int64_t row_offset[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) row_offset[r] = epilogue_row_offset(p, m0 + row0 + r * kRowsPerPass);

  auto column_of = [&](int chunk) { return n0 + chunk * C::kStageCols + run * kVec; };
  auto load_bias = [&](int chunk) {
    const int64_t n = column_of(chunk);
    return p.bias != nullptr && n < p.N ? Run::load_bits_nc(static_cast<const T*>(p.bias) + n) : uint4{0, 0, 0, 0};
  };
  uint4 next_bias = load_bias(0);
#pragma unroll 1
  for (int chunk = 0; chunk < kChunks; ++chunk) {
    const int64_t n = column_of(chunk);
    const bool in_n = n < p.N;  // N % 8 == 0: a run is all in or all out
    const uint4 bias_bits = next_bias;
    if (chunk + 1 < kChunks) next_bias = load_bias(chunk + 1);
    uint4 residual_bits[kRows];
    if constexpr (kOp == EpilogueOp::residual) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        residual_bits[r] = in_n && r * kRowsPerPass < rows_left
                               ? Run::load_bits_nc(static_cast<const T*>(p.residual) + row_offset[r] + n)
                               : uint4{0, 0, 0, 0};
      }
    }
    ptx::named_barrier_sync(barrier, 128);  // the previous chunk's reads are done
    stage_chunk<C>(acc, st, chunk);
    ptx::named_barrier_sync(barrier, 128);  // the chunk is staged
    if (!in_n) continue;
    float bias[kVec], v[kRows][kVec];
    Run::from_bits(bias_bits).to_floats(bias);
#pragma unroll
    for (int r = 0; r < kRows; ++r) st.read_run(row0 + r * kRowsPerPass, run * kVec, v[r]);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float residual[kVec];
      if constexpr (kOp == EpilogueOp::residual) {
        Run::from_bits(residual_bits[r]).to_floats(residual);
      } else {
#pragma unroll
        for (int i = 0; i < kVec; ++i) residual[i] = 0.0f;
      }
      apply_epilogue_op<kOp>(v[r], bias, residual);
    }
    T* column = epilogue_column<T>(p, n);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (r * kRowsPerPass < rows_left) Run::from_floats(v[r]).store(column + row_offset[r]);
    }
  }
}

// The columns of store_tile_boxed's box: one 128-byte swizzle span.
template <class C>
inline constexpr int kBoxCols = 128 / static_cast<int>(sizeof(typename C::Elem));

// The head split's outputs q, k and v [batch, heads, seq, head_dim] as 4-D tensor maps.
struct QkvMaps {
  CUtensorMap q, k, v;
};

// How a launch's tiles leave (the host's EpilogueStore): through the fp32 staging (staged), or
// box by box, each box stored by TMA (tma) or copied out by the consumer's threads (copy).
enum class BoxStore : uint8_t { staged, tma, copy };

// What store_tile_boxed needs beside the accumulators: the output's tensor map (q, k and v's
// for the head split; TMA stores only) and, for the residual, the residual's, the consumer's
// barrier its boxes land on and that barrier's phase.
struct BoxEpilogue {
  BoxStore store;
  const CUtensorMap* out;
  const QkvMaps* qkv;
  const CUtensorMap* residual;
  uint32_t residual_bar;
  uint32_t residual_phase;
};

// Thread 0's store of a staged box of output columns n_box.. and tile rows m0.. into the head
// split's q, k or v: the box lies in one head and, seq being a multiple of its rows (the host's
// condition), in one batch element's sequence.
__device__ __forceinline__ void store_qkv_box(const GemmArgs& p, const QkvMaps& maps, uint32_t staging,
                                              int64_t n_box, int64_t m0) {
  const QkvSplitMap& map = p.split;
  const auto n32 = static_cast<uint32_t>(n_box), m32 = static_cast<uint32_t>(m0);
  const uint32_t which = map.width.div(n32), within = n32 - which * map.width.divisor;
  const uint32_t head = map.head_dim.div(within), dim = within - head * map.head_dim.divisor;
  const uint32_t b = map.seq.div(m32), row = m32 - b * map.seq.divisor;
  const CUtensorMap* t = which == 0 ? &maps.q : which == 1 ? &maps.k : &maps.v;
  ptx::tma_store_4d(t, staging, static_cast<int32_t>(dim), static_cast<int32_t>(row), static_cast<int32_t>(head),
                    static_cast<int32_t>(b));
}

// The consumer's 128 threads copy a box of kRows rows from the staging to output rows m0.. and
// columns n_box.. (any epilogue's layout, the head split's included: a 16-byte chunk never
// meets two heads). Thread t takes chunk t % 8 of rows t / 8 + 16 i; chunk c of row r sits at
// chunk c ^ r % 8 of the swizzled row, the same place in each of the thread's rows, and a
// warp's loads and stores cover four whole 128-byte rows. Rows past M and chunks past N are
// skipped.
template <typename T, int kRows>
__device__ __forceinline__ void copy_out_box(const GemmArgs& p, uint32_t staging, int64_t m0, int64_t n_box, int tid) {
  constexpr int kChunkElems = 16 / static_cast<int>(sizeof(T));
  constexpr int kRowsPerPass = 128 / 8;  // the threads' rows at once: 8 chunks a row
  constexpr int kPasses = kRows / kRowsPerPass;
  const int chunk = tid % 8, r0 = tid / 8;
  const int64_t n = n_box + chunk * kChunkElems;
  if (n >= p.N) return;  // N % 8 == 0: a chunk is all in or all out
  const uint32_t src = staging + static_cast<uint32_t>(r0 * 128 + ((chunk ^ (r0 % 8)) * 16));
  uint4 v[kPasses];
#pragma unroll
  for (int i = 0; i < kPasses; ++i) v[i] = ptx::ld_shared_v4(src + i * kRowsPerPass * 128);
  T* column = epilogue_column<T>(p, n);
#pragma unroll
  for (int i = 0; i < kPasses; ++i) {
    const int64_t m = m0 + r0 + i * kRowsPerPass;
    if (m < p.M) *reinterpret_cast<uint4*>(column + epilogue_row_offset(p, m)) = v[i];
  }
}

// The bias of output columns n and n + 1 (n even) in one load: two 16-bit values as a 32-bit
// word, widened where they are used (8 registers a box instead of 16, at 168), or two fp32s.
template <typename T>
struct BiasPair {
  std::conditional_t<sizeof(T) == 2, uint32_t, float2> bits;

  __device__ static BiasPair load(const GemmArgs& p, int64_t n) {
    using Bits = decltype(bits);
    if (p.bias == nullptr || n >= p.N) return {Bits{}};  // zeros in every type
    return {__ldg(reinterpret_cast<const Bits*>(static_cast<const T*>(p.bias) + n))};
  }
  __device__ void widen(float (&lo_hi)[2]) const {
    if constexpr (sizeof(T) == 2) {
      unpack2<T>(bits, lo_hi);
    } else {
      lo_hi[0] = bits.x;
      lo_hi[1] = bits.y;
    }
  }
};

// A consumer's finished values of one box, v[h][jl] = rows g (0, 1) and g + 8 (2, 3) of the
// warp's 16 in 64-row block h, columns 8 jl + 2t, + 1, written into the staging in the box's 128-byte
// swizzle (16-byte chunk c of row r at c ^ r % 8); with kResidual each value first adds the
// residual element the staging holds at its place (thread 0's TMA load). 16-bit pairs go by
// stmatrix (and come by ldmatrix), eight of them a thread.
template <typename T, bool kResidual, int kRowBlocks, int kBlocks>
__device__ __forceinline__ void write_box_16(float (&v)[kRowBlocks][kBlocks][4], uint32_t staging, int warp, int lane) {
  // The row this lane gives stmatrix and ldmatrix: matrix lane / 8 is rows g (even) or g + 8
  // (odd) of the warp's 16, of column block lane / 16 of a pair.
  const uint32_t row_addr = staging + static_cast<uint32_t>((16 * warp + (lane & 7) + 8 * ((lane >> 3) & 1)) * 128);
#pragma unroll
  for (int h = 0; h < kRowBlocks; ++h)
#pragma unroll
    for (int jp = 0; jp < kBlocks; jp += 2) {
      const uint32_t chunk = static_cast<uint32_t>((jp + (lane >> 4)) ^ (lane & 7));
      const uint32_t addr = row_addr + static_cast<uint32_t>(h * 64 * 128) + chunk * 16;
      uint32_t r[4];
      if constexpr (kResidual) ptx::ldmatrix_x4(r, addr);
#pragma unroll
      for (int q = 0; q < 4; ++q) {  // matrix q: column block jp + q / 2, rows g + 8 (q % 2)
        float* x = &v[h][jp + q / 2][2 * (q % 2)];
        if constexpr (kResidual) {
          float residual[2];
          unpack2<T>(r[q], residual);
          x[0] += residual[0];
          x[1] += residual[1];
        }
        r[q] = pack2<T>(x[0], x[1]);
      }
      ptx::stmatrix_x4(addr, r);
    }
}

// The same for fp32: each pair an 8-byte store at its own place (eight rows times four lanes,
// 32 bytes a row, cover the 32 banks twice: two wavefronts, the least 256 bytes take).
template <bool kResidual, int kRowBlocks, int kBlocks>
__device__ __forceinline__ void write_box_32(float (&v)[kRowBlocks][kBlocks][4], uint32_t staging, int warp, int lane) {
  const int g = lane >> 2, t = lane & 3;
  // The lane's pair in row g of the warp's 16, column block 0.
  const uint32_t pair_addr = staging + static_cast<uint32_t>((16 * warp + g) * 128 + 8 * (t & 1));
#pragma unroll
  for (int h = 0; h < kRowBlocks; ++h)
#pragma unroll
    for (int jl = 0; jl < kBlocks; ++jl) {
      const uint32_t chunk = static_cast<uint32_t>((2 * jl + (t >> 1)) ^ g);  // rows g and g + 8 share r % 8
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const uint32_t addr = pair_addr + static_cast<uint32_t>((h * 64 + 8 * half) * 128) + chunk * 16;
        float* x = &v[h][jl][2 * half];
        if constexpr (kResidual) {
          const uint64_t r = ptx::ld_shared_u64(addr);
          x[0] += __uint_as_float(static_cast<uint32_t>(r));
          x[1] += __uint_as_float(static_cast<uint32_t>(r >> 32));
        }
        ptx::st_shared_u64(addr, (static_cast<uint64_t>(__float_as_uint(x[1])) << 32) | __float_as_uint(x[0]));
      }
    }
}

// The epilogue of one consumer's accumulators, a box of its rows (128, or 64 wide) x 128 bytes
// (64 16-bit or 32 fp32 columns) at a time through the consumer's staging, which holds a box in
// the tensor maps' 128-byte swizzle (16-byte chunk c of row r at c ^ r % 8: the eight rows of an
// 8 x 8 matrix on eight bank groups). The operation is applied in the accumulator registers,
// the pairs written by stmatrix (16-bit, packed) or 8-byte stores (fp32). Then the box leaves:
// - tma: thread 0 hands it to a TMA store (rows and columns outside the output are not
//   written), which the next box waits to have read the staging;
// - copy: every thread copies its 16-byte chunks out (copy_out_box), stores that need no wait.
// The residual comes the other way first: thread 0 loads its box by TMA into the staging, and
// each thread takes its elements (by ldmatrix, or 8-byte loads) from the very addresses it
// then overwrites. Per 16-bit element that is the operation, half a pack and a sixteenth of a
// stmatrix (and of an ldmatrix), plus an eighth of a 16-byte copy; the staged path also stores
// and reloads the fp32 accumulators and forms an address per run, about ten instructions an
// element in all, issue slots the other consumer's MMAs wait for (results/perf-log.md,
// 2026-12-07). A box's values are computed while the staging is still being read (and the
// residual lands).
template <class C, EpilogueOp kOp>
__device__ __forceinline__ void store_tile_boxed(const GemmArgs& p, BoxEpilogue& e, const Accumulators<C>& acc,
                                                 uint32_t staging, uint32_t barrier, int64_t m0, int64_t n0) {
  using T = typename C::Elem;
  constexpr bool kResidual = kOp == EpilogueOp::residual;
  constexpr int kBoxCols = persistent::kBoxCols<C>;
  constexpr int kBlocks = kBoxCols / 8;  // 8-column blocks of a box
  constexpr uint32_t kBoxBytes = C::kConsumerRows * 128;
  static_assert(kBoxBytes <= C::kStagingBytes, "a box must fit the staging");
  if (m0 >= p.M) return;  // a cooperative tile's upper half past the last row
  const bool by_tma = e.store == BoxStore::tma;
  const int tid = static_cast<int>(threadIdx.x) % 128, lane = tid % 32, warp = tid / 32;
#pragma unroll
  for (int box = 0; box < C::BN / kBoxCols; ++box) {
    const int64_t n_box = n0 + box * kBoxCols;
    if (n_box >= p.N) break;  // N % 8 == 0: a column pair is all in or all out
    // The staging is free once the previous box's TMA store has read it (thread 0 waits here)
    // or every thread has copied its chunks out: a barrier, before the residual's TMA load
    // here (the copies' reads fenced before its write), or before the box is written below.
    if (by_tma && tid == 0) ptx::bulk_wait_group_read<0>();
    if constexpr (kResidual) {
      if (!by_tma) {
        ptx::fence_proxy_async_shared();
        ptx::named_barrier_sync(barrier, 128);
      }
      if (tid == 0) {
        ptx::mbarrier_arrive_expect_tx(e.residual_bar, kBoxBytes);
        ptx::tma_load_2d(staging, e.residual, static_cast<int32_t>(n_box), static_cast<int32_t>(m0), e.residual_bar);
      }
    }
    // The bias of the thread's columns 8 jl + 2t, + 1 of the box.
    BiasPair<T> bias[kBlocks];
#pragma unroll
    for (int jl = 0; jl < kBlocks; ++jl) bias[jl] = BiasPair<T>::load(p, n_box + 8 * jl + 2 * (lane % 4));
    // v[h][jl]: rows g (0, 1) and g + 8 (2, 3) of 64-row block h, column block jl, the
    // operation applied (the residual's sum waits for it).
    float v[C::kRowBlocks][kBlocks][4];
#pragma unroll
    for (int h = 0; h < C::kRowBlocks; ++h)
#pragma unroll
      for (int jl = 0; jl < kBlocks; ++jl) {
        const float* a = &acc[h][4 * (box * kBlocks + jl)];
        float lo_hi[2];
        bias[jl].widen(lo_hi);
        const float b[4] = {lo_hi[0], lo_hi[1], lo_hi[0], lo_hi[1]};
        const float none[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int i = 0; i < 4; ++i) v[h][jl][i] = a[i];
        if constexpr (kResidual) {
          apply_epilogue_op<EpilogueOp::bias>(v[h][jl], b, none);
        } else {
          apply_epilogue_op<kOp>(v[h][jl], b, none);
        }
      }
    if constexpr (kResidual) {
      ptx::mbarrier_wait(e.residual_bar, e.residual_phase);  // the residual's box has landed
      e.residual_phase ^= 1u;
    } else {
      ptx::named_barrier_sync(barrier, 128);  // the staging is free (see above)
    }
    if constexpr (sizeof(T) == 2) {
      write_box_16<T, kResidual>(v, staging, warp, lane);
    } else {
      write_box_32<kResidual>(v, staging, warp, lane);
    }
    if (by_tma) ptx::fence_proxy_async_shared();
    ptx::named_barrier_sync(barrier, 128);  // the box is written
    if (!by_tma) {
      copy_out_box<T, C::kConsumerRows>(p, staging, m0, n_box, tid);
    } else if (tid == 0) {
      if constexpr (kOp == EpilogueOp::qkv_split) {
        store_qkv_box(p, *e.qkv, staging, n_box, m0);
      } else {
        ptx::tma_store_2d(e.out, staging, static_cast<int32_t>(n_box), static_cast<int32_t>(m0));
      }
      ptx::bulk_commit_group();
    }
  }
}

// Consumer c (0 or 1) runs the CTA's units: in ping-pong the units c, c + 2, ..., each one
// waiting for its turn, issuing the unit's MMAs and handing the turn to the other consumer,
// then finishing the unit while the other one's MMAs run; in cooperative every unit, on its
// own rows of the tile (128, or 64 wide), beside the other consumer. Under stream-K a unit that stops short
// of its tile's end goes to the workspace, and the one that ends a cut tile adds the earlier
// runs' partials first; every other unit goes straight through the epilogue.
template <class C, EpilogueOp kOp>
__device__ void consume(const GemmArgs& p, BoxEpilogue boxed, const Schedule& sched, const Ring<C>& ring,
                        const Staging& staging, const Partials& partials, int consumer) {
  constexpr bool kPingpong = !C::kCooperative;
  constexpr int kStride = kPingpong ? 2 : 1;  // units between two of this consumer's
  Accumulators<C> acc;
  const int units = sched.units_of_this_cta();
  const uint32_t barrier = kStagingBarrier + consumer;
  // The consumer's rows: where they start in the tile, and in the stage's A k-tile.
  const int row_in_tile = C::kCooperative ? consumer * C::kConsumerRows : 0;
  const uint32_t a_rows_bytes = static_cast<uint32_t>(row_in_tile * C::kRowBytes);
  // The workspace slot of this consumer's partials, and of group c's for the same rows (this
  // CTA's rank of c's cluster).
  auto partial_slot = [&](int c) {
    return (c * sched.cluster + sched.rank()) * C::kConsumersPerTile + (C::kCooperative ? consumer : 0);
  };
  RingSlot<C::STAGES> slot;
  if (kPingpong && consumer == 1 && units > 0) slot.advance(sched.unit(0).k_count());  // unit 0 is the other's
  for (int j = kPingpong ? consumer : 0; j < units; j += kStride) {
    const WorkUnit u = sched.unit(j);
    if (kPingpong && j > 0) ptx::named_barrier_sync(kTurnBarrier + consumer, kTurnThreads);
    const RingSlot<C::STAGES> held = mma_tile<C>(acc, u.k_count(), ring, slot, a_rows_bytes, sched.cluster);
    if (kPingpong && j + 1 < units) ptx::named_barrier_arrive(kTurnBarrier + (1 - consumer), kTurnThreads);
    ptx::wgmma_wait_group<0>();
    release_held(ring, held, u.k_count(), sched.cluster);
    if (kPingpong && j + 1 < units) slot.advance(sched.unit(j + 1).k_count());  // past the other's next unit
    if (u.k_end < sched.k_tiles) {
      partials.publish(acc, partial_slot(sched.group()), barrier);
      continue;
    }
    if (u.k_begin > 0) {
      // The runs before this one that meet the tile, nearest first (a run may be empty).
      int64_t end = sched.run_begin(sched.group());
      const int64_t tile_begin = end - u.k_begin;
#pragma unroll 1
      for (int c = sched.group() - 1; end > tile_begin; --c) {
        const int64_t begin = sched.run_begin(c);
        if (begin < end) partials.accumulate(acc, partial_slot(c), barrier);
        end = begin;
      }
    }
    const int64_t m0 = static_cast<int64_t>(u.tile.m) * C::BM + row_in_tile, n0 = static_cast<int64_t>(u.tile.n) * C::BN;
    if (C::kBoxedOnly || boxed.store != BoxStore::staged) {
      store_tile_boxed<C, kOp>(p, boxed, acc, ptx::smem_addr(staging.base), barrier, m0, n0);
    } else {
      // Staged by choice, or a head split whose TMA boxes would meet two heads or sequences.
      store_tile<C, kOp>(p, acc, staging, barrier, m0, n0);
    }
  }
  // The staging must outlive the last TMA store's reads of it.
  if (boxed.store == BoxStore::tma && threadIdx.x % 128 == 0) ptx::bulk_wait_group<0>();
}

}  // namespace tlb::gemm_detail::persistent

namespace tlb::gemm_detail {
namespace {

using persistent::PersistentConfig;

template <class C, EpilogueOp kOp>
__global__ void __launch_bounds__(C::kThreads, 1)
    gemm_persistent_sm90_kernel(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_w,
                                const __grid_constant__ CUtensorMap tmap_c, const __grid_constant__ CUtensorMap tmap_r,
                                const __grid_constant__ persistent::QkvMaps qkv_maps, const persistent::BoxStore store,
                                const GemmArgs p, const persistent::Schedule sched,
                                const persistent::Partials partials) {
#if TLB_PTX_SM90A
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw_addr = ptx::smem_addr(smem_raw);
  const uint32_t base = (raw_addr + 1023u) & ~1023u;
  using namespace persistent;
  const uint32_t bars = base + C::STAGES * C::kStageBytes + 2 * C::kStagingBytes;
  const Ring<C> ring{base, bars, bars + 8 * C::STAGES};
  const uint32_t residual_bars = bars + 16 * C::STAGES;  // one a consumer (store_tile_boxed)
  unsigned char* staging_bytes = smem_raw + (base - raw_addr) + C::STAGES * C::kStageBytes;

  if (threadIdx.x == 0) {
    for (int s = 0; s < C::STAGES; ++s) {
      ptx::mbarrier_init(ring.full(s), 1);
      // One arrival per consumer warp reading it, in each CTA of the cluster.
      ptx::mbarrier_init(ring.empty(s), 4 * C::kConsumersPerTile * sched.cluster);
    }
    if constexpr (kOp == EpilogueOp::residual) {
      for (int c = 0; c < 2; ++c) ptx::mbarrier_init(residual_bars + 8 * c, 1);  // one TMA box each
    }
    ptx::fence_mbarrier_init();
    ptx::prefetch_tensor_map(&tmap_a);
    ptx::prefetch_tensor_map(&tmap_w);
    if (store == BoxStore::tma && kOp != EpilogueOp::qkv_split) ptx::prefetch_tensor_map(&tmap_c);
    if (store != BoxStore::staged && kOp == EpilogueOp::residual) ptx::prefetch_tensor_map(&tmap_r);
  }
  // In a cluster, the peer's barriers must be initialised before this CTA's consumers arrive
  // on them or its producer's multicasts complete on them.
  if (sched.cluster > 1) {
    ptx::cluster_sync();
  } else {
    __syncthreads();
  }
  // Under PDL (pdl_for_grid) the set-up above overlaps the previous kernel's tail; A and the
  // residual may be its output.
  ptx::pdl_wait();
  ptx::pdl_launch_dependents();

  // Broadcast from lane 0, the warpgroup index is warp-uniform to the compiler too: the ring
  // positions and descriptors derived from it then live in uniform registers, which wgmma
  // reads, instead of being moved there instruction by instruction in every k-step.
  const int warpgroup = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);
  if (warpgroup == 0) {
    ptx::setmaxnreg_dec<C::kProducerRegs>();
    if (threadIdx.x == 0) produce<C>(&tmap_a, &tmap_w, sched, ring);
  } else {
    ptx::setmaxnreg_inc<C::kConsumerRegs>();
    const int consumer = warpgroup - 1;
    const Staging staging{reinterpret_cast<float*>(staging_bytes + consumer * C::kStagingBytes)};
    consume<C, kOp>(p, BoxEpilogue{store, &tmap_c, &qkv_maps, &tmap_r, residual_bars + 8 * consumer, 0u}, sched,
                    ring, staging, partials, consumer);
  }
  // No CTA of a cluster leaves while the other may still arrive on its barriers.
  if (sched.cluster > 1) ptx::cluster_sync();
#else
  (void)tmap_a;
  (void)tmap_w;
  (void)tmap_c;
  (void)tmap_r;
  (void)qkv_maps;
  (void)store;
  (void)p;
  (void)sched;
  (void)partials;
  __trap();  // never launched: the host checks for an sm_90a image first
#endif
}

// Calls f(PersistentConfig<T, s>{}) for the element type of `d` and the schedule `s`.
template <typename F>
decltype(auto) dispatch_config(DType d, PersistentSchedule s, F&& f) {
  return dispatch_dtype(d, [&](auto tag) {
    using T = decltype(tag);
    switch (s) {
      case PersistentSchedule::cooperative: return f(PersistentConfig<T, PersistentSchedule::cooperative>{});
      case PersistentSchedule::cooperative_wide:
        return f(PersistentConfig<T, PersistentSchedule::cooperative_wide>{});
      case PersistentSchedule::pingpong_wide: return f(PersistentConfig<T, PersistentSchedule::pingpong_wide>{});
      default: return f(PersistentConfig<T, PersistentSchedule::pingpong>{});
    }
  });
}

static_assert(kPersistentRasterRows == kRasterRows, "the persistent kernel's default raster is every kernel's");

// The schedule's tiles over an M x N output: tile rows and columns (every dtype's tile is the
// same size).
struct TileGrid {
  int64_t m, n;
  int64_t count() const { return m * n; }
};
TileGrid persistent_tile_grid(int64_t M, int64_t N, PersistentSchedule s) {
  return dispatch_config(DType::fp16, s, [&](auto c) {
    using C = decltype(c);
    return TileGrid{(M + C::BM - 1) / C::BM, (N + C::BN - 1) / C::BN};
  });
}

// Whether `units` tiles (pairs) over `groups` CTAs (clusters) leave a partial wave.
bool has_partial_wave(int64_t units, int64_t groups) { return units > groups && units % groups != 0; }

// The clusters (CTAs, without clusters) of a launch: one per tile (pair), at most as many as
// run at once, capped at max_ctas' worth.
int64_t persistent_groups(const TileGrid& g, const PersistentLaunch& l) {
  int64_t groups = std::min<int64_t>(g.count() / l.cluster, persistent_capacity(l.schedule, l.cluster));
  if (l.max_ctas > 0) groups = std::min<int64_t>(groups, std::max(1, l.max_ctas / l.cluster));
  return groups;
}

// Whether a launch of `tiles` tiles of `tile_area` elements over `ctas` CTAs takes PDL. Each CTA takes a whole SM, so
// PDL can only start it on an SM its predecessor has left, and what it hides is the launch and
// the set-up: measured worth 14 % of case 2's forward (GEMMs of 1-2 waves of tiles, tens of
// microseconds each). Long grids measured slower as PDL launches than after a full drain
// (tlbench explain, auto, fp16, results/perf-log.md 2026-12-05): on an H100 the GEMMs of
// cases 8, 9 and 13 (18-93 waves) 10-30 %, their forwards 10-16 %; on an H200 case 13's
// forward 8 %, case 8's 4 %, while grids of up to 12 waves (cases 3-7) were level or gained.
// The line is drawn in waves of 128 x 128 (ping-pong) tiles, a larger tile counting by its area.
// TLBENCH_PDL=all gives every launch PDL, to measure this again.
constexpr int64_t kPdlMaxWaves = 12;
bool pdl_for_grid(int64_t tiles, int tile_area, int64_t ctas) {
  return pdl_enabled() && (pdl_for_every_kernel() || tiles * tile_area <= kPdlMaxWaves * ctas * (128 * 128));
}

}  // namespace

// Clusters of one are the SM count; larger ones are asked of the device (once per device,
// schedule and cluster size).
int persistent_capacity(PersistentSchedule s, int cluster) {
  if (cluster == 1) return device_caps().sms;
  static std::mutex mu;
  static std::map<std::tuple<int, int, int>, int> known;  // device, schedule, cluster
  int dev = 0;
  TLB_CUDA_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(dev, static_cast<int>(s), cluster);
  if (auto it = known.find(key); it != known.end()) return it->second;
  const int n = dispatch_config(DType::fp16, s, [&](auto c) {
    using C = decltype(c);
    return cluster_capacity(gemm_persistent_sm90_kernel<C, EpilogueOp::bias>, dim3(C::kThreads), C::kSmemBytes,
                            static_cast<unsigned>(cluster));
  });
  known.emplace(key, n);
  return n;
}

EpilogueStore epilogue_store_setting() {
  static const EpilogueStore setting = [] {
    const char* env = std::getenv("TLBENCH_GEMM_STORE");
    const std::string v = env != nullptr ? env : "";
    if (v.empty() || v == "auto") return EpilogueStore::automatic;
    if (v == "staged") return EpilogueStore::staged;
    if (v == "tma") return EpilogueStore::tma;
    if (v == "copy") return EpilogueStore::copy;
    throw std::invalid_argument("TLBENCH_GEMM_STORE: unknown value '" + v + "' (expected auto, staged, tma or copy)");
  }();
  return setting;
}

// Measured on H100s (tlbench_kernel_bench gemm, results/perf-log.md 2026-12-07; two cards,
// three tables), boxes copied out against staged: in fp16 and bf16 at K = 1024 (case 12) the
// GELUs ran 1.02-1.09x (tanh's the most) and the head split 1.01-1.02x, where the staged
// path's per-element work is what the other consumer's MMAs wait for; bias-only and ReLU tiles
// ran 0.90-0.98x and, from K = 2048 on, the GELUs 0.96-1.01x, where the copies' burst of stores
// slows the loads that feed the MMAs and leaves the per-box bias loads exposed. Head splits
// from K = 2048 on ran 1.12x on one card and 0.98-1.00x on the other, TF32's 0.97-1.07x:
// staged until they agree.
// On the 128 x 192 tiles (boxes only) TMA stores against copied-out boxes, two runs in
// opposite orders on one H100 (fp16, 5b9113c): the up projections of cases 8, 10 and 13 with
// GELU and case 13's bias-only 1.02-1.05x in turns and 1.00-1.05x alone but for case 10's
// 0.996. The threads' copies are issue slots the other consumer's wgmmas wait for (ncu: the
// k-loop's dispatch stalls); a TMA store is one thread's. The residual and head-split tiles,
// and TF32's six boxes a tile, were not measured so: they copy out.
EpilogueStore automatic_store(const GemmArgs& a, PersistentSchedule s) {
  const bool gelu = a.epilogue == GemmEpilogue::bias_activation &&
                    (a.activation == Activation::gelu || a.activation == Activation::gelu_tanh);
  const bool half = a.dtype == DType::fp16 || a.dtype == DType::bf16;
  if (s == PersistentSchedule::pingpong_wide && half &&
      (a.epilogue == GemmEpilogue::bias || a.epilogue == GemmEpilogue::bias_activation))
    return EpilogueStore::tma;
  const bool heavy = gelu || a.epilogue == GemmEpilogue::bias_qkv_split;
  return half && heavy && a.K <= 1024 ? EpilogueStore::copy : EpilogueStore::staged;
}

std::string persistent_variant_name(DType d, const PersistentLaunch& l) {
  return dispatch_config(d, l.schedule, [&](auto c) {
    using C = decltype(c);
    const std::string kind = C::kCooperative ? "coop_" : "pingpong_";
    const std::string cluster = l.cluster > 1 ? "cluster" + std::to_string(l.cluster) + "_" : "";
    const std::string stream_k = l.stream_k_waves > 0 ? "streamk" + std::to_string(l.stream_k_waves) + "_" : "";
    const std::string raster =
        l.raster_rows != kPersistentRasterRows ? "raster" + std::to_string(l.raster_rows) + "_" : "";
    return "sm90_" + kind + cluster + raster + stream_k + std::to_string(C::BM) + "x" + std::to_string(C::BN) + "x" +
           std::to_string(C::BK) + "_s" + std::to_string(C::STAGES) + (sizeof(typename C::Elem) == 4 ? "_tf32" : "");
  });
}

// Linear tile indices are 32-bit; a cluster of two takes pairs of tile rows, so there must be
// an even number of them, and the device must run such clusters.
bool persistent_supported(int64_t M, int64_t N, const PersistentLaunch& l) {
  const TileGrid g = persistent_tile_grid(M, N, l.schedule);
  if (g.count() > INT_MAX || l.raster_rows < 1) return false;
  if (l.cluster == 1) return true;
  return l.cluster == 2 && g.m % 2 == 0 && persistent_capacity(l.schedule, l.cluster) > 0;
}

bool persistent_stream_k_applies(int64_t M, int64_t N, const PersistentLaunch& l) {
  const TileGrid g = persistent_tile_grid(M, N, l.schedule);
  return has_partial_wave(g.count() / l.cluster, persistent_groups(g, l));
}

void launch_gemm_persistent_sm90(const GemmArgs& args, const PersistentLaunch& l, cudaStream_t stream) {
  EpilogueStore store = l.store == EpilogueStore::from_env ? epilogue_store_setting() : l.store;
  if (store == EpilogueStore::automatic) store = automatic_store(args, l.schedule);
  const GemmArgs a = with_split_map(args);
  if (!persistent_supported(a.M, a.N, l)) {
    throw std::logic_error("persistent GEMM asked for " + persistent_variant_name(a.dtype, l) + " on M=" +
                           std::to_string(a.M) + ", N=" + std::to_string(a.N) + ", which it cannot tile");
  }
  dispatch_config(a.dtype, l.schedule, [&](auto c) {
    using C = decltype(c);
    auto kernel = dispatch_epilogue_op(a, [](auto op) { return gemm_persistent_sm90_kernel<C, decltype(op)::value>; });
    // Boxes copied out by the threads go anywhere. Boxes stored by TMA, where asked, but for
    // head splits whose boxes (64 16-bit or 32 fp32 columns, 128 rows) would straddle heads or
    // sequences: with several batch elements in a box, the stores at the negative row
    // coordinates of the later ones faulted (illegal instruction) on an H100
    // (results/perf-log.md, 2026-12-07); those stage. The output's maps for TMA stores, the
    // residual's for either way of boxes (the staged path reads neither).
    using persistent::BoxStore;
    const auto box_cols = static_cast<uint32_t>(persistent::kBoxCols<C>);
    const bool split = a.epilogue == GemmEpilogue::bias_qkv_split;
    const bool tma_fits = !split || (a.head_dim % box_cols == 0 && a.seq % C::kConsumerRows == 0);
    BoxStore box_store = BoxStore::staged;
    if (store == EpilogueStore::copy) box_store = BoxStore::copy;
    if (store == EpilogueStore::tma && tma_fits) box_store = BoxStore::tma;
    if (C::kBoxedOnly && box_store == BoxStore::staged) box_store = BoxStore::copy;
    const bool tma_store = box_store == BoxStore::tma;
    auto box_map = [&](const void* matrix) {
      return make_tensor_map_2d_sw128(matrix, a.dtype, static_cast<uint64_t>(a.M), static_cast<uint64_t>(a.N),
                                      C::kConsumerRows, box_cols);
    };
    const CUtensorMap tmap_c = tma_store && !split ? box_map(a.out) : CUtensorMap{};
    const CUtensorMap tmap_r = box_store != BoxStore::staged && a.epilogue == GemmEpilogue::bias_residual
                                   ? box_map(a.residual)
                                   : CUtensorMap{};
    persistent::QkvMaps qkv_maps{};
    if (tma_store && split) {
      auto head_map = [&](const void* t) {
        return make_tensor_map_4d_sw128(t, a.dtype, static_cast<uint64_t>(a.batch), static_cast<uint64_t>(a.heads),
                                        static_cast<uint64_t>(a.seq), static_cast<uint64_t>(a.head_dim),
                                        C::kConsumerRows, box_cols);
      };
      qkv_maps = {head_map(a.q), head_map(a.k), head_map(a.v)};
    }
    allow_dynamic_smem(kernel, C::kSmemBytes);
    const CUtensorMap tmap_a = make_tensor_map_2d_sw128(a.A, a.dtype, static_cast<uint64_t>(a.M),
                                                        static_cast<uint64_t>(a.K), C::BM, C::BK);
    // In a cluster of two each CTA loads half of the W k-tile they share (produce).
    const CUtensorMap tmap_w = make_tensor_map_2d_sw128(a.W, a.dtype, static_cast<uint64_t>(a.N),
                                                        static_cast<uint64_t>(a.K), C::BN / l.cluster, C::BK);
    // The schedule runs over groups: clusters, each taking a pair of tiles where a CTA of a
    // launch without clusters takes one.
    const TileGrid g = persistent_tile_grid(a.M, a.N, l.schedule);
    const int64_t units = g.count() / l.cluster, groups = persistent_groups(g, l), ctas = groups * l.cluster;
    persistent::Schedule sched{static_cast<int>(g.m / l.cluster),
                               static_cast<int>(g.n),
                               static_cast<int>((a.K + C::BK - 1) / C::BK),
                               0,
                               0,
                               C::kCooperative,
                               l.cluster,
                               l.raster_rows};
    persistent::Partials partials{nullptr, nullptr};
    if (l.stream_k_waves > 0) {
      if (l.stream_k_waves > 2 || !has_partial_wave(units, groups)) {
        throw std::logic_error("stream-K persistent GEMM asked for a grid with no partial wave, or over " +
                               std::to_string(l.stream_k_waves) + " waves");
      }
      sched.dp_rounds = static_cast<int>(units / groups) - (l.stream_k_waves - 1);
      sched.sk_tiles = static_cast<int>(units - static_cast<int64_t>(sched.dp_rounds) * groups);
      const StreamKWorkspace ws = stream_k_workspace(stream);
      static_assert(C::kConsumerRows * C::BN * 4 <= kStreamKPartialBytes,
                    "a consumer's partial tile must fit its workspace slot");
      if (ctas * C::kConsumersPerTile > ws.slots) throw std::logic_error("stream-K workspace has too few slots");
      partials = {static_cast<float*>(ws.partials), ws.ready};
    }
    launch_kernel_with_pdl(pdl_for_grid(g.count(), C::BM * C::BN, ctas), kernel, dim3(static_cast<unsigned>(ctas)),
                           dim3(C::kThreads), C::kSmemBytes, stream, static_cast<unsigned>(l.cluster), tmap_a, tmap_w,
                           tmap_c, tmap_r, qkv_maps, box_store, a, sched, partials);
    TLB_LAUNCH_CHECK(stream);
  });
}

}  // namespace tlb::gemm_detail
