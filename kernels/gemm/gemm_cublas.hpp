// A technique's GEMM on cuBLAS: cuBLAS's product in fp32, then the fused epilogue (bias,
// activation, residual or head split) as a pass of its own over it (two kernels, hence the
// name "cublas+epilogue_pass"). That is what the `qkv` and `ffn` GEMMs run in fp32 `ieee`
// math: our plain-FMA kernel (gemm_fp32_fma.cu) measured 0.84-0.86x of cuBLAS's SGEMM on the
// GEMM table's layer GEMMs on an H200, 0.87-0.88x on an H100 once its tile paired W's
// columns, while the pass adds one read and one write of the output (1-3 % of those GEMMs'
// time). The attention's out-projection keeps its own rule (memory_plan.hpp: ours on the
// smallest products, where it joins the attention's chain of launches; cuBLAS elsewhere).
#pragma once

#include <cublas_v2.h>

#include <string>

#include "gemm/gemm.hpp"

namespace tlb {

// Whether `a` runs faster as cuBLAS's product and the epilogue pass than on gemm_fused: fp32
// in `ieee` math. `why` (where not null) gets the reason when it does.
bool gemm_prefers_cublas(const GemmArgs& a, std::string* why);

// Whether a.out can hold cuBLAS's fp32 product itself, the pass then working in place: an
// fp32 output without head split.
bool gemm_product_fits_output(const GemmArgs& a);

// Whether gemm_technique needs a product buffer for `a`: it runs on cuBLAS
// (gemm_prefers_cublas) and the output cannot hold the product.
bool gemm_technique_needs_product(const GemmArgs& a);

// Runs `a` as cuBLAS's product (on `h`, which must be bound to `stream`; fp32 `ieee` in plain
// fp32, TF32 where a.fp32_math says so) into `product`, then the epilogue pass into a's
// outputs. `product` is fp32 [M, N], 16-byte aligned, aliasing none of a's operands; it may be
// null where gemm_product_fits_output, the product then going to a.out. Throws
// std::invalid_argument where gemm_fused_supported is false, the product has nowhere to go or
// is misaligned, or h is bound to another stream (compared as handles: the
// legacy default stream and nullptr count as different).
// Returns the variant's name ("cublas+epilogue_pass").
std::string gemm_cublas_epilogue(cublasHandle_t h, const GemmArgs& a, float* product, cudaStream_t stream);

// A technique's GEMM as the layer stack runs it (and the GEMM table times it): cuBLAS's
// product and the pass where gemm_prefers_cublas (`product` a buffer where
// gemm_technique_needs_product, else null or ignored), else gemm_fused on `stream`. Returns
// the variant that ran.
std::string gemm_technique(cublasHandle_t h, const GemmArgs& a, float* product, cudaStream_t stream);

}  // namespace tlb
