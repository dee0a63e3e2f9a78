#include "reference/linear_cublas.hpp"

#include "common/cuda_check.hpp"

namespace tlb::reference {

BlasHandle::BlasHandle() { TLB_CUBLAS_CHECK(cublasCreate(&h)); }

BlasHandle::~BlasHandle() {
  if (h) cublasDestroy(h);
}

cudaDataType cuda_data_type(DType d) {
  switch (d) {
    case DType::fp16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

cublasComputeType_t compute_type(DType d, GemmPrecision p) {
  if (d == DType::fp32 && p == GemmPrecision::pedantic) return CUBLAS_COMPUTE_32F_PEDANTIC;
  if (d == DType::fp32 && p == GemmPrecision::tf32) return CUBLAS_COMPUTE_32F_FAST_TF32;
  return CUBLAS_COMPUTE_32F;
}

void configure_handle(cublasHandle_t handle, cudaStream_t stream, void* workspace,
                      uint64_t workspace_bytes) {
  TLB_CUBLAS_CHECK(cublasSetStream(handle, stream));
  TLB_CUBLAS_CHECK(cublasSetWorkspace(handle, workspace, workspace_bytes));
  // Default math (no TF32 for fp32 compute unless a GEMM's compute type asks for it), and
  // split-K partial sums of fp16/bf16 GEMMs stay in the fp32 accumulator instead of being
  // reduced in the output type.
  TLB_CUBLAS_CHECK(cublasSetMathMode(
      handle, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                        CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
}

void linear(cublasHandle_t handle, DType d, GemmPrecision p, int64_t M, int64_t N, int64_t K,
            const void* A, int64_t lda, const void* W, int64_t ldw, void* C, int64_t ldc,
            DType c_type) {
  const float alpha = 1.0f, beta = 0.0f;
  const cudaDataType t = cuda_data_type(d);
  // Column-major cuBLAS sees row-major C[M, N] as C^T[N, M] = W[N, K] · A^T[K, M]: W is read
  // transposed from its row-major [N, K] storage, A as stored.
  TLB_CUBLAS_CHECK(cublasGemmEx_64(handle, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha, W, t, ldw,
                                   A, t, lda, &beta, C, cuda_data_type(c_type), ldc,
                                   compute_type(d, p),
                                   CUBLAS_GEMM_DEFAULT));
}

}  // namespace tlb::reference
