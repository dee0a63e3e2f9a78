// What every path of the layer stack allocates, as named buffers. The stack carves its
// workspace from exactly this layout, and `tlbench plan` and the runner's viability check
// use the same functions, so a prediction is the allocation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/types.hpp"

namespace tlb {

struct BufferSpec {
  std::string name;
  uint64_t bytes = 0;
};

// Per-layer policy: true where layer l runs the configuration ('F'), false for the reference.
std::vector<bool> fused_layers(const std::string& policy, int64_t layers);

// A wanted stage whose hand-written kernel cannot run this shape, and why: the stage then runs
// the reference's kernels.
struct StageFallback {
  Stage stage;
  std::string why;
};
// Every wanted stage that falls back, in stage order (what effective_stages switches off).
std::vector<StageFallback> stage_fallbacks(const LayerShape& s, DType dtype, const StageSwitch& wanted,
                                           Fp32Math fp32_math = Fp32Math::tf32);

// The stages that actually run the hand-written kernel for this shape after fallbacks: each
// wanted stage whose kernel's *_supported() rejects the layer's calls (stack/stage_args.hpp)
// is switched off, with "<stage>: <why>" appended to fallback_notes. `fp32_math` is the fused
// path's fp32 mode (it only matters for fp32).
StageSwitch effective_stages(const LayerShape& s, DType dtype, const StageSwitch& wanted,
                             std::vector<std::string>* fallback_notes = nullptr,
                             Fp32Math fp32_math = Fp32Math::tf32);

// Whether the out-projection runs on the hand-written GEMM in the layers that run `eff`: it
// does where attn's kernel runs and the product is small enough to be bound by launch latency
// (at most kOutProjectionOursMaxOutputs outputs), so that the attention block's kernels form
// one chain of programmatic dependent launches, which cuBLAS's kernels cannot join; elsewhere
// it runs on cuBLAS (*why says why when attn runs). Measured on an H200, graph-replayed
// (tlbench_kernel_bench outproj): case 1's [128 x 512] x 512 took 2.92 us on ours against
// cuBLAS's 3.03 us (and its forward 0.1027 -> 0.0966 ms with the PDL chain), while every
// larger official shape, from case 2's [1024 x 768] x 768 on, ran at 0.71-0.93x cuBLAS.
constexpr int64_t kOutProjectionOursMaxOutputs = int64_t{1} << 16;
bool out_projection_fused(const LayerShape& s, DType dtype, const StageSwitch& eff,
                          Fp32Math fp32_math = Fp32Math::tf32, std::string* why = nullptr);

// Weights of all layers plus the input, stored in `storage`.
std::vector<BufferSpec> data_layout(const LayerShape& s, DType storage);
// Activations and scratch of one configured path (its own output buffers included).
// `golden` is the fp32 IEEE path with streamed attention (no scores buffer);
// `keep_layer_outputs` adds a copy of every layer's output (the per-layer error trace).
std::vector<BufferSpec> workspace_layout(const LayerShape& s, DType dtype,
                                         const StageSwitch& stages, const std::string& policy,
                                         bool golden = false, bool keep_layer_outputs = false,
                                         Fp32Math fp32_math = Fp32Math::tf32);

uint64_t total_bytes(const std::vector<BufferSpec>& b);
// Each sub-buffer is aligned to this many bytes inside the one allocation.
constexpr uint64_t kBufferAlign = 256;
uint64_t aligned_total_bytes(const std::vector<BufferSpec>& b);

// Fixed costs outside the layouts: cuBLAS/cuBLASLt workspace per handle.
constexpr uint64_t kCublasWorkspaceBytes = 32ull << 20;

struct CaseMemory {
  uint64_t data = 0;            // weights + input in the dtype
  uint64_t scores = 0;          // the dense [batch, heads, seq, seq] fp32 scores and, unless
                                // fp32, the probabilities in the dtype
  uint64_t reference_path = 0;  // reference workspace (scores included)
  uint64_t golden_peak = 0;     // fp32 data + golden workspace, alone on the device
};
CaseMemory case_memory(const LayerShape& s, DType dtype);

// Peak device bytes of one measured point: the data, the baseline's workspace and the
// candidate's, both alive for the paired (ABBA) timing, plus fixed costs; fp32 in
// `fp32_math` (in `ieee` the QKV technique's product takes an fp32 buffer of its own), the
// candidate keeping every layer's output where `keep_layer_outputs` (a layer trace).
uint64_t point_peak_bytes(const LayerShape& s, DType dtype, const StageSwitch& baseline,
                          const StageSwitch& candidate, const std::string& policy,
                          Fp32Math fp32_math = Fp32Math::tf32, bool keep_layer_outputs = false);

// FLOPs of one forward of the whole stack (GEMMs and attention's two products; a causal mask
// counts half the square, the products it leaves, as the attention benchmarks count them).
double forward_flops(const LayerShape& s);

}  // namespace tlb
