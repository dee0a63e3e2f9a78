// Hopper (sm_90 / sm_90a) primitives: mbarriers, TMA tensor loads and stores, stmatrix, warpgroup MMA (wgmma)
// with shared-memory descriptors, register reallocation and named barriers. The wgmma and
// setmaxnreg bodies exist only in the sm_90a pass (elsewhere they compile to nothing, and
// callers must not reach them: kernels guard with TLB_PTX_SM90A and the host checks the
// device before launching).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TLB_PTX_SM90A 1
#else
#define TLB_PTX_SM90A 0
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define TLB_PTX_SM90 1
#else
#define TLB_PTX_SM90 0
#endif

namespace tlb::ptx {

// ---- mbarrier (shared::cta, 64-bit). Phases complete when the arrival count reaches the
// initial count and all expected transaction bytes have landed.
__device__ __forceinline__ void mbarrier_init(uint32_t bar, uint32_t count) {
#if TLB_PTX_SM90
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#endif
}
// Makes initialised barriers visible to the async proxy (TMA) before first use.
__device__ __forceinline__ void fence_mbarrier_init() {
#if TLB_PTX_SM90
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
#if TLB_PTX_SM90
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(bar)
               : "memory");
#endif
}
// Arrives once and announces `bytes` more transaction bytes for the current phase.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
#if TLB_PTX_SM90
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n}\n" ::"r"(bar),
               "r"(bytes)
               : "memory");
#endif
}
// True once the phase with parity `parity` has completed. Waiting on parity 1 of a fresh
// barrier returns at once (the "previous" phase counts as complete), which lets a producer
// wait on its empty barriers from the first round on.
__device__ __forceinline__ bool mbarrier_try_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 1;
#if TLB_PTX_SM90
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
#endif
  return done != 0;
}
__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t parity) {
  while (!mbarrier_try_wait(bar, parity)) {
  }
}
// The same for a thread that expects to wait long (a producer whose ring is full): each try
// suspends the thread for up to `suspend_ns` until the phase completes, where a plain try
// returns after a short system-dependent time, and the retry loop takes issue slots from the
// other warps of its scheduler.
__device__ __forceinline__ bool mbarrier_try_wait(uint32_t bar, uint32_t parity, uint32_t suspend_ns) {
  uint32_t done = 1;
#if TLB_PTX_SM90
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity), "r"(suspend_ns)
      : "memory");
#endif
  return done != 0;
}
__device__ __forceinline__ void mbarrier_wait_suspended(uint32_t bar, uint32_t parity, uint32_t suspend_ns) {
  while (!mbarrier_try_wait(bar, parity, suspend_ns)) {
  }
}

// ---- TMA: one 2-D box of a tensor map into shared memory, completing on `bar` (which must
// expect the box's bytes). Coordinates are element indices, innermost first; parts of the
// box outside the tensor are filled with zeros.
__device__ __forceinline__ void tma_load_2d(uint32_t smem_dst, const void* tensor_map, int32_t c_inner,
                                            int32_t c_outer, uint32_t bar) {
#if TLB_PTX_SM90
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          smem_dst),
      "l"(reinterpret_cast<uint64_t>(tensor_map)), "r"(c_inner), "r"(c_outer), "r"(bar)
      : "memory");
#endif
}
// One 3-D box (coordinates innermost first) with an L2 eviction policy from l2_policy_*():
// operands that other blocks read again (attention's K and V) stay in L2, those read once go
// first.
__device__ __forceinline__ void tma_load_3d(uint32_t smem_dst, const void* tensor_map, int32_t c0, int32_t c1,
                                            int32_t c2, uint32_t bar, uint64_t l2_policy) {
#if TLB_PTX_SM90
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3, %4}], [%5], %6;\n" ::"r"(smem_dst),
      "l"(reinterpret_cast<uint64_t>(tensor_map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar), "l"(l2_policy)
      : "memory");
#endif
}
__device__ __forceinline__ uint64_t l2_policy_evict_last() {
  uint64_t policy = 0;
#if TLB_PTX_SM90
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(policy));
#endif
  return policy;
}
__device__ __forceinline__ uint64_t l2_policy_evict_first() {
  uint64_t policy = 0;
#if TLB_PTX_SM90
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
#endif
  return policy;
}
__device__ __forceinline__ void prefetch_tensor_map(const void* tensor_map) {
#if TLB_PTX_SM90
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(tensor_map)) : "memory");
#endif
}
// ---- TMA store: one 2-D box of shared memory into the tensor (coordinates innermost first;
// the parts of the box outside the tensor are not written), as part of the calling thread's
// current bulk group. The shared-memory writes it reads must be fenced to the async proxy
// (fence_proxy_async_shared) and ordered before it by a barrier.
__device__ __forceinline__ void tma_store_2d(const void* tensor_map, uint32_t smem_src, int32_t c_inner,
                                             int32_t c_outer) {
#if TLB_PTX_SM90
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(tensor_map)),
               "r"(smem_src), "r"(c_inner), "r"(c_outer)
               : "memory");
#endif
}
// The same for a 4-D tensor (a box of one plane of one outer index: c2 and c3 pick them).
__device__ __forceinline__ void tma_store_4d(const void* tensor_map, uint32_t smem_src, int32_t c0, int32_t c1,
                                             int32_t c2, int32_t c3) {
#if TLB_PTX_SM90
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(tensor_map)),
               "r"(smem_src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
#endif
}
// Closes the calling thread's current bulk group (the TMA stores issued since the last one).
__device__ __forceinline__ void bulk_commit_group() {
#if TLB_PTX_SM90
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}
// Waits until at most kPending of the calling thread's bulk groups still read their shared
// memory (which may then be written again).
template <int kPending>
__device__ __forceinline__ void bulk_wait_group_read() {
#if TLB_PTX_SM90
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(kPending) : "memory");
#endif
}
// Waits until at most kPending of the calling thread's bulk groups are incomplete (their
// global writes done).
template <int kPending>
__device__ __forceinline__ void bulk_wait_group() {
#if TLB_PTX_SM90
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}

// ---- stmatrix: four 8x8 b16 matrices into shared memory, ldmatrix_x4's inverse: lane
// (g = lane / 4, t = lane % 4) gives r[j] = row g, columns 2t and 2t + 1 of matrix j (the
// mma/wgmma accumulator layout), lanes 8j..8j+7 the row addresses of matrix j.
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, const uint32_t (&r)[4]) {
#if TLB_PTX_SM90
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r[0]),
               "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
#endif
}

// Generic-proxy shared-memory writes become visible to the async proxy (wgmma, TMA) that
// reads them after the next barrier.
__device__ __forceinline__ void fence_proxy_async_shared() {
#if TLB_PTX_SM90
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// ---- Named barriers: sync `threads` threads (a multiple of 32) on barrier `id` (1..15; 0 is
// __syncthreads), so a subset of warps can synchronise while others run on.
__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// Counts this warp's threads towards barrier `id` without waiting (the other side syncs).
__device__ __forceinline__ void named_barrier_arrive(uint32_t id, uint32_t threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// The same without .aligned: each thread counts on its own arrival, so a warp may reach it
// diverged (a producer warp whose lane 0 ran the TMA loop, say) without the barrier firing
// early on a partial warp.
__device__ __forceinline__ void named_barrier_sync_divergent(uint32_t id, uint32_t threads) {
  asm volatile("barrier.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// ---- Thread-block clusters: the cluster-wide barrier (every thread of every CTA of the
// cluster; without .aligned, so a warp may reach it diverged), the address of the same
// shared-memory location in another CTA of the cluster, and an mbarrier arrival there. The
// arrival keeps the default semantics (release at CTA scope), the form CUTLASS's cluster
// barriers use for a stage release, whose reads (wgmma's) are complete at wgmma.wait_group.
// With .release.cluster the persistent GEMM's clusters ran at 0.38-0.55x the unclustered
// kernel, level with it at the default (an H100, results/perf-log.md, 2026-12-07).
__device__ __forceinline__ void cluster_sync() {
#if TLB_PTX_SM90
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
#endif
}
__device__ __forceinline__ uint32_t map_shared_rank(uint32_t smem_addr, uint32_t rank) {
  uint32_t remote = smem_addr;
#if TLB_PTX_SM90
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_addr), "r"(rank));
#endif
  return remote;
}
__device__ __forceinline__ void mbarrier_arrive_cluster(uint32_t remote_bar) {
#if TLB_PTX_SM90
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(remote_bar) : "memory");
#endif
}
// tma_load_2d's box into the same shared-memory offset of every CTA of the cluster in
// `cta_mask` (bit r: rank r), each completing on its own barrier at `bar`'s offset.
__device__ __forceinline__ void tma_load_2d_multicast(uint32_t smem_dst, const void* tensor_map, int32_t c_inner,
                                                      int32_t c_outer, uint32_t bar, uint16_t cta_mask) {
#if TLB_PTX_SM90
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(smem_dst),
      "l"(reinterpret_cast<uint64_t>(tensor_map)), "r"(c_inner), "r"(c_outer), "r"(bar), "h"(cta_mask)
      : "memory");
#endif
}

// ---- Register reallocation between warpgroups (sm_90a; needs a register cap at entry).
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
#if TLB_PTX_SM90A
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
#if TLB_PTX_SM90A
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}

// ---- wgmma: shared-memory matrix descriptors and the warpgroup MMA itself.
// Descriptor of a K-major operand tile written by TMA with 128-byte swizzling: rows of 128
// bytes, 8-row core-matrix groups 1024 bytes apart (stride byte offset); the leading byte
// offset is unused for swizzled K-major layouts. The tile must start 1024-byte aligned;
// stepping K inside the 128-byte row is adding the byte offset to the start address.
__device__ __forceinline__ uint64_t wgmma_desc_k_major_sw128(uint32_t smem_addr) {
  uint64_t d = 0;
  d |= static_cast<uint64_t>((smem_addr & 0x3ffffu) >> 4);  // start address, 16-byte units
  d |= static_cast<uint64_t>(1) << 16;                       // leading byte offset (unused)
  d |= static_cast<uint64_t>(1024 >> 4) << 32;               // stride byte offset
  d |= static_cast<uint64_t>(1) << 62;                       // 128-byte swizzle
  return d;
}

// Orders register accesses before the next wgmma (accumulators written by other code).
__device__ __forceinline__ void wgmma_fence() {
#if TLB_PTX_SM90A
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit_group() {
#if TLB_PTX_SM90A
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Waits until at most kPending committed wgmma groups of this warpgroup are in flight.
template <int kPending>
__device__ __forceinline__ void wgmma_wait_group() {
#if TLB_PTX_SM90A
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
#endif
}

// The wgmma wrappers below differ only in the instruction and the number of accumulator
// registers, so they are stamped out by two macros (inline asm needs its operand list and its
// string spelled out, and nvcc takes no named operands). Accumulator registers are always
// operands %0 .. %(n-1); TLB_WGMMA_ACC<n>_REGS spells them for n = 8, 16, ..., 128 and
// TLB_WGMMA_ACC<n>_OPS(d) binds them to d[0 .. n-1].
#if TLB_PTX_SM90A
#define TLB_SM90A_ASM(...) asm volatile(__VA_ARGS__)
#else
#define TLB_SM90A_ASM(...) (void)0
#endif
#define TLB_WGMMA_L8 "%0, %1, %2, %3, %4, %5, %6, %7"
#define TLB_WGMMA_L16 TLB_WGMMA_L8 ", %8, %9, %10, %11, %12, %13, %14, %15"
#define TLB_WGMMA_L24 TLB_WGMMA_L16 ", %16, %17, %18, %19, %20, %21, %22, %23"
#define TLB_WGMMA_L32 TLB_WGMMA_L24 ", %24, %25, %26, %27, %28, %29, %30, %31"
#define TLB_WGMMA_L40 TLB_WGMMA_L32 ", %32, %33, %34, %35, %36, %37, %38, %39"
#define TLB_WGMMA_L48 TLB_WGMMA_L40 ", %40, %41, %42, %43, %44, %45, %46, %47"
#define TLB_WGMMA_L56 TLB_WGMMA_L48 ", %48, %49, %50, %51, %52, %53, %54, %55"
#define TLB_WGMMA_L64 TLB_WGMMA_L56 ", %56, %57, %58, %59, %60, %61, %62, %63"
#define TLB_WGMMA_L72 TLB_WGMMA_L64 ", %64, %65, %66, %67, %68, %69, %70, %71"
#define TLB_WGMMA_L80 TLB_WGMMA_L72 ", %72, %73, %74, %75, %76, %77, %78, %79"
#define TLB_WGMMA_L88 TLB_WGMMA_L80 ", %80, %81, %82, %83, %84, %85, %86, %87"
#define TLB_WGMMA_L96 TLB_WGMMA_L88 ", %88, %89, %90, %91, %92, %93, %94, %95"
#define TLB_WGMMA_L104 TLB_WGMMA_L96 ", %96, %97, %98, %99, %100, %101, %102, %103"
#define TLB_WGMMA_L112 TLB_WGMMA_L104 ", %104, %105, %106, %107, %108, %109, %110, %111"
#define TLB_WGMMA_L120 TLB_WGMMA_L112 ", %112, %113, %114, %115, %116, %117, %118, %119"
#define TLB_WGMMA_L128 TLB_WGMMA_L120 ", %120, %121, %122, %123, %124, %125, %126, %127"
#define TLB_WGMMA_F8(d, i)                                                                    \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]),   \
      "+f"(d[i + 6]), "+f"(d[i + 7])
#define TLB_WGMMA_O8(d) TLB_WGMMA_F8(d, 0)
#define TLB_WGMMA_O16(d) TLB_WGMMA_O8(d), TLB_WGMMA_F8(d, 8)
#define TLB_WGMMA_O24(d) TLB_WGMMA_O16(d), TLB_WGMMA_F8(d, 16)
#define TLB_WGMMA_O32(d) TLB_WGMMA_O24(d), TLB_WGMMA_F8(d, 24)
#define TLB_WGMMA_O40(d) TLB_WGMMA_O32(d), TLB_WGMMA_F8(d, 32)
#define TLB_WGMMA_O48(d) TLB_WGMMA_O40(d), TLB_WGMMA_F8(d, 40)
#define TLB_WGMMA_O56(d) TLB_WGMMA_O48(d), TLB_WGMMA_F8(d, 48)
#define TLB_WGMMA_O64(d) TLB_WGMMA_O56(d), TLB_WGMMA_F8(d, 56)
#define TLB_WGMMA_O72(d) TLB_WGMMA_O64(d), TLB_WGMMA_F8(d, 64)
#define TLB_WGMMA_O80(d) TLB_WGMMA_O72(d), TLB_WGMMA_F8(d, 72)
#define TLB_WGMMA_O88(d) TLB_WGMMA_O80(d), TLB_WGMMA_F8(d, 80)
#define TLB_WGMMA_O96(d) TLB_WGMMA_O88(d), TLB_WGMMA_F8(d, 88)
#define TLB_WGMMA_O104(d) TLB_WGMMA_O96(d), TLB_WGMMA_F8(d, 96)
#define TLB_WGMMA_O112(d) TLB_WGMMA_O104(d), TLB_WGMMA_F8(d, 104)
#define TLB_WGMMA_O120(d) TLB_WGMMA_O112(d), TLB_WGMMA_F8(d, 112)
#define TLB_WGMMA_O128(d) TLB_WGMMA_O120(d), TLB_WGMMA_F8(d, 120)
#define TLB_WGMMA_ACC8_REGS "{" TLB_WGMMA_L8 "}"
#define TLB_WGMMA_ACC8_OPS(d) TLB_WGMMA_O8(d)
#define TLB_WGMMA_ACC16_REGS "{" TLB_WGMMA_L16 "}"
#define TLB_WGMMA_ACC16_OPS(d) TLB_WGMMA_O16(d)
#define TLB_WGMMA_ACC24_REGS "{" TLB_WGMMA_L24 "}"
#define TLB_WGMMA_ACC24_OPS(d) TLB_WGMMA_O24(d)
#define TLB_WGMMA_ACC32_REGS "{" TLB_WGMMA_L32 "}"
#define TLB_WGMMA_ACC32_OPS(d) TLB_WGMMA_O32(d)
#define TLB_WGMMA_ACC40_REGS "{" TLB_WGMMA_L40 "}"
#define TLB_WGMMA_ACC40_OPS(d) TLB_WGMMA_O40(d)
#define TLB_WGMMA_ACC48_REGS "{" TLB_WGMMA_L48 "}"
#define TLB_WGMMA_ACC48_OPS(d) TLB_WGMMA_O48(d)
#define TLB_WGMMA_ACC56_REGS "{" TLB_WGMMA_L56 "}"
#define TLB_WGMMA_ACC56_OPS(d) TLB_WGMMA_O56(d)
#define TLB_WGMMA_ACC64_REGS "{" TLB_WGMMA_L64 "}"
#define TLB_WGMMA_ACC64_OPS(d) TLB_WGMMA_O64(d)
#define TLB_WGMMA_ACC72_REGS "{" TLB_WGMMA_L72 "}"
#define TLB_WGMMA_ACC72_OPS(d) TLB_WGMMA_O72(d)
#define TLB_WGMMA_ACC80_REGS "{" TLB_WGMMA_L80 "}"
#define TLB_WGMMA_ACC80_OPS(d) TLB_WGMMA_O80(d)
#define TLB_WGMMA_ACC88_REGS "{" TLB_WGMMA_L88 "}"
#define TLB_WGMMA_ACC88_OPS(d) TLB_WGMMA_O88(d)
#define TLB_WGMMA_ACC96_REGS "{" TLB_WGMMA_L96 "}"
#define TLB_WGMMA_ACC96_OPS(d) TLB_WGMMA_O96(d)
#define TLB_WGMMA_ACC104_REGS "{" TLB_WGMMA_L104 "}"
#define TLB_WGMMA_ACC104_OPS(d) TLB_WGMMA_O104(d)
#define TLB_WGMMA_ACC112_REGS "{" TLB_WGMMA_L112 "}"
#define TLB_WGMMA_ACC112_OPS(d) TLB_WGMMA_O112(d)
#define TLB_WGMMA_ACC120_REGS "{" TLB_WGMMA_L120 "}"
#define TLB_WGMMA_ACC120_OPS(d) TLB_WGMMA_O120(d)
#define TLB_WGMMA_ACC128_REGS "{" TLB_WGMMA_L128 "}"
#define TLB_WGMMA_ACC128_OPS(d) TLB_WGMMA_O128(d)

// A and B from shared memory: NAME(d, desc_a, desc_b, accumulate = 1); accumulate 0 gives
// d = A*B. DESCS and PRED name the operands after the accumulators; FLAGS are the
// instruction's trailing immediates after the scales.
#define TLB_WGMMA_SS(NAME, NACC, DESCS, PRED, INSTR, FLAGS)                                     \
  __device__ __forceinline__ void NAME(float(&d)[NACC], uint64_t desc_a, uint64_t desc_b,      \
                                       int accumulate = 1) {                                   \
    TLB_SM90A_ASM("{\n.reg .pred p;\nsetp.ne.b32 p, " PRED ", 0;\n" INSTR " "                   \
                  TLB_WGMMA_ACC##NACC##_REGS ", " DESCS ", p, 1, 1" FLAGS ";\n}\n"              \
                  : TLB_WGMMA_ACC##NACC##_OPS(d)                                                \
                  : "l"(desc_a), "l"(desc_b), "r"(accumulate));                                 \
  }

// A from registers: NAME<kTransB>(d, a, desc_b, accumulate). AREGS, DESCB, PRED and TRANS
// name the operands after the accumulators.
#define TLB_WGMMA_RS(NAME, NACC, AREGS, DESCB, PRED, TRANS, INSTR)                             \
  template <int kTransB>                                                                       \
  __device__ __forceinline__ void NAME(float(&d)[NACC], const uint32_t(&a)[4], uint64_t desc_b, \
                                       int accumulate) {                                       \
    TLB_SM90A_ASM("{\n.reg .pred p;\nsetp.ne.b32 p, " PRED ", 0;\n" INSTR " "                  \
                  TLB_WGMMA_ACC##NACC##_REGS ", " AREGS ", " DESCB ", p, 1, 1, " TRANS ";\n}\n" \
                  : TLB_WGMMA_ACC##NACC##_OPS(d)                                               \
                  : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate),  \
                    "n"(kTransB));                                                             \
  }

// d[64 x N] (+)= A[64 x 16] * B[16 x N] (k8 for tf32), A and B from shared memory, both
// K-major. Accumulator layout: warp w of the warpgroup owns rows 16w..16w+15; in it lane
// (g = lane/4, t = lane%4) holds d[4j + {0,1}] = row g, columns 8j + 2t + {0,1} and
// d[4j + {2,3}] = row g + 8, same columns.
TLB_WGMMA_SS(wgmma_m64n64k16_f16, 32, "%32, %33", "%34",
             "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16", ", 0, 0")
TLB_WGMMA_SS(wgmma_m64n64k16_bf16, 32, "%32, %33", "%34",
             "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16", ", 0, 0")
TLB_WGMMA_SS(wgmma_m64n64k8_tf32, 32, "%32, %33", "%34",
             "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32", "")
TLB_WGMMA_SS(wgmma_m64n80k16_f16, 40, "%40, %41", "%42",
             "wgmma.mma_async.sync.aligned.m64n80k16.f32.f16.f16", ", 0, 0")
TLB_WGMMA_SS(wgmma_m64n80k16_bf16, 40, "%40, %41", "%42",
             "wgmma.mma_async.sync.aligned.m64n80k16.f32.bf16.bf16", ", 0, 0")
TLB_WGMMA_SS(wgmma_m64n96k16_f16, 48, "%48, %49", "%50",
             "wgmma.mma_async.sync.aligned.m64n96k16.f32.f16.f16", ", 0, 0")
TLB_WGMMA_SS(wgmma_m64n96k16_bf16, 48, "%48, %49", "%50",
             "wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16.bf16", ", 0, 0")
TLB_WGMMA_SS(wgmma_m64n112k16_f16, 56, "%56, %57", "%58",
             "wgmma.mma_async.sync.aligned.m64n112k16.f32.f16.f16", ", 0, 0")
TLB_WGMMA_SS(wgmma_m64n112k16_bf16, 56, "%56, %57", "%58",
             "wgmma.mma_async.sync.aligned.m64n112k16.f32.bf16.bf16", ", 0, 0")
TLB_WGMMA_SS(wgmma_m64n128k16_f16, 64, "%64, %65", "%66",
             "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16", ", 0, 0")
TLB_WGMMA_SS(wgmma_m64n128k16_bf16, 64, "%64, %65", "%66",
             "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16", ", 0, 0")
TLB_WGMMA_SS(wgmma_m64n128k8_tf32, 64, "%64, %65", "%66",
             "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32", "")
TLB_WGMMA_SS(wgmma_m64n144k16_f16, 72, "%72, %73", "%74",
             "wgmma.mma_async.sync.aligned.m64n144k16.f32.f16.f16", ", 0, 0")
TLB_WGMMA_SS(wgmma_m64n144k16_bf16, 72, "%72, %73", "%74",
             "wgmma.mma_async.sync.aligned.m64n144k16.f32.bf16.bf16", ", 0, 0")
TLB_WGMMA_SS(wgmma_m64n160k16_f16, 80, "%80, %81", "%82",
             "wgmma.mma_async.sync.aligned.m64n160k16.f32.f16.f16", ", 0, 0")
TLB_WGMMA_SS(wgmma_m64n160k16_bf16, 80, "%80, %81", "%82",
             "wgmma.mma_async.sync.aligned.m64n160k16.f32.bf16.bf16", ", 0, 0")
TLB_WGMMA_SS(wgmma_m64n176k16_f16, 88, "%88, %89", "%90",
             "wgmma.mma_async.sync.aligned.m64n176k16.f32.f16.f16", ", 0, 0")
TLB_WGMMA_SS(wgmma_m64n176k16_bf16, 88, "%88, %89", "%90",
             "wgmma.mma_async.sync.aligned.m64n176k16.f32.bf16.bf16", ", 0, 0")
TLB_WGMMA_SS(wgmma_m64n192k16_f16, 96, "%96, %97", "%98",
             "wgmma.mma_async.sync.aligned.m64n192k16.f32.f16.f16", ", 0, 0")
TLB_WGMMA_SS(wgmma_m64n192k16_bf16, 96, "%96, %97", "%98",
             "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16", ", 0, 0")
TLB_WGMMA_SS(wgmma_m64n192k8_tf32, 96, "%96, %97", "%98",
             "wgmma.mma_async.sync.aligned.m64n192k8.f32.tf32.tf32", "")
TLB_WGMMA_SS(wgmma_m64n256k16_f16, 128, "%128, %129", "%130",
             "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16", ", 0, 0")
TLB_WGMMA_SS(wgmma_m64n256k16_bf16, 128, "%128, %129", "%130",
             "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16", ", 0, 0")
TLB_WGMMA_SS(wgmma_m64n256k8_tf32, 128, "%128, %129", "%130",
             "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32", "")

// ---- wgmma with A from registers (attention: P lives in registers). Per warp of the
// warpgroup, `a` is the m16n8k16 A fragment of rows 16w..16w+15 (a0: row g, k 2t..2t+1;
// a1: row g+8; a2: row g, k 2t+8..; a3: row g+8, k 2t+8..); d is in the accumulator layout
// described above and accumulates unless `accumulate` is 0 (then d = A*B). kTransB = 0: B is
// K-major; 1: B is MN-major (N contiguous, e.g. V stored [keys][head_dim]).
TLB_WGMMA_RS(wgmma_m64n32k16_rs_f16, 16, "{%16, %17, %18, %19}", "%20", "%21", "%22",
             "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16")
TLB_WGMMA_RS(wgmma_m64n32k16_rs_bf16, 16, "{%16, %17, %18, %19}", "%20", "%21", "%22",
             "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16")
TLB_WGMMA_RS(wgmma_m64n64k16_rs_f16, 32, "{%32, %33, %34, %35}", "%36", "%37", "%38",
             "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16")
TLB_WGMMA_RS(wgmma_m64n64k16_rs_bf16, 32, "{%32, %33, %34, %35}", "%36", "%37", "%38",
             "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16")
TLB_WGMMA_RS(wgmma_m64n80k16_rs_f16, 40, "{%40, %41, %42, %43}", "%44", "%45", "%46",
             "wgmma.mma_async.sync.aligned.m64n80k16.f32.f16.f16")
TLB_WGMMA_RS(wgmma_m64n80k16_rs_bf16, 40, "{%40, %41, %42, %43}", "%44", "%45", "%46",
             "wgmma.mma_async.sync.aligned.m64n80k16.f32.bf16.bf16")
TLB_WGMMA_RS(wgmma_m64n96k16_rs_f16, 48, "{%48, %49, %50, %51}", "%52", "%53", "%54",
             "wgmma.mma_async.sync.aligned.m64n96k16.f32.f16.f16")
TLB_WGMMA_RS(wgmma_m64n96k16_rs_bf16, 48, "{%48, %49, %50, %51}", "%52", "%53", "%54",
             "wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16.bf16")
TLB_WGMMA_RS(wgmma_m64n128k16_rs_f16, 64, "{%64, %65, %66, %67}", "%68", "%69", "%70",
             "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16")
TLB_WGMMA_RS(wgmma_m64n128k16_rs_bf16, 64, "{%64, %65, %66, %67}", "%68", "%69", "%70",
             "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16")
TLB_WGMMA_RS(wgmma_m64n192k16_rs_f16, 96, "{%96, %97, %98, %99}", "%100", "%101", "%102",
             "wgmma.mma_async.sync.aligned.m64n192k16.f32.f16.f16")
TLB_WGMMA_RS(wgmma_m64n192k16_rs_bf16, 96, "{%96, %97, %98, %99}", "%100", "%101", "%102",
             "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16")
TLB_WGMMA_RS(wgmma_m64n256k16_rs_f16, 128, "{%128, %129, %130, %131}", "%132", "%133", "%134",
             "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16")
TLB_WGMMA_RS(wgmma_m64n256k16_rs_bf16, 128, "{%128, %129, %130, %131}", "%132", "%133", "%134",
             "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16")

// Descriptor of a 128-byte-swizzled operand tile (1024-byte aligned atoms of 8 rows x 128
// bytes) with explicit byte offsets: for a K-major operand `sbo` steps 8 rows of M/N and
// `lbo` is unused; for an MN-major operand `lbo` steps the next 64 (16-bit) elements of M/N
// and `sbo` the next 8 rows of K.
__device__ __forceinline__ uint64_t wgmma_desc_sw128(uint32_t smem_addr, uint32_t lbo, uint32_t sbo) {
  uint64_t d = 0;
  d |= static_cast<uint64_t>((smem_addr & 0x3ffffu) >> 4);
  d |= static_cast<uint64_t>((lbo & 0x3ffffu) >> 4) << 16;
  d |= static_cast<uint64_t>((sbo & 0x3ffffu) >> 4) << 32;
  d |= static_cast<uint64_t>(1) << 62;
  return d;
}

// The descriptor of the operand `bytes` (a multiple of 16) further into shared memory than d's:
// the start address is the low field (address / 16, 14 bits) and shared memory ends below
// 2^18 bytes, so the add never carries into the strides. One add on the low word, where
// building a descriptor afresh costs a handful of masks and shifts per MMA.
__device__ __forceinline__ uint64_t wgmma_desc_advance(uint64_t d, uint32_t bytes) {
  const uint32_t lo = static_cast<uint32_t>(d) + (bytes >> 4);
  return (d & 0xffffffff00000000ull) | lo;
}

// A from registers in tf32: a is the m16n8k8 tf32 A fragment of rows 16w..16w+15 (a0: row g,
// k t; a1: row g+8, k t; a2: row g, k t+4; a3: row g+8, k t+4). B is K-major (tf32 has no
// transposed form).
#define TLB_WGMMA_RS_TF32(NAME, NACC, AREGS, DESCB, PRED, INSTR)                              \
  __device__ __forceinline__ void NAME(float(&d)[NACC], const uint32_t(&a)[4], uint64_t desc_b, \
                                       int accumulate) {                                       \
    TLB_SM90A_ASM("{\n.reg .pred p;\nsetp.ne.b32 p, " PRED ", 0;\n" INSTR " "                  \
                  TLB_WGMMA_ACC##NACC##_REGS ", " AREGS ", " DESCB ", p, 1, 1;\n}\n"           \
                  : TLB_WGMMA_ACC##NACC##_OPS(d)                                               \
                  : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate)); \
  }
TLB_WGMMA_RS_TF32(wgmma_m64n32k8_rs_tf32, 16, "{%16, %17, %18, %19}", "%20", "%21",
                  "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32")
TLB_WGMMA_RS_TF32(wgmma_m64n64k8_rs_tf32, 32, "{%32, %33, %34, %35}", "%36", "%37",
                  "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32")
TLB_WGMMA_RS_TF32(wgmma_m64n96k8_rs_tf32, 48, "{%48, %49, %50, %51}", "%52", "%53",
                  "wgmma.mma_async.sync.aligned.m64n96k8.f32.tf32.tf32")
TLB_WGMMA_RS_TF32(wgmma_m64n128k8_rs_tf32, 64, "{%64, %65, %66, %67}", "%68", "%69",
                  "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32")

// ---- One name for every compiled shape: wgmma_ss<T, N> (A and B from shared memory, both
// K-major) and wgmma_rs<T, N, kTransB> (A from registers), T = __half, __nv_bfloat16 or float
// (tf32: k8 steps, B K-major only). A shape that has no wrapper above fails to compile.
template <typename T, int N>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  constexpr bool kTf32 = std::is_same_v<T, float>, kBf16 = std::is_same_v<T, __nv_bfloat16>;
#define TLB_WGMMA_SS_CASE(n)                                                       \
  if constexpr (N == n) {                                                          \
    if constexpr (kBf16) wgmma_m64n##n##k16_bf16(d, desc_a, desc_b, accumulate);  \
    else wgmma_m64n##n##k16_f16(d, desc_a, desc_b, accumulate);                   \
    return;                                                                        \
  }
  if constexpr (kTf32) {
    static_assert(N == 64 || N == 128 || N == 256, "no tf32 wgmma_ss wrapper for this N");
    if constexpr (N == 64) wgmma_m64n64k8_tf32(d, desc_a, desc_b, accumulate);
    else if constexpr (N == 128) wgmma_m64n128k8_tf32(d, desc_a, desc_b, accumulate);
    else wgmma_m64n256k8_tf32(d, desc_a, desc_b, accumulate);
  } else {
    TLB_WGMMA_SS_CASE(64) TLB_WGMMA_SS_CASE(80) TLB_WGMMA_SS_CASE(96) TLB_WGMMA_SS_CASE(112)
    TLB_WGMMA_SS_CASE(128) TLB_WGMMA_SS_CASE(144) TLB_WGMMA_SS_CASE(160) TLB_WGMMA_SS_CASE(176)
    TLB_WGMMA_SS_CASE(192) TLB_WGMMA_SS_CASE(256)
    static_assert(N == 64 || N == 80 || N == 96 || N == 112 || N == 128 || N == 144 || N == 160 || N == 176 ||
                      N == 192 || N == 256,
                  "no wgmma_ss wrapper for this N");
  }
#undef TLB_WGMMA_SS_CASE
}
template <typename T, int N, int kTransB>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b, int accumulate) {
  constexpr bool kTf32 = std::is_same_v<T, float>, kBf16 = std::is_same_v<T, __nv_bfloat16>;
#define TLB_WGMMA_RS_CASE(n)                                                              \
  if constexpr (N == n) {                                                                 \
    if constexpr (kBf16) wgmma_m64n##n##k16_rs_bf16<kTransB>(d, a, desc_b, accumulate);  \
    else wgmma_m64n##n##k16_rs_f16<kTransB>(d, a, desc_b, accumulate);                   \
    return;                                                                               \
  }
  if constexpr (kTf32) {
    static_assert(kTransB == 0, "tf32 wgmma reads B K-major only");
    static_assert(N == 32 || N == 64 || N == 96 || N == 128, "no tf32 wgmma_rs wrapper for this N");
    if constexpr (N == 32) wgmma_m64n32k8_rs_tf32(d, a, desc_b, accumulate);
    else if constexpr (N == 64) wgmma_m64n64k8_rs_tf32(d, a, desc_b, accumulate);
    else if constexpr (N == 96) wgmma_m64n96k8_rs_tf32(d, a, desc_b, accumulate);
    else wgmma_m64n128k8_rs_tf32(d, a, desc_b, accumulate);
  } else {
    TLB_WGMMA_RS_CASE(32) TLB_WGMMA_RS_CASE(64) TLB_WGMMA_RS_CASE(80) TLB_WGMMA_RS_CASE(96)
    TLB_WGMMA_RS_CASE(128) TLB_WGMMA_RS_CASE(192) TLB_WGMMA_RS_CASE(256)
    static_assert(N == 32 || N == 64 || N == 80 || N == 96 || N == 128 || N == 192 || N == 256,
                  "no wgmma_rs wrapper for this N");
  }
#undef TLB_WGMMA_RS_CASE
}

}  // namespace tlb::ptx
