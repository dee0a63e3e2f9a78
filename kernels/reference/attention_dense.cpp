#include "reference/attention_dense.hpp"

#include <cstdint>

#include "common/cuda_check.hpp"
#include "common/types.hpp"
#include "reference/masked_softmax.hpp"

namespace tlb::reference {

int64_t dense_attention_pointer_count(int64_t batch, int64_t heads) { return 3 * batch * heads; }

std::vector<void*> dense_attention_pointer_table(const DenseAttentionArgs& a) {
  const int64_t bh = a.batch * a.heads;
  const int64_t e = dtype_bytes(a.dtype);
  const int64_t d = a.heads * a.head_dim;
  // One table type for all three operands; cuBLAS only reads through the V and P entries.
  std::vector<void*> t(static_cast<size_t>(3 * bh));
  char* v = static_cast<char*>(const_cast<void*>(a.v));
  char* p = static_cast<char*>(a.probs);
  char* o = static_cast<char*>(a.o);
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < a.heads; ++h) {
      const int64_t z = b * a.heads + h;
      t[static_cast<size_t>(z)] = v + z * a.seq * a.head_dim * e;
      t[static_cast<size_t>(bh + z)] = p + z * a.seq * a.seq * e;
      t[static_cast<size_t>(2 * bh + z)] = o + (b * a.seq * d + h * a.head_dim) * e;
    }
  return t;
}

bool dense_attention_pointers_aligned(const DenseAttentionArgs& a) {
  // cuBLAS can read the base pointers and strides of a strided batch, but not the entries of a
  // pointer table in device memory: use the table only where every entry is 16-byte aligned,
  // which is what its tensor-core kernels may assume.
  const uint64_t e = static_cast<uint64_t>(dtype_bytes(a.dtype));
  const uint64_t s = static_cast<uint64_t>(a.seq), dh = static_cast<uint64_t>(a.head_dim);
  const uint64_t d = static_cast<uint64_t>(a.heads) * dh;
  auto aligned = [](uint64_t x) { return x % 16 == 0; };
  return aligned(reinterpret_cast<uintptr_t>(a.v)) && aligned(reinterpret_cast<uintptr_t>(a.probs)) &&
         aligned(reinterpret_cast<uintptr_t>(a.o)) && aligned(s * dh * e) && aligned(s * s * e) &&
         aligned(s * d * e) && aligned(dh * e);
}

void attention_dense(cublasHandle_t handle, const DenseAttentionArgs& a) {
  cudaStream_t stream = nullptr;
  TLB_CUBLAS_CHECK(cublasGetStream(handle, &stream));
  const cudaDataType t = cuda_data_type(a.dtype);
  const cublasComputeType_t ct = compute_type(a.dtype, a.precision);
  const float one = 1.0f, zero = 0.0f;
  const int64_t bh = a.batch * a.heads;
  const int64_t s = a.seq, dh = a.head_dim, d = a.heads * a.head_dim;
  const int64_t e = dtype_bytes(a.dtype);

  // scores[z] (row-major [s, s], fp32) = q[z] · k[z]^T: the Linear form with W = k (see
  // linear()); inputs in the dtype, the fp32 accumulator stored as it is.
  TLB_CUBLAS_CHECK(cublasGemmStridedBatchedEx_64(
      handle, CUBLAS_OP_T, CUBLAS_OP_N, s, s, dh, &one, a.k, t, dh, s * dh, a.q, t, dh, s * dh,
      &zero, a.scores, CUDA_R_32F, s, s * s, bh, ct, CUBLAS_GEMM_DEFAULT));

  masked_softmax(a.dtype, a.scores, a.probs, a.batch, a.heads, a.seq, a.mask, a.valid_lens,
                 a.scale, stream);

  // o[b, :, h*dh:(h+1)*dh] (row-major [s, dh], row stride d) = P[z] · v[z]. Column-major
  // cuBLAS computes its transpose, o^T = v^T · P^T, with both operands read as stored. Heads
  // of one batch element are a strided batch (output stride dh); batch elements are not (their
  // stride is seq*d), so all of them go in one call through the pointer table, or, where its
  // entries are not all aligned, one call per batch element.
  if (a.pv_pointers != nullptr && dense_attention_pointers_aligned(a)) {
    const void* const* v_ptrs = a.pv_pointers;
    const void* const* p_ptrs = a.pv_pointers + bh;
    void* const* o_ptrs = a.pv_pointers + 2 * bh;
    TLB_CUBLAS_CHECK(cublasGemmBatchedEx_64(handle, CUBLAS_OP_N, CUBLAS_OP_N, dh, s, s, &one,
                                            v_ptrs, t, dh, p_ptrs, t, s, &zero, o_ptrs, t, d, bh,
                                            ct, CUBLAS_GEMM_DEFAULT));
    return;
  }
  for (int64_t b = 0; b < a.batch; ++b) {
    const char* v = static_cast<const char*>(a.v) + b * a.heads * s * dh * e;
    const char* p = static_cast<const char*>(a.probs) + b * a.heads * s * s * e;
    char* o = static_cast<char*>(a.o) + b * s * d * e;
    TLB_CUBLAS_CHECK(cublasGemmStridedBatchedEx_64(handle, CUBLAS_OP_N, CUBLAS_OP_N, dh, s, s,
                                                   &one, v, t, dh, s * dh, p, t, s, s * s, &zero,
                                                   o, t, d, dh, a.heads, ct, CUBLAS_GEMM_DEFAULT));
  }
}

}  // namespace tlb::reference
