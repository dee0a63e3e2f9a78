// Inline-PTX primitives shared by the tensor-core kernels (GEMM, attention): ldmatrix,
// mma.sync (fp16/bf16 m16n8k16, tf32 m16n8k8, fp32 accumulate) and cp.async with zero-fill;
// and by every kernel: PDL, flags between CTAs, the global timer.
// Every operand fragment layout here is the one the PTX ISA documents for that instruction.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace tlb::ptx {

// Shared-state-space address of a generic pointer into shared memory (what ldmatrix,
// cp.async and friends take).
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---- ldmatrix: four 8x8 b16 matrices; lanes 8j..8j+7 give the row addresses of matrix j,
// and register j of lane l receives row l/4, 32-bit word l%4 of matrix j (for 32-bit data the
// same call hands each lane one element, which is what the tf32 fragments need).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
// Transposed: register j of lane l receives column l/4 (as two b16 halves at rows 2(l%4),
// 2(l%4)+1) of matrix j; used for operands stored k-outer (e.g. V in attention).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t (&r)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr));
}

// ---- mma.sync m16n8k16, row.col, fp32 accumulate in place: d += a * b.
// a: 4 regs (two b16 each) = rows g/g+8, k 2t..2t+1 and 2t+8..2t+9 (g = lane/4, t = lane%4);
// b: 2 regs = k 2t..2t+1 / 2t+8..2t+9 at column g; d: rows g/g+8, columns 2t, 2t+1.
__device__ __forceinline__ void mma_m16n8k16_f16(float (&d)[4], const uint32_t (&a)[4],
                                                 const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4],
                                                  const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// Picks the instruction from the storage type (__half or __nv_bfloat16).
template <typename T>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4],
                                             const uint32_t (&b)[2]) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    mma_m16n8k16_bf16(d, a, b);
  } else {
    mma_m16n8k16_f16(d, a, b);
  }
}

// ---- mma.sync m16n8k8 tf32, fp32 accumulate: a = rows g/g+8 at k t and t+4 (a0: g,t;
// a1: g+8,t; a2: g,t+4; a3: g+8,t+4); b = k t / t+4 at column g. Operands must already be
// tf32 (see to_tf32).
__device__ __forceinline__ void mma_m16n8k8_tf32(float (&d)[4], const uint32_t (&a)[4],
                                                 const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// fp32 bits -> tf32 bits, round to nearest (ties away), so the tensor cores see a rounded
// operand rather than a truncated one.
__device__ __forceinline__ uint32_t to_tf32(uint32_t fp32_bits) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(__uint_as_float(fp32_bits)));
  return r;
}

// ---- cp.async: global -> shared copies, grouped by commit; the 16-byte ones bypass L1 (.cg).
__device__ __forceinline__ void cp_async_16(uint32_t smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem), "l"(gmem));
}
// When `valid` is false nothing is read (src-size 0) and the 16 shared bytes become zero:
// tails of a tile are padded without touching memory past the tensor. `gmem` must still be
// a valid address (callers pass the tensor base).
__device__ __forceinline__ void cp_async_16_zfill(uint32_t smem, const void* gmem, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(gmem),
               "r"(src_bytes));
}
// The 4-byte forms go through L1 (.ca: .cg takes only 16 bytes); they let a copy transpose
// element by element. Same zero-fill rule.
__device__ __forceinline__ void cp_async_4(uint32_t smem, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem), "l"(gmem));
}
__device__ __forceinline__ void cp_async_4_zfill(uint32_t smem, const void* gmem, bool valid) {
  const int src_bytes = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem), "l"(gmem), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most `kPending` of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::); }

// ---- 2^x on the special-function unit (ex2.approx.ftz, about 2 ulp; -inf gives +0): what the
// softmax kernels use, with log2(e) folded into their scale.
__device__ __forceinline__ float ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// ---- Pull the 128-byte line holding `p` into this SM's L1 (no register, no wait): for
// weights a kernel reads late, prefetched while it still waits for its inputs.
__device__ __forceinline__ void prefetch_l1(const void* p) {
  asm volatile("prefetch.global.L1 [%0];\n" ::"l"(p));
}

// ---- Programmatic dependent launch (sm_90+; no-ops below, where kernels launch without it).
// pdl_wait: block until the kernels this one depends on have finished and their writes are
// visible; every kernel launched with the PDL attribute calls it before touching activations.
// pdl_launch_dependents: let the next kernel in the stream start launching now (it still waits
// for this one to finish before touching memory).
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" :::);
#endif
}

// ---- A 64-bit word in shared memory by its shared-space address (what the mbarrier-guarded
// mailboxes of the warp-specialised kernels pass between warps).
__device__ __forceinline__ void st_shared_u64(uint32_t addr, uint64_t v) {
  asm volatile("st.shared.b64 [%0], %1;\n" ::"r"(addr), "l"(v) : "memory");
}
__device__ __forceinline__ uint64_t ld_shared_u64(uint32_t addr) {
  uint64_t v;
  asm volatile("ld.shared.b64 %0, [%1];\n" : "=l"(v) : "r"(addr) : "memory");
  return v;
}
// 16 bytes (a 16-byte aligned address).
__device__ __forceinline__ uint4 ld_shared_v4(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}

// ---- Flags between CTAs of one grid (gpu scope, sm_70+): a CTA publishes what its threads
// wrote to global memory by a barrier among them, then one thread's fence and store of the
// flag; the reader's one thread waits with acquiring loads, then a barrier, then its threads
// read (past L1, which is not coherent between SMs: ld.global.cg / __ldcg).
__device__ __forceinline__ void fence_acq_rel_gpu() { asm volatile("fence.acq_rel.gpu;\n" ::: "memory"); }
__device__ __forceinline__ void store_flag_relaxed_gpu(int* flag, int value) {
  asm volatile("st.relaxed.gpu.global.b32 [%0], %1;\n" ::"l"(flag), "r"(value) : "memory");
}
__device__ __forceinline__ int load_flag_acquire_gpu(const int* flag) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(flag) : "memory");
  return v;
}

// ---- %globaltimer: the GPU's nanosecond clock (its update granularity varies, 32 ns to 1 us
// across GPUs), for timeouts and clock probes.
__device__ __forceinline__ unsigned long long global_timer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

}  // namespace tlb::ptx
