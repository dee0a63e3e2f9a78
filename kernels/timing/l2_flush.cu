// L2 flush: streams 16-byte stores over a buffer at least twice the L2 size, so a timed run
// that follows starts with none of the previous run's data cached. Fuses nothing; any size
// that is a multiple of 16 bytes.
#include "timing/l2_flush.hpp"

#include <cstdint>

#include "common/cuda_check.hpp"

namespace tlb {

namespace {

__global__ void l2_flush_kernel(uint4* buffer, size_t count, unsigned value) {
  const uint4 v = make_uint4(value, value + 1u, value + 2u, value + 3u);
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    buffer[i] = v;
}

}  // namespace

void launch_l2_flush(void* buffer, size_t bytes, unsigned value, cudaStream_t stream) {
  const size_t count = bytes / sizeof(uint4);
  if (count == 0) return;
  constexpr int kThreads = 256;
  // Enough blocks to keep every SM's store path busy; the grid-stride loop covers the rest.
  const size_t wanted = (count + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(wanted < 4096 ? wanted : 4096);
  l2_flush_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<uint4*>(buffer), count, value);
  TLB_LAUNCH_CHECK(stream);
}

}  // namespace tlb
