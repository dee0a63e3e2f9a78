#include "common/stream_scratch.hpp"

#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>

#include "common/cuda_check.hpp"

namespace tlb {
namespace {

struct Block {
  void* ptr;
  size_t bytes;
};

// The thread's stream capture mode set to relaxed for the guard's lifetime, and given back
// however the scope ends (a failed check throws).
class RelaxedCapture {
 public:
  RelaxedCapture() { TLB_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode_)); }
  // Not checked: a destructor may not throw, and exchanging a mode the runtime gave out fails
  // only once the context is gone.
  ~RelaxedCapture() { (void)cudaThreadExchangeStreamCaptureMode(&mode_); }
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

// Made under the relaxed capture mode, so a kernel captured into a graph before any eager
// launch on its stream may still allocate; zeroed on a private stream the capture does not
// see, so the memory is zero for eager launches and graph replays alike.
Block allocate(size_t bytes) {
  const RelaxedCapture relaxed;
  Block b{nullptr, bytes};
  TLB_CUDA_CHECK(cudaMalloc(&b.ptr, bytes));
  cudaStream_t zeroing = nullptr;
  TLB_CUDA_CHECK(cudaStreamCreateWithFlags(&zeroing, cudaStreamNonBlocking));
  TLB_CUDA_CHECK(cudaMemsetAsync(b.ptr, 0, bytes, zeroing));
  TLB_CUDA_CHECK(cudaStreamSynchronize(zeroing));
  TLB_CUDA_CHECK(cudaStreamDestroy(zeroing));
  return b;
}

}  // namespace

void* stream_scratch(cudaStream_t stream, ScratchUse use, size_t bytes) {
  // Never destroyed: freeing device memory from a static destructor runs after the runtime
  // may have shut down.
  static auto* const blocks = new std::map<std::tuple<int, cudaStream_t, ScratchUse>, Block>;
  static std::mutex mu;
  int device = 0;
  TLB_CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(device, stream, use);
  auto it = blocks->find(key);
  if (it == blocks->end()) it = blocks->emplace(key, allocate(bytes)).first;
  if (it->second.bytes != bytes)
    throw std::logic_error("stream scratch asked for " + std::to_string(bytes) + " bytes where it holds " +
                           std::to_string(it->second.bytes));
  return it->second.ptr;
}

}  // namespace tlb
