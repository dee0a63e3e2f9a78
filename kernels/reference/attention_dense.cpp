#include "reference/attention_dense.hpp"

#include <stdexcept>

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
  char* p = static_cast<char*>(a.scores);
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

void attention_dense(cublasHandle_t handle, const DenseAttentionArgs& a) {
  if (a.pv_pointers == nullptr)
    throw std::invalid_argument("dense attention: the P·V pointer table is missing");
  cudaStream_t stream = nullptr;
  TLB_CUBLAS_CHECK(cublasGetStream(handle, &stream));
  const cudaDataType t = cuda_data_type(a.dtype);
  const cublasComputeType_t ct = compute_type(a.dtype, a.precision);
  const float one = 1.0f, zero = 0.0f;
  const int64_t bh = a.batch * a.heads;
  const int64_t s = a.seq, dh = a.head_dim, d = a.heads * a.head_dim;

  // scores[z] (row-major [s, s]) = q[z] · k[z]^T: the Linear form with W = k (see linear()).
  TLB_CUBLAS_CHECK(cublasGemmStridedBatchedEx_64(
      handle, CUBLAS_OP_T, CUBLAS_OP_N, s, s, dh, &one, a.k, t, dh, s * dh, a.q, t, dh, s * dh,
      &zero, a.scores, t, s, s * s, bh, ct, CUBLAS_GEMM_DEFAULT));

  masked_softmax(a.dtype, a.scores, a.batch, a.heads, a.seq, a.mask, a.valid_lens, a.scale,
                 stream);

  // o[b, :, h*dh:(h+1)*dh] (row-major [s, dh], row stride d) = P[z] · v[z]. Column-major
  // cuBLAS computes its transpose, o^T = v^T · P^T, with both operands read as stored.
  const void* const* v_ptrs = a.pv_pointers;
  const void* const* p_ptrs = a.pv_pointers + bh;
  void* const* o_ptrs = a.pv_pointers + 2 * bh;
  TLB_CUBLAS_CHECK(cublasGemmBatchedEx_64(handle, CUBLAS_OP_N, CUBLAS_OP_N, dh, s, s, &one,
                                          v_ptrs, t, dh, p_ptrs, t, s, &zero, o_ptrs, t, d, bh,
                                          ct, CUBLAS_GEMM_DEFAULT));
}

}  // namespace tlb::reference
