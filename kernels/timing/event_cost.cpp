#include "timing/event_cost.hpp"

#include <algorithm>
#include <vector>

#include "common/cuda_check.hpp"
#include "timing/event_timer.hpp"
#include "timing/launch_hold.hpp"

namespace tlb {

namespace {

// A chain of the probe's kernels captured from `stream`, with an event node after each where
// `events` is not empty, instantiated and uploaded.
class ProbeChain {
 public:
  ProbeChain(cudaStream_t stream, const std::vector<cudaEvent_t>& events) {
    TLB_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    try {
      for (int i = 0; i < kEventProbeKernels; ++i) {
        detail::launch_empty_kernel(stream);
        // Inside a capture only the external flag makes a record a node of the graph.
        if (!events.empty())
          TLB_CUDA_CHECK(cudaEventRecordWithFlags(events[static_cast<size_t>(i)], stream, cudaEventRecordExternal));
      }
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
      release();  // no destructor runs for a constructor that throws
      cudaGetLastError();  // a failed instantiate or upload leaves no error for a later check
      throw;
    }
  }
  ~ProbeChain() { release(); }
  ProbeChain(const ProbeChain&) = delete;
  ProbeChain& operator=(const ProbeChain&) = delete;

  void launch(cudaStream_t stream) const { TLB_CUDA_CHECK(cudaGraphLaunch(exec_, stream)); }

 private:
  void release() {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    if (graph_ != nullptr) cudaGraphDestroy(graph_);
    exec_ = nullptr;
    graph_ = nullptr;
  }

  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace

std::vector<double> probe_event_costs_ms(cudaStream_t stream, int pairs) {
  std::vector<cudaEvent_t> events;
  struct Events {
    std::vector<cudaEvent_t>& v;
    ~Events() {
      for (cudaEvent_t e : v) cudaEventDestroy(e);
    }
  } owner{events};
  for (int i = 0; i < kEventProbeKernels; ++i) {
    cudaEvent_t e = nullptr;
    TLB_CUDA_CHECK(cudaEventCreate(&e));  // timing events, as the stages' markers are
    events.push_back(e);
  }
  const ProbeChain with(stream, events), without(stream, {});
  EventTimer timer(stream);
  LaunchHold hold;
  // Behind a hold the first kernel does not wait for the graph's launch to reach the GPU;
  // where none works (synchronised launch checks) that wait is in both timings alike.
  const bool held = hold.works(stream);
  auto time = [&](const ProbeChain& chain) {
    const auto work = [&] { chain.launch(stream); };
    return held ? timer.ms(work, hold) : timer.ms(work);
  };
  time(with);  // first replays: the graphs' own first-launch costs stay out
  time(without);
  std::vector<double> per_event;
  for (int i = 0; i < std::max(pairs, 1); ++i) {
    const double a = time(with), b = time(without);
    per_event.push_back((a - b) / kEventProbeKernels);
  }
  return per_event;
}

}  // namespace tlb
