#include "timing/ceilings.hpp"

#include <cublas_v2.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "reference/linear_cublas.hpp"
#include "stack/generate.hpp"
#include "timing/event_timer.hpp"

namespace tlb {
namespace {

// Median event-timed ms of `work` after it has run back to back for `warm_s` seconds.
double median_ms(const std::function<void()>& work, cudaStream_t stream, double warm_s, int reps) {
  const auto start = std::chrono::steady_clock::now();
  do {
    work();
    TLB_CUDA_CHECK(cudaStreamSynchronize(stream));
  } while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < warm_s);
  EventTimer timer(stream);
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) ms.push_back(timer.ms(work));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

std::string ceiling_math(DType dtype, Fp32Math math) {
  if (dtype != DType::fp32) return std::string(to_string(dtype));
  return math == Fp32Math::tf32 ? "fp32-tf32" : "fp32-ieee";
}

MeasuredCeilings measure_ceilings(DType dtype, Fp32Math math, cudaStream_t stream) {
  MeasuredCeilings r;
  r.gemm_math = ceiling_math(dtype, math);
  // A square GEMM large enough to fill every SM many times over, on data drawn like the
  // layer's (a GEMM over zeros draws less power and would clock higher than any stage).
  r.gemm_n = 8192;
  const int64_t n = r.gemm_n, elems = n * n;
  const auto bytes = static_cast<size_t>(elems) * static_cast<size_t>(dtype_bytes(dtype));
  DeviceBuffer a(bytes), w(bytes), c(bytes);
  TensorDist dist;
  dist.kind = DistKind::uniform;
  dist.bound = 1.0;
  dist.key = 0x5eed0001;
  generate_tensor(a.get(), dtype, dtype, dist, elems, stream);
  dist.key = 0x5eed0002;
  generate_tensor(w.get(), dtype, dtype, dist, elems, stream);
  reference::BlasHandle blas;
  TLB_CUBLAS_CHECK(cublasSetStream(blas.h, stream));
  const cublasComputeType_t compute =
      dtype == DType::fp32 && math == Fp32Math::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const float one = 1.0f, zero = 0.0f;
  const cudaDataType_t t = reference::cuda_data_type(dtype);
  r.gemm_ms = median_ms(
      [&] {
        TLB_CUBLAS_CHECK(cublasGemmEx(blas.h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(n),
                                      static_cast<int>(n), &one, w.get(), t, static_cast<int>(n), a.get(), t,
                                      static_cast<int>(n), &zero, c.get(), t, static_cast<int>(n), compute,
                                      CUBLAS_GEMM_DEFAULT));
      },
      stream, 0.5, 10);
  r.ceilings.tensor_tflops = 2.0 * static_cast<double>(n) * n * n / (r.gemm_ms * 1e-3) / 1e12;

  // A copy far larger than L2: what reaches HBM.
  r.copy_bytes = uint64_t{1} << 30;
  DeviceBuffer src(r.copy_bytes), dst(r.copy_bytes);
  TLB_CUDA_CHECK(cudaMemsetAsync(src.get(), 1, r.copy_bytes, stream));
  r.copy_ms = median_ms(
      [&] {
        TLB_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), r.copy_bytes, cudaMemcpyDeviceToDevice, stream));
      },
      stream, 0.5, 10);
  r.ceilings.bandwidth_gbs = 2.0 * static_cast<double>(r.copy_bytes) / (r.copy_ms * 1e-3) / 1e9;
  return r;
}

}  // namespace tlb
