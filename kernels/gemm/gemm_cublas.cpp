#include "gemm/gemm_cublas.hpp"

#include <cstdint>
#include <stdexcept>

#include "common/cuda_check.hpp"
#include "gemm/gemm_internal.hpp"
#include "reference/linear_cublas.hpp"

namespace tlb {

bool gemm_prefers_cublas(const GemmArgs& a, std::string* why) {
  if (a.dtype != DType::fp32 || a.fp32_math != Fp32Math::ieee) return false;
  if (why) *why = "fp32 ieee: cuBLAS's SGEMM is faster than our plain-FMA GEMM";
  return true;
}

bool gemm_product_fits_output(const GemmArgs& a) {
  return a.dtype == DType::fp32 && a.epilogue != GemmEpilogue::bias_qkv_split;
}

bool gemm_technique_needs_product(const GemmArgs& a) {
  return gemm_prefers_cublas(a, nullptr) && !gemm_product_fits_output(a);
}

std::string gemm_cublas_epilogue(cublasHandle_t h, const GemmArgs& a, float* product, cudaStream_t stream) {
  std::string why;
  if (!gemm_fused_supported(a, &why)) throw std::invalid_argument("gemm_cublas_epilogue: " + why);
  const bool in_place = product == nullptr;
  if (in_place && !gemm_product_fits_output(a))
    throw std::invalid_argument(
        "gemm_cublas_epilogue: only an fp32 output without head split can hold the product");
  if (reinterpret_cast<uintptr_t>(product) % 16 != 0)
    throw std::invalid_argument("gemm_cublas_epilogue: the product buffer must be 16-byte aligned");
  cudaStream_t bound = nullptr;
  TLB_CUBLAS_CHECK(cublasGetStream(h, &bound));
  if (bound != stream)
    throw std::invalid_argument("gemm_cublas_epilogue: the cuBLAS handle is bound to another stream");
  float* c = in_place ? static_cast<float*>(a.out) : product;
  const reference::GemmPrecision p = a.dtype == DType::fp32 && a.fp32_math == Fp32Math::tf32
                                         ? reference::GemmPrecision::tf32
                                         : reference::GemmPrecision::standard;
  reference::linear(h, a.dtype, p, a.M, a.N, a.K, a.A, a.K, a.W, a.K, c, a.N, DType::fp32);
  gemm_detail::launch_epilogue_pass(gemm_detail::with_split_map(a), c, stream);
  return "cublas+epilogue_pass";
}

std::string gemm_technique(cublasHandle_t h, const GemmArgs& a, float* product, cudaStream_t stream) {
  return gemm_prefers_cublas(a, nullptr) ? gemm_cublas_epilogue(h, a, product, stream) : gemm_fused(a, stream);
}

}  // namespace tlb
