// The fused epilogue as a pass of its own over a finished fp32 product: what a GEMM that runs
// on cuBLAS (gemm_cublas.hpp) adds after it. Memory-bound: one read of the product (and of the
// residual), one write of the output.
#include <algorithm>
#include <cstdint>

#include "common/cuda_check.hpp"
#include "common/dtype_traits.cuh"
#include "common/launch.cuh"
#include "common/ptx.cuh"
#include "gemm/gemm_epilogue.cuh"
#include "gemm/gemm_internal.hpp"

namespace tlb::gemm_detail {
namespace {

// Eight warps a block: a row's runs (N / 4 for fp32, N / 8 for 16-bit) fill at least one
// block for N >= 1024 in fp32, and a block's loads are 4-8 KiB in flight.
constexpr int kPassThreads = 256;
// Blocks along a row (x, far under the 2^31 - 1 limit; past it the threads stride) and rows
// (y, at most the 65535 a grid's y allows; the blocks stride over the rest).
constexpr int64_t kMaxBlocksX = int64_t{1} << 16, kMaxBlocksY = 65535;

// Each thread takes 16-byte output runs of one row at a time: the run's fp32 product (row
// stride N) through the epilogue into the output. The product may be the output itself (fp32
// without head split): every run is read by the thread that writes it, before it writes it.
template <typename T>
__global__ void __launch_bounds__(kPassThreads) epilogue_pass_kernel(const GemmArgs p, const float* product) {
  ptx::pdl_wait();  // the product is the previous kernel's output
  ptx::pdl_launch_dependents();
  constexpr int kCount = Pack16<T>::kCount;
  const int64_t runs = p.N / kCount;
  for (int64_t m = blockIdx.y; m < p.M; m += gridDim.y) {
    for (int64_t r = static_cast<int64_t>(blockIdx.x) * kPassThreads + threadIdx.x; r < runs;
         r += static_cast<int64_t>(gridDim.x) * kPassThreads) {
      float v[kCount];
      load_staged_run<T>(product + m * p.N + r * kCount, v);
      epilogue_store<T>(p, m, r * kCount, v);
    }
  }
}

template <typename T>
void launch_pass(const GemmArgs& a, const float* product, cudaStream_t stream) {
  const int64_t runs = a.N / Pack16<T>::kCount;
  const auto x = static_cast<unsigned>(std::min<int64_t>((runs + kPassThreads - 1) / kPassThreads, kMaxBlocksX));
  const auto y = static_cast<unsigned>(std::min<int64_t>(a.M, kMaxBlocksY));
  launch_kernel(epilogue_pass_kernel<T>, dim3(x, y), dim3(kPassThreads), 0, stream, 1, a, product);
  TLB_LAUNCH_CHECK(stream);
}

}  // namespace

void launch_epilogue_pass(const GemmArgs& a, const float* product, cudaStream_t stream) {
  switch (a.dtype) {
    case DType::fp16: return launch_pass<__half>(a, product, stream);
    case DType::bf16: return launch_pass<__nv_bfloat16>(a, product, stream);
    default: return launch_pass<float>(a, product, stream);
  }
}

}  // namespace tlb::gemm_detail
