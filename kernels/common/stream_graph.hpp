// A CUDA graph captured from a stream's work, instantiated and uploaded, freed with the
// object: for measurements that replay a fixed sequence of launches (the event probe, the
// kernel benchmarks' per-launch cost). The layer stack keeps its own captures, which turn a
// refused capture into the run's "graph capture failed" error.
#pragma once

#include <cuda_runtime.h>

#include <functional>

namespace tlb {

class StreamGraph {
 public:
  // Captures what `body` enqueues on `stream` (thread-local capture mode). A body that throws
  // ends the capture, leaves the stream usable and the thread's last error clear, and the
  // exception goes on; a capture or instantiation CUDA refuses is a DeviceError.
  StreamGraph(cudaStream_t stream, const std::function<void()>& body);
  ~StreamGraph();
  StreamGraph(const StreamGraph&) = delete;
  StreamGraph& operator=(const StreamGraph&) = delete;

  void launch(cudaStream_t stream) const;

 private:
  void release();
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace tlb
