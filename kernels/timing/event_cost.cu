// The event probe's link (event_cost.hpp): a kernel of one warp that does nothing.
#include "common/cuda_check.hpp"
#include "timing/event_cost.hpp"

namespace tlb::detail {

namespace {
__global__ void empty_kernel() {}
}  // namespace

void launch_empty_kernel(cudaStream_t stream) {
  empty_kernel<<<1, 32, 0, stream>>>();
  TLB_LAUNCH_CHECK(stream);
}

}  // namespace tlb::detail
