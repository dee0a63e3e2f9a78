// Flash attention forward for Hopper (sm_90a), warp-specialised. One block owns 64 query rows
// per consumer warpgroup (128 or 192 rows) of one (batch, head); its warpgroups split the work:
//
//   producer (warpgroup 0, one thread)  Q once, then K and V tiles by TMA into a ring of two or
//                                       three mbarrier-guarded stages, K one tile ahead of V
//   consumers (warpgroups 1..)          per key tile: S = Q K^T (wgmma, both operands in shared
//                                       memory), mask, online softmax, O += P V (wgmma, P from
//                                       registers), the next tile's S overlapping this tile's
//                                       softmax; then the epilogue
//
// Within a consumer, tile j's scores are issued before tile j-1's P V, so the softmax of tile j
// runs while P V is still on the tensor cores. Across consumers, a ring of named barriers
// (the scheduler) lets one warpgroup issue its two GEMMs while the others run their softmax,
// so the tensor cores see a steady stream of work. The producer gives its registers to the
// consumers (setmaxnreg). Every head_dim that is a multiple of 8 up to 256 runs on the compiled
// width above it (32, 64, 80, 96, 128, 192, 256): TMA fills the missing columns of Q, K and V
// with zeros, which leaves the scores unchanged and the extra output columns unstored.
//
// A block runs one work item (a query tile of one head and key range), or, persistent, one
// item after another, claimed from a counter as the block runs dry (ItemQueue): the producer
// then loads the next item's Q and first K and V tiles while the consumers still finish and
// store the last one, so a short item costs little more than its GEMMs, and unequal items
// (causal ones shrink along the diagonal) go to whichever SM frees first.
//
// The per-element work (masks, the online softmax, the epilogue and split-KV partials) is
// attention_tile.cuh's, written against the m16n8 accumulator layout that wgmma shares.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "attention/attention_kernels.hpp"
#include "attention/attention_tile.cuh"
#include "common/cuda_check.hpp"
#include "common/device_caps.hpp"
#include "common/launch.cuh"
#include "common/ptx.cuh"
#include "common/ptx_sm90.cuh"
#include "common/tensor_map.hpp"

namespace tlb::attn::sm90 {

// The block shape: kWidth head-dim columns computed (a multiple of 16), laid out in shared memory
// as kD columns (kWidth rounded up to a 128-byte swizzle row: 64 16-bit or 32 fp32 elements),
// kBlockN keys per tile, kConsumers warpgroups of 64 query rows, elements of kElemBytes (2:
// fp16/bf16; 4: fp32 read as tf32), and every kFmaExpEvery-th 8-key column of a tile's
// exponentials on the FMA pipe (0: none; softmax_scores).
template <int kWidth_, int kBlockN_, int kConsumers_, int kElemBytes_ = 2, int kFmaExpEvery_ = 0>
struct FwdShape {
  static constexpr int kElemBytes = kElemBytes_;
  static constexpr int kFmaExpEvery = kFmaExpEvery_;
  static constexpr bool kTf32 = kElemBytes == 4;
  static constexpr int kColElems = 128 / kElemBytes;  // elements of one swizzle row
  static constexpr int kKStep = 32 / kElemBytes;      // wgmma's k: 32 bytes (k16, or k8 in tf32)
  static constexpr int kWidth = kWidth_, kD = (kWidth_ + kColElems - 1) / kColElems * kColElems;
  static constexpr int kBlockN = kBlockN_, kConsumers = kConsumers_;
  static constexpr int kBlockM = 64 * kConsumers;
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr int kColBlocks = kD / kColElems;
  // Each operand tile is column blocks of [rows][128 bytes], 128-byte swizzled (what a TMA box of
  // one swizzle row's width writes), each block 1024-byte aligned: Q and K in blocks of head
  // dims. V is K's shape in 16-bit types (read MN-major); in tf32, which wgmma reads K-major
  // only, it comes transposed ([head dims][keys], from attention's V^T workspace) in blocks of
  // keys, the same bytes.
  static constexpr uint32_t kQColBytes = kBlockM * 128, kKVColBytes = kBlockN * 128;
  static constexpr uint32_t kQBytes = kColBlocks * kQColBytes, kKVBytes = kColBlocks * kKVColBytes;
  static constexpr int kVColBlocks = kTf32 ? kBlockN / kColElems : kColBlocks;
  static constexpr uint32_t kVColBytes = kTf32 ? kD * 128 : kKVColBytes;
  // Three K/V stages at 16-bit head_dim 64 (24 + 3 x 32 KiB) and where tf32 fits them (head_dim
  // 64: 32 + 3 x 64 KiB), two elsewhere.
  static constexpr int kStages =
      kTf32 ? (1024 + kQBytes + 3 * 2 * kKVBytes + 512 <= 227 * 1024 ? 3 : 2) : (kD == 64 ? 3 : 2);
  // P V's k-steps over the key tile: the A fragments P is packed into.
  static constexpr int kPSteps = kBlockN / kKStep;
  // Q | K stages | V stages | mbarriers (Q full, Q empty; K full, V full, K empty, V empty per
  // stage; the item mailbox's full and empty per slot) | the mailbox's slots.
  static constexpr uint32_t kBarrierOffset = kQBytes + 2 * kStages * kKVBytes;
  static constexpr int kRingBarriers = 2 + 4 * kStages, kMailSlots = 2;
  static constexpr int kBarriers = kRingBarriers + 2 * kMailSlots;
  static constexpr uint32_t kMailOffset = kBarrierOffset + 8 * kBarriers;
  static constexpr uint32_t kSmemBytes = 1024 + kMailOffset + 8 * kMailSlots;  // + alignment slack
  // Registers: the producer keeps a minimum and the consumers take the rest of what the block
  // holds (kBlockRegs; setmaxnreg.inc waits for registers the others gave back, so asking for
  // more than that hangs). With two consumers the producer's persistent item walk spills 8
  // bytes at 24, reloaded once an item.
  static constexpr int kProducerRegs = kConsumers == 2 ? 24 : 32;
  static constexpr int kConsumerRegs = kConsumers == 2 ? 240 : 160;
  // The scheduler barrier pays where the softmax is a large share of a tile (FlashAttention-3
  // measured it up to head_dim 128); wider heads spend their time in the GEMMs.
  static constexpr bool kPingpong = kD <= 128;

  static_assert(kWidth % 16 == 0 && kD <= 256, "S runs k16 steps over the head's columns");
  static_assert(kBlockN % 16 == 0 && kBlockN <= 256, "P V runs k16 steps over the key tile");
  static_assert(!kTf32 || kBlockN % kColElems == 0, "a tf32 V tile is whole blocks of 32 keys");
  static_assert(kVColBlocks * kVColBytes == kKVBytes, "V's tile is K's bytes");
  // What a block of kThreads at one block per SM holds: the 64 Ki file split per thread, in 8s.
  static constexpr int kBlockRegs = kThreads * (64 * 1024 / kThreads / 8 * 8);
  static_assert(128 * kProducerRegs + 128 * kConsumers * kConsumerRegs <= kBlockRegs, "registers the block holds");
  static_assert(kSmemBytes <= 227 * 1024, "shared memory per block");
};

// Where everything lives in shared memory, from a 1024-byte aligned base.
template <class S>
struct Smem {
  uint32_t base;
  __device__ uint32_t q() const { return base; }
  __device__ uint32_t k(int stage) const { return base + S::kQBytes + stage * S::kKVBytes; }
  __device__ uint32_t v(int stage) const { return base + S::kQBytes + (S::kStages + stage) * S::kKVBytes; }
  __device__ uint32_t bar(int i) const { return base + S::kBarrierOffset + 8 * i; }
  // Full barriers complete on the producer's one arrival plus the tile's bytes; empty barriers
  // on one arrival per consumer warpgroup.
  __device__ uint32_t q_full() const { return bar(0); }
  __device__ uint32_t k_full(int stage) const { return bar(1 + stage); }
  __device__ uint32_t v_full(int stage) const { return bar(1 + S::kStages + stage); }
  __device__ uint32_t q_empty() const { return bar(1 + 2 * S::kStages); }
  __device__ uint32_t k_empty(int stage) const { return bar(2 + 2 * S::kStages + stage); }
  __device__ uint32_t v_empty(int stage) const { return bar(2 + 3 * S::kStages + stage); }
  // The item mailbox (ItemQueue): full on the producer's arrival, empty once every consumer
  // thread has read the slot.
  __device__ uint32_t mail_full(int slot) const { return bar(S::kRingBarriers + slot); }
  __device__ uint32_t mail_empty(int slot) const { return bar(S::kRingBarriers + S::kMailSlots + slot); }
  __device__ void init_barriers() const {
    for (int i = 0; i < S::kRingBarriers; ++i) ptx::mbarrier_init(bar(i), i <= 2 * S::kStages ? 1 : S::kConsumers);
    for (int slot = 0; slot < S::kMailSlots; ++slot) {
      ptx::mbarrier_init(mail_full(slot), 1);
      ptx::mbarrier_init(mail_empty(slot), 128 * S::kConsumers);
    }
    ptx::fence_mbarrier_init();
  }
};

// Where a thread is in the block's sequence of loads: the K/V ring's next tile (tile j of the
// sequence sits in stage j % kStages, its round j / kStages picks the phase) and how many
// items have used Q. Producer and consumers walk the same items, so their counters agree.
struct Ring {
  int tile = 0;
  int q_round = 0;
};

template <class S>
__device__ __forceinline__ int stage_of(int j) {
  return j % S::kStages;
}
template <class S>
__device__ __forceinline__ uint32_t phase_of(int j) {
  return static_cast<uint32_t>(j / S::kStages) & 1u;
}

// ---- The persistent grid's items. Block b starts on item b; its producer claims each further
// item from a counter in global memory (gridDim.x + the claims before it) once it has issued
// the last loads of the one before, a stage or two before its consumers run dry. So the SMs
// take the items in their order (within a head longest first, heads in turn, which keeps a few
// heads' K and V in L2) as each frees up, as the hardware hands out the blocks of a grid of a
// block per item, while each block's next item loads under its last one's epilogue. The
// producer posts every item to the consumers through a two-slot mailbox in shared memory; an
// index past the last item ends the walk, and the last producer to post one sets the counter
// back to zero for the next launch on the stream (FlashParams::item_counter).
template <class S>
struct ItemQueue {
  Smem<S> sm;
  int* counter;  // {items claimed, producers done}
  int64_t items;

  __device__ int64_t claim() const { return static_cast<int64_t>(gridDim.x) + atomicAdd(counter, 1); }
  // Producer: item k of the block (k = 0, 1, ...) into its slot, once the consumers have read
  // what the slot held before.
  __device__ void post(int k, int64_t item) const {
    const int slot = k % S::kMailSlots;
    ptx::mbarrier_wait(sm.mail_empty(slot), (static_cast<uint32_t>(k / S::kMailSlots) & 1u) ^ 1u);
    ptx::st_shared_u64(sm.base + S::kMailOffset + 8 * slot, static_cast<uint64_t>(item));
    ptx::mbarrier_arrive(sm.mail_full(slot));
  }
  // Producer, after posting the end: the last block to get here resets the counter. Every
  // other block's claims precede its own arrival here (its fence), so none comes after.
  __device__ void finish() const {
    __threadfence();
    if (atomicAdd(counter + 1, 1) == static_cast<int>(gridDim.x) - 1) {
      __threadfence();  // the other blocks' claims, seen through their arrivals, come before the reset
      counter[0] = 0;
      counter[1] = 0;
    }
  }
  // Consumer thread: item k of the block.
  __device__ int64_t take(int k) const {
    const int slot = k % S::kMailSlots;
    ptx::mbarrier_wait(sm.mail_full(slot), static_cast<uint32_t>(k / S::kMailSlots) & 1u);
    const int64_t item = static_cast<int64_t>(ptx::ld_shared_u64(sm.base + S::kMailOffset + 8 * slot));
    ptx::mbarrier_arrive(sm.mail_empty(slot));
    return item;
  }
};

// ---- Producer: one thread issues every load of the block.
template <class S>
__device__ void produce(const Smem<S>& sm, const CUtensorMap* tmap_q, const CUtensorMap* tmap_k,
                        const CUtensorMap* tmap_v, int bh, int q0, int key0, int n_tiles, Ring& ring) {
  const uint64_t reused = ptx::l2_policy_evict_last();  // K, V: every query tile of the head reads them
  const uint64_t once = ptx::l2_policy_evict_first();   // Q: this item alone
  // Q of the last item must be done with (a fresh barrier's "previous" phase counts as complete).
  ptx::mbarrier_wait(sm.q_empty(), (static_cast<uint32_t>(ring.q_round) & 1u) ^ 1u);
  ptx::mbarrier_arrive_expect_tx(sm.q_full(), S::kQBytes);
  for (int cb = 0; cb < S::kColBlocks; ++cb)
    ptx::tma_load_3d(sm.q() + cb * S::kQColBytes, tmap_q, cb * S::kColElems, q0, bh, sm.q_full(), once);

  // Tile j of K or V into its stage, once every consumer has released the stage's last round.
  auto claim = [&](uint32_t full, uint32_t empty, int j) {
    ptx::mbarrier_wait(empty, phase_of<S>(ring.tile + j) ^ 1u);
    ptx::mbarrier_arrive_expect_tx(full, S::kKVBytes);
  };
  auto load_k = [&](int j) {
    const int st = stage_of<S>(ring.tile + j);
    claim(sm.k_full(st), sm.k_empty(st), j);
    for (int cb = 0; cb < S::kColBlocks; ++cb)
      ptx::tma_load_3d(sm.k(st) + cb * S::kKVColBytes, tmap_k, cb * S::kColElems, key0 + j * S::kBlockN, bh,
                       sm.k_full(st), reused);
  };
  auto load_v = [&](int j) {
    const int st = stage_of<S>(ring.tile + j);
    claim(sm.v_full(st), sm.v_empty(st), j);
    const int keys = key0 + j * S::kBlockN;
    for (int cb = 0; cb < S::kVColBlocks; ++cb) {
      if constexpr (S::kTf32)  // V^T: keys along the row, every head dim from 0
        ptx::tma_load_3d(sm.v(st) + cb * S::kVColBytes, tmap_v, keys + cb * S::kColElems, 0, bh, sm.v_full(st),
                         reused);
      else
        ptx::tma_load_3d(sm.v(st) + cb * S::kVColBytes, tmap_v, cb * S::kColElems, keys, bh, sm.v_full(st), reused);
    }
  };
  // The consumers need K of tile j before V of tile j - 1 (their scores run a tile ahead).
  load_k(0);
  for (int j = 1; j < n_tiles; ++j) {
    load_k(j);
    load_v(j - 1);
  }
  load_v(n_tiles - 1);
  ring.tile += n_tiles;
  ++ring.q_round;
}

// ---- Consumer: 64 query rows, the whole key range of the block.

// The scheduler: warpgroup wg issues its GEMMs after warpgroup wg-1 issued its own (barrier
// 1 + wg counts 128 waiting and 128 arriving threads).
template <class S>
__device__ __forceinline__ void scheduler_wait(int wg) {
  if constexpr (S::kPingpong) ptx::named_barrier_sync(1 + wg, 256);
}
template <class S>
__device__ __forceinline__ void scheduler_pass(int wg) {
  if constexpr (S::kPingpong) ptx::named_barrier_arrive(1 + (wg + 1) % S::kConsumers, 256);
}
// One thread per warpgroup hands a ring stage back (once the warpgroup is done with it).
__device__ __forceinline__ void release_stage(uint32_t empty) {
  if (threadIdx.x % 128 == 0) ptx::mbarrier_arrive(empty);
}
// The four warps of warpgroup wg meet (a barrier of their own, numbered after the scheduler's).
template <class S>
__device__ __forceinline__ void warpgroup_sync(int wg) {
  ptx::named_barrier_sync(1 + S::kConsumers + wg, 128);
}

template <typename T, class S>
__device__ void consume(const Smem<S>& sm, const FlashParams& p, const BlockWork<T>& w, int wg, Ring& ring) {
  constexpr int kNT = S::kBlockN / 8, kDN = S::kWidth / 8;
  constexpr int kK = S::kKStep;
  const int tid = static_cast<int>(threadIdx.x) % 128, lane = tid % 32;
  const int64_t row0 = w.c.q0 + 64 * wg + 16 * (tid / 32);  // this warp's first query row

  float o[1][kDN][4];
  float m[1][2], l[1][2];
  clear_row_state(o, m, l);
  float(&o_flat)[kDN * 4] = reinterpret_cast<float(&)[kDN * 4]>(o[0]);

  if (w.n_tiles > 0) {
    float s[1][kNT][4];
    float(&s_flat)[kNT * 4] = reinterpret_cast<float(&)[kNT * 4]>(s[0]);
    uint32_t pa[S::kPSteps][4];
    float alpha[1][2];

    // S = Q K_j^T: both K-major; a k-step (k16, or k8 in tf32) is 32 bytes along a 128-byte
    // row, and every four steps move to the next column block. The first step overwrites S.
    const uint64_t q_desc = ptx::wgmma_desc_sw128(sm.q() + wg * 64 * 128, 16, 1024);  // this warpgroup's rows
    // Tile j of this item is tile ring.tile + j of the block's ring.
    auto stage = [&](int j) { return stage_of<S>(ring.tile + j); };
    auto phase = [&](int j) { return phase_of<S>(ring.tile + j); };
    auto issue_scores = [&](int j) {
      const uint64_t k_desc = ptx::wgmma_desc_sw128(sm.k(stage(j)), 16, 1024);
#pragma unroll
      for (int ks = 0; ks < S::kWidth / kK; ++ks) {
        const uint32_t off = (ks % 4) * 32;
        const uint64_t a = ptx::wgmma_desc_advance(q_desc, (ks / 4) * S::kQColBytes + off);
        const uint64_t b = ptx::wgmma_desc_advance(k_desc, (ks / 4) * S::kKVColBytes + off);
        ptx::wgmma_ss<T, S::kBlockN>(s_flat, a, b, ks > 0);
      }
      ptx::wgmma_commit_group();
    };
    // O += P_j V_j. 16-bit: V is the MN-major operand; a k16 step is 16 key rows (2048 bytes),
    // the next 64 head-dim columns are the next column block (N = kWidth reads only the head's
    // own columns of a layout wider than it). tf32: V^T is K-major like K, a k8 step 32 bytes
    // along a row of keys, every four the next block of 32 keys.
    auto issue_pv = [&](int j) {
      if constexpr (S::kTf32) {
        const uint64_t v_desc = ptx::wgmma_desc_sw128(sm.v(stage(j)), 16, 1024);
#pragma unroll
        for (int kk = 0; kk < S::kPSteps; ++kk) {
          const uint64_t b = ptx::wgmma_desc_advance(v_desc, (kk / 4) * S::kVColBytes + (kk % 4) * 32);
          ptx::wgmma_rs<T, S::kWidth, 0>(o_flat, pa[kk], b, 1);
        }
      } else {
        const uint64_t v_desc = ptx::wgmma_desc_sw128(sm.v(stage(j)), S::kKVColBytes, 1024);
#pragma unroll
        for (int kk = 0; kk < S::kPSteps; ++kk) {
          const uint64_t b = ptx::wgmma_desc_advance(v_desc, kk * 16 * 128);
          ptx::wgmma_rs<T, S::kWidth, 1>(o_flat, pa[kk], b, 1);
        }
      }
      ptx::wgmma_commit_group();
    };
    auto mask_tile = [&](int j) {
      const int64_t kv0 = w.kr.begin + static_cast<int64_t>(j) * S::kBlockN;
      if (tile_needs_mask(p, kv0, S::kBlockN, w.kr.end, row0)) mask_scores(s, row0, kv0, w.kr.end, w.causal, lane);
    };

    ptx::mbarrier_wait(sm.q_full(), static_cast<uint32_t>(ring.q_round) & 1u);
    ptx::mbarrier_wait(sm.k_full(stage(0)), phase(0));
    ptx::wgmma_fence();
    issue_scores(0);
    ptx::wgmma_wait_group<0>();
    fence_operands(s_flat);
    release_stage(sm.k_empty(stage(0)));
    mask_tile(0);
    softmax_scores<1, kNT, S::kFmaExpEvery>(s, m, l, alpha, p.scale_log2);  // O is still zero: nothing to rescale
    pack_p<T>(pa, s);

    for (int j = 1; j < w.n_tiles; ++j) {
      ptx::mbarrier_wait(sm.k_full(stage(j)), phase(j));
      scheduler_wait<S>(wg);
      ptx::wgmma_fence();
      issue_scores(j);
      ptx::mbarrier_wait(sm.v_full(stage(j - 1)), phase(j - 1));
      issue_pv(j - 1);
      scheduler_pass<S>(wg);
      ptx::wgmma_wait_group<1>();  // the scores; P V may still run
      fence_operands(s_flat);
      release_stage(sm.k_empty(stage(j)));
      mask_tile(j);
      const bool rescale = softmax_scores<1, kNT, S::kFmaExpEvery>(s, m, l, alpha, p.scale_log2);
      ptx::wgmma_wait_group<0>();
      fence_operands(o_flat);
      release_stage(sm.v_empty(stage(j - 1)));
      if (rescale) rescale_o(o, alpha);
      pack_p<T>(pa, s);  // P of tile j-1 is no longer read by the tensor cores
    }
    release_stage(sm.q_empty());  // every score of the item is computed: Q may take the next item's
    const int last = w.n_tiles - 1;
    ptx::mbarrier_wait(sm.v_full(stage(last)), phase(last));
    ptx::wgmma_fence();
    issue_pv(last);
    ptx::wgmma_wait_group<0>();
    fence_operands(o_flat);
    release_stage(sm.v_empty(stage(last)));
    ring.tile += w.n_tiles;
    ++ring.q_round;
  }
  store_rows<T, S::kWidth, true>(p, w.c, w.split, row0, o, m, l, lane);
}

// A consumer whose 64 query rows all lie past seq (in the last query tile of a sequence that
// ends early in it, e.g. rows 320..383 of a 257-row head in tiles of 192): no MMA, no
// softmax, nothing to store; only consume()'s waits, releases and scheduler turns, in their
// order, since the ring's barriers count every warpgroup. The others' MMAs then have the
// tensor cores to themselves. A path of its own: a branch around the MMAs inside consume()
// makes ptxas serialise its wgmma pipeline.
// In consume() a stage goes back after MMAs that all four warps issued, so none of them still
// waits for it; here nothing but the meeting before each release holds the warps together.
// Without it warp 0 handed stages back as soon as it had seen them, the producer refilled
// them, and a warp that had not yet looked found the barrier a whole round on, waited for the
// round after, and the block never finished (the official sweep at 6f5e51c, case 3: a
// 512-key padding mask, whose last query tile of 192 rows leaves one warpgroup standing by).
template <typename T, class S>
__device__ void stand_by(const Smem<S>& sm, const BlockWork<T>& w, int wg, Ring& ring) {
  if (w.n_tiles == 0) return;
  auto stage = [&](int j) { return stage_of<S>(ring.tile + j); };
  auto phase = [&](int j) { return phase_of<S>(ring.tile + j); };
  ptx::mbarrier_wait(sm.q_full(), static_cast<uint32_t>(ring.q_round) & 1u);
  ptx::mbarrier_wait(sm.k_full(stage(0)), phase(0));
  warpgroup_sync<S>(wg);
  release_stage(sm.k_empty(stage(0)));
  for (int j = 1; j < w.n_tiles; ++j) {
    ptx::mbarrier_wait(sm.k_full(stage(j)), phase(j));
    scheduler_wait<S>(wg);
    ptx::mbarrier_wait(sm.v_full(stage(j - 1)), phase(j - 1));
    scheduler_pass<S>(wg);
    warpgroup_sync<S>(wg);
    release_stage(sm.k_empty(stage(j)));
    release_stage(sm.v_empty(stage(j - 1)));
  }
  release_stage(sm.q_empty());  // every warp has waited for Q before the first meeting
  const int last = w.n_tiles - 1;
  ptx::mbarrier_wait(sm.v_full(stage(last)), phase(last));
  warpgroup_sync<S>(wg);
  release_stage(sm.v_empty(stage(last)));
  ring.tile += w.n_tiles;
  ++ring.q_round;
}

// kPersistent: gridDim.x blocks walk the items (every (query tile, batch*head) of every key
// range) as ItemQueue hands them out; otherwise a block per item, key ranges along y.
template <typename T, class S, bool kPersistent>
__global__ void __launch_bounds__(S::kThreads, 1)
    flash_fwd_sm90(const __grid_constant__ CUtensorMap tmap_q, const __grid_constant__ CUtensorMap tmap_k,
                   const __grid_constant__ CUtensorMap tmap_v, const FlashParams p) {
#if TLB_PTX_SM90A
  extern __shared__ unsigned char smem_raw[];
  const Smem<S> sm{(ptx::smem_addr(smem_raw) + 1023u) & ~1023u};
  if (threadIdx.x == 0) {
    sm.init_barriers();
    ptx::prefetch_tensor_map(&tmap_q);
    ptx::prefetch_tensor_map(&tmap_k);
    ptx::prefetch_tensor_map(&tmap_v);
  }
  __syncthreads();
  ptx::pdl_wait();  // PDL: Q, K and V may be the previous kernel's output, the counter its reset
  ptx::pdl_launch_dependents();
  const int64_t per_split = (p.seq + S::kBlockM - 1) / S::kBlockM * p.batch * p.heads;
  auto work = [&](int64_t item) {
    if constexpr (kPersistent)
      return block_work<T>(p, S::kBlockM, S::kBlockN, p.head_dim, item % per_split, static_cast<int>(item / per_split));
    else
      return block_work<T>(p, S::kBlockM, S::kBlockN, p.head_dim);
  };
  const ItemQueue<S> queue{sm, p.item_counter, per_split * p.splits};
  Ring ring;
  if (threadIdx.x < 128) {
    ptx::setmaxnreg_dec<S::kProducerRegs>();
    if (threadIdx.x == 0) {
      auto load_item = [&](int64_t item) {
        const BlockWork<T> w = work(item);
        if (w.n_tiles > 0)
          produce<S>(sm, &tmap_q, &tmap_k, &tmap_v, static_cast<int>(w.c.bh), static_cast<int>(w.c.q0),
                     static_cast<int>(w.kr.begin), w.n_tiles, ring);
      };
      if constexpr (kPersistent) {
        int64_t item = blockIdx.x;
        for (int k = 0;; ++k) {
          queue.post(k, item);
          if (item >= queue.items) break;
          load_item(item);
          item = queue.claim();
        }
        queue.finish();
      } else {
        load_item(0);
      }
    }
  } else {
    ptx::setmaxnreg_inc<S::kConsumerRegs>();
    // Broadcast from lane 0, the warpgroup is warp-uniform to the compiler too: what derives
    // from it (shared-memory addresses, wgmma descriptors) then lives in uniform registers.
    const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0) - 1;
    // The scheduler's ring starts with the first consumer (barrier 1 counts its arrival).
    if constexpr (S::kPingpong) {
      if (wg == 0) ptx::named_barrier_arrive(1, 256);
    }
    auto run_item = [&](int64_t item) {
      const BlockWork<T> w = work(item);
      if (w.c.q0 + 64 * wg < p.seq) consume<T, S>(sm, p, w, wg, ring);
      else stand_by<T, S>(sm, w, wg, ring);
    };
    if constexpr (kPersistent) {
      for (int k = 0;; ++k) {
        const int64_t item = queue.take(k);
        if (item >= queue.items) break;
        run_item(item);
      }
    } else {
      run_item(0);
    }
  }
#else
  __trap();  // never launched: the host launches this only where an sm_90a image runs
#endif
}

// The block shape the dispatcher planned for this head_dim and mask on long sequences, and
// the short-keys shape where the width has one (attention_kernels.hpp).
template <int kD, bool kCausal>
using PlannedShape =
    FwdShape<kD, sm90_tile(kD, kCausal).kv_cols, sm90_tile(kD, kCausal).q_rows / 64>;
template <int kD>
using ShortKeysShape = FwdShape<kD, kSm90ShortKeysTile.kv_cols, kSm90ShortKeysTile.q_rows / 64>;

template <typename T, class S, bool kPersistent>
void launch_fwd(const FlashLaunch& l, cudaStream_t stream) {
  auto kernel = flash_fwd_sm90<T, S, kPersistent>;
  allow_dynamic_smem(kernel, S::kSmemBytes);
  const FlashParams& p = l.p;
  if (kPersistent && p.item_counter == nullptr) throw std::logic_error("flash attention sm90: persistent grid without its item counter");
  const uint64_t bh = static_cast<uint64_t>(p.batch * p.heads), seq = static_cast<uint64_t>(p.seq);
  const uint64_t hd = static_cast<uint64_t>(p.head_dim);
  const CUtensorMap tq = make_tensor_map_3d_sw128(p.q, l.dtype, bh, seq, hd, S::kBlockM, S::kColElems);
  const CUtensorMap tk = make_tensor_map_3d_sw128(p.k, l.dtype, bh, seq, hd, S::kBlockN, S::kColElems);
  // tf32: V^T, [bh][head_dim][keys rounded up to 8]; a box is every head dim of 32 keys.
  const CUtensorMap tv = S::kTf32 ? make_tensor_map_3d_sw128(l.v_transposed, l.dtype, bh, hd, tf32_v_keys(p.seq),
                                                             S::kD, S::kColElems)
                                  : make_tensor_map_3d_sw128(p.v, l.dtype, bh, seq, hd, S::kBlockN, S::kColElems);
  const uint64_t per_split = (seq + S::kBlockM - 1) / S::kBlockM * bh;
  const dim3 grid = kPersistent ? dim3(static_cast<unsigned>(std::min<uint64_t>(per_split * p.splits, device_caps().sms)))
                                : dim3(static_cast<unsigned>(per_split), static_cast<unsigned>(p.splits));
  launch_kernel(kernel, grid, dim3(S::kThreads), S::kSmemBytes, stream, 1, tq, tk, tv, p);
  TLB_LAUNCH_CHECK(stream);
}

template <typename T, class S>
void launch_shape(const FlashLaunch& l, cudaStream_t stream) {
  if (l.sm90.q_rows != S::kBlockM || l.sm90.kv_cols != S::kBlockN)
    throw std::logic_error("flash attention sm90: the plan's " + std::to_string(l.sm90.q_rows) + " x " +
                           std::to_string(l.sm90.kv_cols) + " tile is not compiled at width " +
                           std::to_string(S::kWidth));
  if (l.persistent) return launch_fwd<T, S, true>(l, stream);
  launch_fwd<T, S, false>(l, stream);
}

// S, or, where the plan moves some exponentials to the FMA pipe, S built that way.
template <class S>
using FmaExpShape = FwdShape<S::kWidth, S::kBlockN, S::kConsumers, S::kElemBytes, sm90_fma_exp_every(S::kWidth)>;
template <typename T, class S>
void launch_exp(const FlashLaunch& l, cudaStream_t stream) {
  if (!l.fma_exp) return launch_shape<T, S>(l, stream);
  if constexpr (sm90_fma_exp_every(S::kWidth) > 0) return launch_shape<T, FmaExpShape<S>>(l, stream);
  throw std::logic_error("flash attention sm90: width " + std::to_string(S::kWidth) +
                         " has no kernel with exponentials on the FMA pipe");
}

// The shapes of one compiled width: both masks' long-sequence tiles (they differ only where
// sm90_tile says so) and, where the width has it, the short-keys tile.
template <typename T, int kD>
void launch_width(const FlashLaunch& l, cudaStream_t stream) {
  const bool causal = l.p.mask == static_cast<int>(MaskKind::causal);
  if constexpr (sm90_has_short_keys_tile(kD, false)) {
    if (!causal && l.sm90.kv_cols == kSm90ShortKeysTile.kv_cols) return launch_exp<T, ShortKeysShape<kD>>(l, stream);
  }
  if (causal) return launch_exp<T, PlannedShape<kD, true>>(l, stream);
  launch_exp<T, PlannedShape<kD, false>>(l, stream);
}

// One compiled width in tf32 (attention_fwd_sm90_tf32.cu), V^T already in place.
template <int kWidth>
void launch_width_tf32(const FlashLaunch& l, cudaStream_t stream) {
  constexpr Sm90Tile t = sm90_tile_tf32(kWidth);
  launch_shape<float, FwdShape<kWidth, t.kv_cols, t.q_rows / 64, 4>>(l, stream);
}

// One compiled width in fp16 and bf16: what each attention_fwd_sm90_d*.cu instantiates.
template <int kWidth>
void launch_width_fp16_bf16(const FlashLaunch& l, cudaStream_t stream) {
  if (l.dtype == DType::bf16) return launch_width<__nv_bfloat16, kWidth>(l, stream);
  return launch_width<__half, kWidth>(l, stream);
}

}  // namespace tlb::attn::sm90
