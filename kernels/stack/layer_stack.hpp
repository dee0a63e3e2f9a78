// The layer stack on the GPU: weights and input of one case generated on the device once
// (CaseData), and runnable paths over them (StackPath): the cuBLAS reference, any of the 32
// technique configurations with a per-layer E/F policy, and the fp32 golden. Host API only;
// no CUDA kernel is declared here.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "common/device_buffer.hpp"
#include "common/types.hpp"
#include "stack/memory_plan.hpp"
#include "stack/stage_costs.hpp"

namespace tlb {

// Device pointers of one layer's parameters inside CaseData's allocation.
struct LayerWeights {
  const void* ln1_gamma;
  const void* ln1_beta;
  const void* w_qkv;
  const void* b_qkv;
  const void* w_out;
  const void* b_out;
  const void* ln2_gamma;
  const void* ln2_beta;
  const void* w_ff1;
  const void* b_ff1;
  const void* w_ff2;
  const void* b_ff2;
};

// Weights and input of one case stored in `storage`, every value rounded to `rounding`
// (the golden stores fp32 copies of the working dtype's values).
class CaseData {
 public:
  CaseData(const CaseSpec& c, DType storage, DType rounding, cudaStream_t stream);
  const CaseSpec& spec() const { return spec_; }
  const LayerShape& shape() const { return spec_.shape; }
  DType storage() const { return storage_; }
  DType rounding() const { return rounding_; }
  const LayerWeights& layer(int64_t l) const { return layers_[static_cast<size_t>(l)]; }
  const void* input() const { return input_; }
  const int* valid_lens() const { return valid_lens_; }  // device; null unless padding
  uint64_t bytes() const { return buffer_.bytes(); }

 private:
  CaseSpec spec_;
  DType storage_, rounding_;
  DeviceBuffer buffer_;
  std::vector<LayerWeights> layers_;
  const void* input_ = nullptr;
  const int* valid_lens_ = nullptr;
};

// How one stage of one configuration ran: the hand-written variant, the reference, or a
// fallback with its reason. Recorded in each result row.
struct StageDispatch {
  Stage stage;
  bool wanted = false;   // the configuration asked for the hand-written kernel
  bool fused = false;    // and it ran
  std::string variant;   // kernel variant name(s) or "reference"
  std::string reason;    // why it fell back, when wanted && !fused
};

// One forward's time per stage of the layer (stage_costs.hpp), every layer's summed, and the
// whole forward: what ran between the events recorded before each stage's work, so a stage
// that waited for the host's launches carries the wait.
struct StageTimes {
  std::array<double, kNumCostStages> ms{};
  double total_ms = 0;  // first event to last: the stages' sum
};

struct PathOptions {
  StageSwitch stages;                    // all off = the reference
  std::string policy;                    // 'E'/'F' per layer; empty = all 'F'
  Fp32Math fp32_math = Fp32Math::tf32;   // fused path's fp32 mode (the reference is ieee)
  bool golden = false;                   // fp32 IEEE end to end, streamed attention
  bool keep_layer_outputs = false;       // per-layer error trace
};

// One runnable configuration. Owns its workspace (allocated at construction, from
// workspace_layout()), a cuBLAS handle bound to `stream` with its own kCublasWorkspaceBytes
// workspace and, with `graph`, its captured CUDA graph (captured at construction after one
// eager pass; a capture failure throws DeviceError "graph capture failed: ..."). `data` must
// outlive the path. A golden path needs data stored in fp32 (rounded to the working dtype).
class StackPath {
 public:
  StackPath(const CaseData& data, const PathOptions& opt, cudaStream_t stream);
  ~StackPath();
  StackPath(const StackPath&) = delete;
  StackPath& operator=(const StackPath&) = delete;

  // One forward of every layer, enqueued on the stream given at construction.
  void run();
  // The same forward replayed from a CUDA graph: a graph path's own, or for an eager path its
  // forward captured on the first call (DeviceError "graph capture failed: ..." where that
  // fails). The kernels and their arguments are run()'s; only the launches are the graph's, so
  // the difference between the two times is the host's launch overhead.
  void run_replayed();
  // Whether run_replayed() launches a captured graph yet: a graph path's own from
  // construction, an eager path's from its first run_replayed().
  bool has_replay_graph() const;
  // Stage timing, for `tlbench explain` and `run --stage-times`: one forward with a CUDA event
  // before each stage of each layer and one after the last, run as run() runs it (a graph
  // path's replayed from a graph holding the events as nodes, captured on first use; an eager
  // path's launched from the host) but without PDL, since an event between two kernels ends
  // their overlap anyway; synchronises and returns the times between the events. What runs
  // between two events is the stage's work whichever kernel does it: a fused LayerNorm that
  // adds the previous layer's deferred residual is ln1's, attn's own out-projection launch
  // out_proj's.
  StageTimes run_stage_events();
  // The same forward with events before each layer and after the last only (a graph
  // configuration's from a graph of its own): the total between the first and the last. Set
  // against run_stage_events' total it gives one event's own cost (ablation/stage_timing.hpp).
  double run_layer_events();
  // The same forward without the events, and without PDL: what run_stage_events' times add up
  // to once the events' own cost is taken off them (a graph path's replayed from its own graph
  // captured without PDL, on first use). Its time less run()'s is what PDL's overlap buys.
  void run_serial();
  // The forward with its kernels launched from the host, a graph path's too.
  void run_eager();
  // The marginal-cost method: the forward replayed from a graph in which every layer runs
  // `stage`'s work twice (captured on first use, DeviceError "graph capture failed: ..."
  // where that fails). Its time less run_replayed()'s is what the stage costs inside a graph.
  void run_replayed_repeating(CostStage stage);
  // One stage's work in every layer and nothing else, launched from the host without PDL, after
  // a forward has filled the buffers it reads: the stage's kernels timed alone, as
  // tlbench_kernel_bench's `stages` times them beside `tlbench explain`'s lines. Each layer's
  // work reads what the forward left in its input buffers (the last layer's activations), so
  // intermediate buffers end up otherwise than the forward left them; the final output is the
  // forward's, except after `ln1` where a layer defers its residual (deferred_layers()): that
  // ln1 writes the previous layer's output buffer, which the last layer's may be. Not for a
  // path that keeps its layer outputs (the deferred ln1 writes them too).
  void run_stage_alone(CostStage stage);
  // Per layer, whether its ffn_down leaves its bias and residual add to the next layer's ln1
  // (norm on, ffn off): the stage boundaries forward_stage_costs needs.
  std::vector<bool> deferred_layers() const;
  // The final output [batch, seq, d_model] in the path's dtype (device).
  const void* output() const;
  DType dtype() const;
  // Output converted to float on the host (synchronises).
  std::vector<float> output_host() const;
  // Outputs of each layer from the last run (keep_layer_outputs only), as float.
  std::vector<std::vector<float>> layer_outputs_host() const;
  // Fills every output buffer with NaN so an unwritten element cannot pass a check.
  void poison();

  // The five stages in bit order (qkv, attn, ffn, norm, graph). Variant names of the kernel
  // stages are what the launchers returned ("a+b" when layers differ); a graph path has them
  // from construction, an eager path from its first run() (before it: "" for a fused stage).
  const std::vector<StageDispatch>& dispatch() const;
  uint64_t workspace_bytes() const;
  cudaStream_t stream() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Maps a technique bit string's stages to a switch, e.g. {qkv, attn} -> 11000.
std::string stage_bits(const StageSwitch& s);

// What ran, as a result row's `dispatch` names it: "qkv=<variant>;attn=<variant>;...", a
// stage without a recorded variant "fused" or "reference".
std::string dispatch_text(const std::vector<StageDispatch>& dispatch);

}  // namespace tlb
