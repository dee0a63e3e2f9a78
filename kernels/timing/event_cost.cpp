#include "timing/event_cost.hpp"

#include <algorithm>
#include <vector>

#include "common/cuda_check.hpp"
#include "common/cuda_event.hpp"
#include "common/stream_graph.hpp"
#include "timing/event_timer.hpp"
#include "timing/launch_hold.hpp"

namespace tlb {

std::vector<double> probe_event_costs_ms(cudaStream_t stream, int pairs) {
  std::vector<CudaEvent> events(kEventProbeKernels);  // timing events, as the stages' markers are
  // The chain of the probe's kernels, with an event node after each where `marked`.
  auto chain = [&](bool marked) {
    for (int i = 0; i < kEventProbeKernels; ++i) {
      detail::launch_empty_kernel(stream);
      // Inside a capture only the external flag makes a record a node of the graph.
      if (marked)
        TLB_CUDA_CHECK(cudaEventRecordWithFlags(events[static_cast<size_t>(i)], stream, cudaEventRecordExternal));
    }
  };
  const StreamGraph with(stream, [&] { chain(true); }), without(stream, [&] { chain(false); });
  EventTimer timer(stream);
  LaunchHold hold;
  // Behind a hold the first kernel does not wait for the graph's launch to reach the GPU;
  // where none works (synchronised launch checks) that wait is in both timings alike.
  LaunchHold* behind = hold.works(stream) ? &hold : nullptr;
  auto time = [&](const StreamGraph& graph) { return timer.ms([&] { graph.launch(stream); }, behind); };
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
