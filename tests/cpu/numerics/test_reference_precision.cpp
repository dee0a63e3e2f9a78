// The cuBLAS compute type of each GEMM precision: the reference's fp32 never TF32, the golden's
// pedantic, the fused path's fp32 in TF32 math on TF32 tensor cores; 16-bit types always with
// fp32 accumulation, whatever the precision asks of fp32.
#include <catch2/catch.hpp>

#include "reference/linear_cublas.hpp"

using tlb::DType;
using tlb::reference::compute_type;
using tlb::reference::GemmPrecision;

TEST_CASE("each GEMM precision maps to its cuBLAS compute type", "[numerics][reference]") {
  CHECK(compute_type(DType::fp32, GemmPrecision::standard) == CUBLAS_COMPUTE_32F);
  CHECK(compute_type(DType::fp32, GemmPrecision::pedantic) == CUBLAS_COMPUTE_32F_PEDANTIC);
  CHECK(compute_type(DType::fp32, GemmPrecision::tf32) == CUBLAS_COMPUTE_32F_FAST_TF32);
  for (DType d : {DType::fp16, DType::bf16})
    for (GemmPrecision p : {GemmPrecision::standard, GemmPrecision::pedantic, GemmPrecision::tf32})
      CHECK(compute_type(d, p) == CUBLAS_COMPUTE_32F);
}
