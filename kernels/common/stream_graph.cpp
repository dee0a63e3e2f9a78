#include "common/stream_graph.hpp"

#include "common/cuda_check.hpp"

namespace tlb {

StreamGraph::StreamGraph(cudaStream_t stream, const std::function<void()>& body) {
  TLB_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    body();
  } catch (...) {
    cudaGraph_t partial = nullptr;
    cudaStreamEndCapture(stream, &partial);
    if (partial != nullptr) cudaGraphDestroy(partial);
    cudaGetLastError();
    throw;
  }
  try {
    TLB_CUDA_CHECK(cudaStreamEndCapture(stream, &graph_));
    TLB_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
    TLB_CUDA_CHECK(cudaGraphUpload(exec_, stream));
  } catch (...) {
    release();           // no destructor runs for a constructor that throws
    cudaGetLastError();  // nor should a later check find this error
    throw;
  }
}

StreamGraph::~StreamGraph() { release(); }

void StreamGraph::launch(cudaStream_t stream) const { TLB_CUDA_CHECK(cudaGraphLaunch(exec_, stream)); }

void StreamGraph::release() {
  if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  if (graph_ != nullptr) cudaGraphDestroy(graph_);
  exec_ = nullptr;
  graph_ = nullptr;
}

}  // namespace tlb
