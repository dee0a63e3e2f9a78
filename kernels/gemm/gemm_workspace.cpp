// The stream-K persistent GEMM's workspace (gemm_internal.hpp): one per device and stream
// (common/stream_scratch.hpp), so that GEMMs on different streams never share partial tiles or
// flags; the flags start at zero and each reader clears the one it read.
#include <cuda_runtime.h>

#include <cstddef>

#include "common/device_caps.hpp"
#include "common/stream_scratch.hpp"
#include "gemm/gemm_internal.hpp"

namespace tlb::gemm_detail {

StreamKWorkspace stream_k_workspace(cudaStream_t stream) {
  const int slots = 2 * device_caps().sms;
  const size_t partial_bytes = static_cast<size_t>(slots) * kStreamKPartialBytes;
  void* block = stream_scratch(stream, ScratchUse::gemm_stream_k, partial_bytes + static_cast<size_t>(slots) * sizeof(int));
  return {block, reinterpret_cast<int*>(static_cast<char*>(block) + partial_bytes), slots};
}

}  // namespace tlb::gemm_detail
