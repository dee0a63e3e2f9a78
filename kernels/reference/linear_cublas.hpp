// The reference path's GEMMs on cuBLAS: PyTorch's Linear (y = x · W^T) for row-major tensors,
// always with fp32 accumulation and, for fp32 data, never TF32 (`tf32` below is for the one
// GEMM a technique leaves on cuBLAS).
#pragma once

#include <cublas_v2.h>
#include <library_types.h>

#include <cstdint>

#include "common/types.hpp"

namespace tlb::reference {

// How an fp32 GEMM may run. `standard` is cuBLAS's CUBLAS_COMPUTE_32F, which its header
// defines as keeping at least fp32 precision and range internally (TF32 needs the _FAST_TF32
// type or the TF32 math mode, neither of which the reference sets): what a careful engineer's
// fp32 reference uses. `pedantic` (CUBLAS_COMPUTE_32F_PEDANTIC) also rules out emulation and
// any other algorithmic shortcut: the golden. `tf32` (CUBLAS_COMPUTE_32F_FAST_TF32: TF32 inputs
// on the tensor cores, fp32 accumulation) is the fused path's fp32 in its default TF32 math,
// for a GEMM a technique leaves on cuBLAS (the attention's out-projection where cuBLAS is the
// faster). fp16/bf16 always use CUBLAS_COMPUTE_32F.
enum class GemmPrecision : int { standard = 0, pedantic = 1, tf32 = 2 };

// Owner of a cuBLAS handle (created with the object, destroyed with it).
struct BlasHandle {
  cublasHandle_t h = nullptr;
  BlasHandle();
  ~BlasHandle();
  BlasHandle(const BlasHandle&) = delete;
  BlasHandle& operator=(const BlasHandle&) = delete;
};

cudaDataType cuda_data_type(DType d);
cublasComputeType_t compute_type(DType d, GemmPrecision p);

// Configures a handle the way every reference GEMM expects: bound to `stream`, using the
// caller's workspace (so CUDA-graph capture never allocates), split-K reductions kept in fp32.
void configure_handle(cublasHandle_t handle, cudaStream_t stream, void* workspace,
                      uint64_t workspace_bytes);

// C[M, N] = A[M, K] · W[N, K]^T, all row-major with leading dimensions lda, ldw, ldc (in
// elements), A and W in dtype `d`, C in `c_type` (the dtype, or fp32 to keep the accumulator
// unrounded), on the handle's stream.
void linear(cublasHandle_t handle, DType d, GemmPrecision p, int64_t M, int64_t N, int64_t K,
            const void* A, int64_t lda, const void* W, int64_t ldw, void* C, int64_t ldc,
            DType c_type);

}  // namespace tlb::reference
