// The stream-K persistent GEMM's workspace (gemm_internal.hpp): one per device and stream, so
// that GEMMs on different streams never share partial tiles or flags, made on first use and
// kept for the life of the process (graphs captured from a stream hold its pointers, so it is
// never moved or freed; the CUDA context reclaims it at exit).
#include <cuda_runtime.h>

#include <cstddef>
#include <map>
#include <mutex>
#include <utility>

#include "common/cuda_check.hpp"
#include "common/device_caps.hpp"
#include "gemm/gemm_internal.hpp"

namespace tlb::gemm_detail {
namespace {

// Made under the relaxed capture mode, so a GEMM captured into a graph before any eager launch
// on its stream may still allocate; the flags are zeroed on a private stream the capture does
// not see, so they are zero for eager launches and graph replays alike.
StreamKWorkspace allocate(int slots) {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  TLB_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  StreamKWorkspace ws{nullptr, nullptr, slots};
  const size_t partial_bytes = static_cast<size_t>(slots) * kStreamKPartialBytes;
  void* block = nullptr;
  TLB_CUDA_CHECK(cudaMalloc(&block, partial_bytes + static_cast<size_t>(slots) * sizeof(int)));
  ws.partials = block;
  ws.ready = reinterpret_cast<int*>(static_cast<char*>(block) + partial_bytes);
  cudaStream_t zeroing = nullptr;
  TLB_CUDA_CHECK(cudaStreamCreateWithFlags(&zeroing, cudaStreamNonBlocking));
  TLB_CUDA_CHECK(cudaMemsetAsync(ws.ready, 0, static_cast<size_t>(slots) * sizeof(int), zeroing));
  TLB_CUDA_CHECK(cudaStreamSynchronize(zeroing));
  TLB_CUDA_CHECK(cudaStreamDestroy(zeroing));
  TLB_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  return ws;
}

}  // namespace

StreamKWorkspace stream_k_workspace(cudaStream_t stream) {
  // Never destroyed: freeing device memory from a static destructor runs after the runtime
  // may have shut down.
  static auto* const workspaces = new std::map<std::pair<int, cudaStream_t>, StreamKWorkspace>;
  static std::mutex mu;
  int device = 0;
  TLB_CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_pair(device, stream);
  auto it = workspaces->find(key);
  if (it == workspaces->end()) it = workspaces->emplace(key, allocate(2 * device_caps().sms)).first;
  return it->second;
}

}  // namespace tlb::gemm_detail
