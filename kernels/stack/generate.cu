// Device fill from the counter-based generator: one thread per element (grid-stride), the
// same double-precision sample() the host runs, rounded once to the working dtype and stored.
// Any tensor size; 64-bit indices.
#include "stack/generate.hpp"

#include <algorithm>

#include "common/cuda_check.hpp"
#include "common/dtype_traits.cuh"

namespace tlb {
namespace {

template <typename T>
__global__ void generate_kernel(T* __restrict__ dst, TensorDist dist, DType rounding, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    // The value is already representable in T, so the conversion is exact.
    dst[i] = from_float<T>(sample_rounded(dist, static_cast<uint64_t>(i), rounding));
  }
}

}  // namespace

void generate_tensor(void* dst, DType storage, DType rounding, const TensorDist& dist, int64_t n,
                     cudaStream_t stream) {
  if (n <= 0) return;
  constexpr int kThreads = 256;
  const int64_t blocks = std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, int64_t{1} << 16);
  dispatch_dtype(storage, [&](auto tag) {
    using T = decltype(tag);
    generate_kernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        static_cast<T*>(dst), dist, rounding, n);
    TLB_LAUNCH_CHECK(stream);
  });
}

}  // namespace tlb
