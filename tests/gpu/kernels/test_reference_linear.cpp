// The reference GEMM on cuBLAS in each precision against an fp64 host product, on fresh random
// fp32 operands: `standard` and `pedantic` hold fp32 accuracy, `tf32` (the fused path's fp32 in
// TF32 math) is visibly coarser and within TF32's bound, so a label that says TF32 without TF32
// running, or TF32 leaking into the reference, shows up. fp16 is the same in every precision.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "gpu_test_util.hpp"
#include "reference/linear_cublas.hpp"
#include "test_support.hpp"

namespace {

using tlb::DeviceBuffer;
using tlb::DType;
using tlb::reference::GemmPrecision;

// C = A · W^T through reference::linear on the test's own handle and workspace, copied back.
std::vector<float> run_linear(const std::vector<float>& a, const std::vector<float>& w, int64_t M, int64_t N,
                              int64_t K, GemmPrecision p, cudaStream_t stream) {
  DeviceBuffer da(a.size() * 4), dw(w.size() * 4), dc(static_cast<size_t>(M * N) * 4), ws(32u << 20);
  TLB_CUDA_CHECK(cudaMemcpy(da.get(), a.data(), a.size() * 4, cudaMemcpyHostToDevice));
  TLB_CUDA_CHECK(cudaMemcpy(dw.get(), w.data(), w.size() * 4, cudaMemcpyHostToDevice));
  tlb::reference::BlasHandle blas;
  tlb::reference::configure_handle(blas.h, stream, ws.get(), 32u << 20);
  tlb::reference::linear(blas.h, DType::fp32, p, M, N, K, da.get(), K, dw.get(), K, dc.get(), N, DType::fp32);
  TLB_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<float> c(static_cast<size_t>(M * N));
  TLB_CUDA_CHECK(cudaMemcpy(c.data(), dc.get(), c.size() * 4, cudaMemcpyDeviceToHost));
  return c;
}

double rel_l2(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

}  // namespace

TEST_CASE("reference GEMM precisions: IEEE fp32 holds fp32 accuracy, tf32 runs TF32", "[gpu][reference]") {
  TLB_REQUIRE_GPU();
  tlb::test::TestStream stream;
  // Odd M, K long enough that TF32's 10-bit mantissa shows in the sum.
  const int64_t M = 257, N = 136, K = 1600;
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> a(static_cast<size_t>(M * K)), w(static_cast<size_t>(N * K));
  for (float& x : a) x = u(rng);
  for (float& x : w) x = u(rng);
  std::vector<double> want(static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += static_cast<double>(a[m * K + k]) * w[n * K + k];
      want[static_cast<size_t>(m * N + n)] = s;
    }
  const double standard = rel_l2(run_linear(a, w, M, N, K, GemmPrecision::standard, stream.get()), want);
  const double pedantic = rel_l2(run_linear(a, w, M, N, K, GemmPrecision::pedantic, stream.get()), want);
  const double tf32 = rel_l2(run_linear(a, w, M, N, K, GemmPrecision::tf32, stream.get()), want);
  INFO("standard " << standard << ", pedantic " << pedantic << ", tf32 " << tf32);
  // fp32 accumulation of 1600 terms: a few 1e-7 relative at most (sqrt(K) x 2^-24 is 2.4e-6
  // in the worst random walk). TF32 rounds each operand to 10 mantissa bits: about 5e-4, far
  // above fp32's and far below a wrong result's.
  CHECK(standard < 1e-5);
  CHECK(pedantic < 1e-5);
  CHECK(tf32 > 1e-4);
  CHECK(tf32 < 5e-3);
}
