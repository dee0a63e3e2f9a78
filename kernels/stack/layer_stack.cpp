// The layer stack on the GPU: case data generated on the device, and runnable paths that
// compose the reference kernels (kernels/reference), the hand-written stages (gemm, attention,
// layernorm) and cuBLAS per layer, optionally captured as one CUDA graph.
//
// Buffer use per layer l (names from workspace_layout):
//   x (input or the previous y) --LN1--> normed --qkv--> q, k, v --attention--> attn_out
//   attn_out --out-proj--> proj;  h1 = x + proj + bo;  LN2(h1) -> normed
//   normed --up--> ffn_hidden --down--> proj;  y = h1 + proj + b2 -> stream_a / stream_b
// With norm fused and ffn not, the down projection's bias + residual is left pending and the
// next layer's LN1 does it in the fused add+LayerNorm (writing y as its residual output), so
// every layer's y still exists in memory before anything reads it.
// The out-projection runs on our GEMM where attn's kernel runs and the product is small
// (out_projection_fused), on cuBLAS elsewhere.
#include "stack/layer_stack.hpp"

#include <cstring>
#include <functional>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include "attention/attention.hpp"
#include "common/cuda_check.hpp"
#include "common/cuda_event.hpp"
#include "common/launch.hpp"
#include "common/rng.hpp"
#include "common/rounding.hpp"
#include "gemm/gemm.hpp"
#include "gemm/gemm_cublas.hpp"
#include "layernorm/add_layernorm.hpp"
#include "reference/attention_dense.hpp"
#include "reference/attention_streamed.hpp"
#include "reference/elementwise.hpp"
#include "reference/layernorm_two_pass.hpp"
#include "reference/linear_cublas.hpp"
#include "stack/generate.hpp"
#include "stack/stage_args.hpp"

namespace tlb {
namespace {

uint64_t align_up(uint64_t x) { return (x + kBufferAlign - 1) / kBufferAlign * kBufferAlign; }

// Named sub-buffers of one allocation, at the offsets aligned_total_bytes() accounts for.
class Carving {
 public:
  Carving(const std::vector<BufferSpec>& layout, void* base) : layout_(layout) {
    uint64_t offset = 0;
    for (const BufferSpec& b : layout_) {
      offsets_.push_back(offset);
      offset += align_up(b.bytes);
    }
    base_ = static_cast<char*>(base);
  }
  // Null when the layout has no such buffer (the path does not need it).
  char* find(const std::string& name) const {
    for (size_t i = 0; i < layout_.size(); ++i)
      if (layout_[i].name == name) return base_ + offsets_[i];
    return nullptr;
  }
  uint64_t bytes(const std::string& name) const {
    for (const BufferSpec& b : layout_)
      if (b.name == name) return b.bytes;
    return 0;
  }
  char* get(const std::string& name) const {
    char* p = find(name);
    if (p == nullptr) throw std::logic_error("layer stack: no buffer '" + name + "' in the layout");
    return p;
  }

 private:
  std::vector<BufferSpec> layout_;
  std::vector<uint64_t> offsets_;
  char* base_ = nullptr;
};

void check_shape(const LayerShape& s) {
  if (s.batch <= 0 || s.seq <= 0 || s.d_model <= 0 || s.heads <= 0 || s.d_ff <= 0 || s.layers <= 0)
    throw std::invalid_argument("layer stack: batch, seq, d_model, heads, d_ff and layers must be positive");
  if (s.d_model % s.heads != 0)
    throw std::invalid_argument("layer stack: heads must divide d_model");
  if (s.mask == MaskKind::padding) {
    if (static_cast<int64_t>(s.valid_lens.size()) != s.batch)
      throw std::invalid_argument("layer stack: padding needs one valid length per batch element");
    for (int v : s.valid_lens)
      if (v < 1 || v > s.seq) throw std::invalid_argument("layer stack: valid lengths must lie in 1..seq");
  }
}

// Device tensor of n elements in `dt` -> host floats (synchronises the stream).
std::vector<float> device_to_float(const void* src, DType dt, int64_t n, cudaStream_t stream) {
  const size_t e = static_cast<size_t>(dtype_bytes(dt));
  std::vector<unsigned char> raw(static_cast<size_t>(n) * e);
  if (n > 0)
    TLB_CUDA_CHECK(cudaMemcpyAsync(raw.data(), src, raw.size(), cudaMemcpyDeviceToHost, stream));
  TLB_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<float> out(static_cast<size_t>(n));
  for (size_t i = 0; i < out.size(); ++i) {
    if (dt == DType::fp32) {
      std::memcpy(&out[i], raw.data() + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, raw.data() + 2 * i, 2);
      out[i] = dt == DType::fp16 ? f16_bits_to_f32(h) : bf16_bits_to_f32(h);
    }
  }
  return out;
}

constexpr Stage kKernelStages[] = {Stage::qkv, Stage::attn, Stage::ffn, Stage::norm};

using reference::BlasHandle;

// Owner of a captured graph, so a constructor that throws half-way leaks nothing.
struct CapturedGraph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CapturedGraph() = default;
  ~CapturedGraph() { reset(); }
  void reset() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    exec = nullptr;
    graph = nullptr;
  }
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;
};

// A forward with CUDA events as graph nodes, and the stage of each interval between two of
// them as its capture recorded it.
struct EventsGraph {
  CapturedGraph graph;
  std::vector<int> stage;
};

// Runs `f` when it leaves scope, however it leaves.
template <class F>
struct OnExit {
  F f;
  ~OnExit() { f(); }
};
template <class F>
OnExit(F) -> OnExit<F>;

[[noreturn]] void throw_capture_failure(const std::string& what, bool sticky, bool oom) {
  const std::string msg = "graph capture failed: " + what;
  if (oom) throw DeviceOutOfMemory(msg);
  throw DeviceError(msg, sticky);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// CaseData

CaseData::CaseData(const CaseSpec& c, DType storage, DType rounding, cudaStream_t stream)
    : spec_(c), storage_(storage), rounding_(rounding) {
  const LayerShape& s = spec_.shape;
  check_shape(s);
  if (storage != DType::fp32 && storage != rounding)
    throw std::invalid_argument("case data: fp16/bf16 storage must hold values of its own dtype");

  const std::vector<BufferSpec> layout = data_layout(s, storage);
  buffer_ = DeviceBuffer(aligned_total_bytes(layout));
  const Carving carve(layout, buffer_.get());

  const int64_t e = dtype_bytes(storage), d = s.d_model, f = s.d_ff, L = s.layers;
  const uint64_t seed = spec_.seed;
  const uint32_t case_id = static_cast<uint32_t>(spec_.id);
  char* weights = carve.get("weights");
  layers_.assign(static_cast<size_t>(L), LayerWeights{});

  // Tensors are grouped by kind across layers, big matrices first and the d_ff-long bias last:
  // with d_model and d_ff multiples of 8 every tensor starts 16-byte aligned (what the
  // hand-written kernels' vector loads need).
  int64_t offset = 0;  // elements into `weights`
  auto group = [&](TensorId t, int64_t n, const void* LayerWeights::*field) {
    for (int64_t l = 0; l < L; ++l) {
      void* p = weights + (offset + l * n) * e;
      layers_[static_cast<size_t>(l)].*field = p;
      generate_tensor(p, storage, rounding,
                      tensor_dist(seed, case_id, static_cast<uint32_t>(l), t, d, f), n, stream);
    }
    offset += L * n;
  };
  group(TensorId::w_qkv, 3 * d * d, &LayerWeights::w_qkv);
  group(TensorId::w_out, d * d, &LayerWeights::w_out);
  group(TensorId::w_ff1, f * d, &LayerWeights::w_ff1);
  group(TensorId::w_ff2, d * f, &LayerWeights::w_ff2);
  group(TensorId::b_qkv, 3 * d, &LayerWeights::b_qkv);
  group(TensorId::b_out, d, &LayerWeights::b_out);
  group(TensorId::ln1_gamma, d, &LayerWeights::ln1_gamma);
  group(TensorId::ln1_beta, d, &LayerWeights::ln1_beta);
  group(TensorId::ln2_gamma, d, &LayerWeights::ln2_gamma);
  group(TensorId::ln2_beta, d, &LayerWeights::ln2_beta);
  group(TensorId::b_ff2, d, &LayerWeights::b_ff2);
  group(TensorId::b_ff1, f, &LayerWeights::b_ff1);
  for (const BufferSpec& b : layout)
    if (b.name == "weights" && static_cast<uint64_t>(offset * e) != b.bytes)
      throw std::logic_error("case data: weights do not fill the planned buffer");

  char* input = carve.get("input");
  input_ = input;
  generate_tensor(input, storage, rounding, tensor_dist(seed, case_id, 0, TensorId::input, d, f),
                  s.tokens() * d, stream);

  if (s.mask == MaskKind::padding) {
    int* lens = reinterpret_cast<int*>(carve.get("valid_lens"));
    TLB_CUDA_CHECK(cudaMemcpyAsync(lens, spec_.shape.valid_lens.data(),
                                   static_cast<size_t>(s.batch) * sizeof(int),
                                   cudaMemcpyHostToDevice, stream));
    valid_lens_ = lens;
  }
  // Paths may run on other streams: the data is complete when the constructor returns.
  TLB_CUDA_CHECK(cudaStreamSynchronize(stream));
}

// ---------------------------------------------------------------------------------------------
// StackPath

struct StackPath::Impl {
  const CaseData& data;
  PathOptions opt;
  cudaStream_t stream;
  LayerShape s;
  DType dt;                    // working dtype of every activation
  std::vector<bool> fused;     // per layer: runs the configuration ('F') or the reference ('E')
  StageSwitch eff;             // stages running their hand-written kernel in 'F' layers
  bool out_proj_ours = false;  // 'F' layers run the out-projection on our GEMM (with attn)
  std::vector<std::string> notes;
  std::vector<StageDispatch> dispatch;
  std::set<std::string> variants[kNumStages];
  bool variants_recorded = false;

  // Declared in teardown order's reverse: the graph goes first, the buffers last.
  DeviceBuffer ws;
  DeviceBuffer blas_ws;
  BlasHandle blas;
  CapturedGraph captured;
  CapturedGraph replay;  // an eager path's forward captured for run_replayed(), on first use
  CapturedGraph serial;  // a graph path's forward captured without PDL, for run_serial()

  char* y_buf[2] = {nullptr, nullptr};
  char *normed = nullptr, *q = nullptr, *k = nullptr, *v = nullptr, *attn_out = nullptr;
  char *h1 = nullptr, *proj = nullptr, *hidden = nullptr;
  float* gemm_f32 = nullptr;
  int64_t gemm_f32_cols = 0;  // columns of [tokens, cols] fp32 the plan gave gemm_f32
  char *scores = nullptr, *probs = nullptr, *flash_ws = nullptr, *layer_outputs = nullptr;
  void* const* pv_pointers = nullptr;

  Impl(const CaseData& d, const PathOptions& o, cudaStream_t st);
  ~Impl() {
    with_events.graph.reset();  // their nodes record the events
    with_layer_events.graph.reset();
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  int64_t act_elems() const { return s.tokens() * s.d_model; }
  uint64_t act_bytes() const { return static_cast<uint64_t>(act_elems()) * dtype_bytes(dt); }
  reference::GemmPrecision precision() const {
    return opt.golden ? reference::GemmPrecision::pedantic : reference::GemmPrecision::standard;
  }
  // A GEMM of a technique's that runs on cuBLAS (the attention's out-projection where cuBLAS is
  // the faster) runs in the fused path's fp32 math: TF32 unless the run asks for IEEE. The
  // reference's own GEMMs never do: in TF32 runs of the d258325 sweep this one ran IEEE, at a
  // sixth of the rate of the TF32 GEMMs beside it (case 10: 137 GFLOP an out-projection).
  reference::GemmPrecision fused_precision() const {
    return !opt.golden && dt == DType::fp32 && opt.fp32_math == Fp32Math::tf32 ? reference::GemmPrecision::tf32
                                                                                 : precision();
  }
  // Layer l hands its bias + residual to layer l+1's fused LN1.
  bool defers_residual(int64_t l) const {
    return eff[Stage::norm] && !eff[Stage::ffn] && fused[static_cast<size_t>(l)] &&
           l + 1 < s.layers && fused[static_cast<size_t>(l + 1)];
  }
  void record(Stage st, const std::string& variant) {
    if (!variants_recorded) variants[static_cast<int>(st)].insert(variant);
  }

  // Stage timing (run_stage_events, run_replayed_repeating): called with each stage's
  // CostStage index before its work and with kNumCostStages after the last layer; and the
  // stage whose work every layer runs twice (-1: none).
  std::function<void(int)> marker;
  int repeat = -1;
  int only = -1;  // the stage whose work alone runs (run_stage_alone); -1: every stage's
  std::vector<CudaEvent> events;  // the stage and layer events' markers, created on first use
  // A graph path's forward with the events before each stage, and before each layer only.
  EventsGraph with_events, with_layer_events;
  CapturedGraph repeated[kNumCostStages];

  // One stage of a layer: its marker, then its work, twice where `repeat` names it (every
  // stage's work is a function of buffers it does not write, so the second pass recomputes
  // the same outputs: the graph's extra time is the stage's own cost).
  template <class Work>
  void stage(CostStage cs, Work&& work) {
    if (only >= 0 && only != static_cast<int>(cs)) return;
    if (marker) marker(static_cast<int>(cs));
    work();
    if (repeat == static_cast<int>(cs)) work();
  }

  void verify_real_operands();
  void build_dispatch();
  void finish_dispatch();
  void forward();
  // forward() with an event recorded before each stage of each layer (before each layer only
  // where `layers_only`) and after the last (as graph nodes where `as_nodes`, inside a
  // capture); returns the stage of each interval between two events.
  std::vector<int> forward_with_events(bool as_nodes, bool layers_only);
  // The events of one forward: recorded from the host, or for a graph path replayed from
  // `graph` (captured on first use); synchronises and reads them.
  StageTimes timed_events(bool layers_only, EventsGraph& graph);
  // Captures `body` (forward() where empty) into `into`, instantiated and uploaded.
  void capture(CapturedGraph& into, const std::function<void()>& body = {});
  // Launches `g`, first capturing `body` (forward() where empty) into it where it is empty,
  // after one eager pass where none has run yet (module loads and cuBLAS's choices stay out of
  // the capture, and the dispatch record gets its variant names).
  void launch_captured(CapturedGraph& g, const std::function<void()>& body = {});
  // Creates the events' markers (outside any capture).
  void ensure_events();

  // Steps of one layer.
  void layer_norm_ref(const void* x, const void* gamma, const void* beta, void* out);
  void add_norm(const AddNormArgs& a);
  // cuBLAS GEMMs in `p` (the reference's precision() unless a technique's GEMM passes
  // fused_precision()).
  void linear_f32(const void* a, int64_t lda, const void* w, int64_t n, int64_t kdim, float* c,
                  int64_t ldc, std::optional<reference::GemmPrecision> p = std::nullopt);
  void linear(const void* a, int64_t lda, const void* w, int64_t n, int64_t kdim, void* c,
              int64_t ldc, std::optional<reference::GemmPrecision> p = std::nullopt);
  void keep(int64_t l, const void* y);
  // A technique's GEMM: our fused kernel, or cuBLAS's product and the epilogue as a pass of
  // its own where that is the faster (gemm_prefers_cublas), the head split's product through
  // gemm_f32. Returns the variant that ran.
  std::string technique_gemm(const GemmArgs& a);
};

StackPath::Impl::Impl(const CaseData& d, const PathOptions& o, cudaStream_t st)
    : data(d), opt(o), stream(st), s(d.shape()) {
  if (opt.golden) {
    if (data.storage() != DType::fp32)
      throw std::invalid_argument("golden path: the case data must be stored in fp32");
    dt = DType::fp32;
  } else {
    dt = data.storage();
  }
  fused = fused_layers(opt.policy, s.layers);
  eff = opt.golden ? StageSwitch{} : effective_stages(s, dt, opt.stages, &notes, opt.fp32_math);
  eff[Stage::graph] = false;  // not a kernel stage; opt.stages[graph] decides capture
  // Where attn runs, the attn stage's record names the out-projection's engine: our GEMM's
  // variant, or "out_proj_cublas" ("out_proj_cublas_tf32" in fp32's TF32 math) where cuBLAS
  // is the faster (out_projection_fused) or our GEMM refuses the operands (it takes every d
  // that attn's head_dim allows).
  out_proj_ours = !opt.golden && out_projection_fused(s, dt, eff, opt.fp32_math);

  const std::vector<BufferSpec> layout = workspace_layout(
      s, dt, opt.stages, opt.policy, opt.golden, opt.keep_layer_outputs, opt.fp32_math);
  ws = DeviceBuffer(aligned_total_bytes(layout));
  const Carving carve(layout, ws.get());
  y_buf[0] = carve.get("stream_a");
  y_buf[1] = carve.get("stream_b");
  normed = carve.get("normed");
  q = carve.get("q");
  k = carve.get("k");
  v = carve.get("v");
  attn_out = carve.get("attn_out");
  h1 = carve.get("h1");
  proj = carve.get("proj");
  hidden = carve.get("ffn_hidden");
  gemm_f32 = reinterpret_cast<float*>(carve.find("gemm_f32"));
  gemm_f32_cols = static_cast<int64_t>(carve.bytes("gemm_f32") /
                                       (static_cast<uint64_t>(s.tokens()) * sizeof(float)));
  scores = carve.find("scores");
  probs = carve.find("probs");
  if (probs == nullptr) probs = scores;  // fp32: the softmax runs in place
  flash_ws = carve.find("flash_workspace");
  layer_outputs = carve.find("layer_outputs");
  char* pv_table = carve.find("attn_pv_pointers");

  blas_ws = DeviceBuffer(kCublasWorkspaceBytes);
  reference::configure_handle(blas.h, stream, blas_ws.get(), kCublasWorkspaceBytes);

  if (scores != nullptr) {
    reference::DenseAttentionArgs a;
    a.dtype = dt;
    a.batch = s.batch;
    a.heads = s.heads;
    a.seq = s.seq;
    a.head_dim = s.head_dim();
    a.v = v;
    a.scores = reinterpret_cast<float*>(scores);
    a.probs = probs;
    a.o = attn_out;
    const std::vector<void*> table = reference::dense_attention_pointer_table(a);
    TLB_CUDA_CHECK(cudaMemcpy(pv_table, table.data(), table.size() * sizeof(void*),
                              cudaMemcpyHostToDevice));
    pv_pointers = reinterpret_cast<void* const*>(pv_table);
  }

  verify_real_operands();
  build_dispatch();

  if (opt.stages[Stage::graph]) {
    // One eager pass first: modules load and cuBLAS picks its kernels outside the capture,
    // and the dispatch record gets its variant names.
    forward();
    TLB_CUDA_CHECK(cudaStreamSynchronize(stream));
    capture(captured);
  }
}

// The plan asked the kernels about stand-in pointers; ask again with the real ones, layer by
// layer. A stage they now refuse falls back when its reference buffers exist.
void StackPath::Impl::verify_real_operands() {
  const bool any_fused = [&] {
    for (bool f : fused)
      if (f) return true;
    return false;
  }();
  if (!any_fused) return;
  auto refuse = [&](Stage st, const std::string& why) {
    if (!eff[st]) return;
    // The reference stage writes its GEMM products to gemm_f32, sized by the plan for the
    // stages it expected to run on the reference.
    const int64_t needed = st == Stage::qkv   ? 3 * s.d_model
                           : st == Stage::ffn ? std::max(s.d_ff, s.d_model)
                           : st == Stage::norm ? (out_proj_ours ? 0 : s.d_model)
                                               : 0;
    if (needed > gemm_f32_cols)
      throw DeviceError("layer stack: the fused " + std::string(to_string(st)) +
                            " stage rejects this path's operands (" + why +
                            ") although the memory plan expected it to run; no fallback buffer",
                        false);
    eff[st] = false;
    notes.push_back(std::string(to_string(st)) + ": " + why);
  };
  for (int64_t l = 0; l < s.layers; ++l) {
    if (!fused[static_cast<size_t>(l)]) continue;
    const LayerWeights& w = data.layer(l);
    std::string why;
    if (eff[Stage::qkv] &&
        !gemm_fused_supported(qkv_gemm_args(s, dt, opt.fp32_math, normed, w.w_qkv, w.b_qkv, q, k, v), &why))
      refuse(Stage::qkv, why);
    why.clear();
    if (eff[Stage::ffn]) {
      void* y = y_buf[l % 2];
      if (!gemm_fused_supported(ffn_up_args(s, dt, opt.fp32_math, normed, w.w_ff1, w.b_ff1, hidden), &why))
        refuse(Stage::ffn, "up projection: " + why);
      else if (!gemm_fused_supported(
                   ffn_down_args(s, dt, opt.fp32_math, hidden, w.w_ff2, w.b_ff2, h1, y), &why))
        refuse(Stage::ffn, "down projection: " + why);
    }
    why.clear();
    if (out_proj_ours && !gemm_fused_supported(out_proj_args(s, dt, opt.fp32_math, attn_out, w.w_out,
                                                             w.b_out, proj), &why)) {
      // cuBLAS takes over; without norm its product goes through the fp32 staging buffer.
      if (!eff[Stage::norm] && s.d_model > gemm_f32_cols)
        throw DeviceError("layer stack: the out-projection GEMM rejects this path's operands (" + why +
                              ") although the memory plan expected it to run; no fallback buffer",
                          false);
      out_proj_ours = false;
    }
    why.clear();
    if (eff[Stage::norm]) {
      const void* x = l == 0 ? data.input() : y_buf[(l - 1) % 2];
      const AddNormArgs ln1 = add_norm_args(s, dt, x, nullptr, nullptr, nullptr, normed,
                                            w.ln1_gamma, w.ln1_beta);
      const AddNormArgs ln1_pending = add_norm_args(s, dt, h1, proj, w.b_ff2, y_buf[0], normed,
                                                    w.ln1_gamma, w.ln1_beta);
      const AddNormArgs ln2 = add_norm_args(s, dt, x, proj, w.b_out, h1, normed, w.ln2_gamma,
                                            w.ln2_beta);
      if (!add_layernorm_supported(ln1, &why) || !add_layernorm_supported(ln1_pending, &why) ||
          !add_layernorm_supported(ln2, &why))
        refuse(Stage::norm, why);
    }
  }
}

void StackPath::Impl::build_dispatch() {
  bool any_fused = false;
  for (bool f : fused) any_fused |= f;
  dispatch.clear();
  for (Stage st : kKernelStages) {
    StageDispatch sd;
    sd.stage = st;
    sd.wanted = opt.stages[st];
    sd.fused = !opt.golden && any_fused && eff[st];
    sd.variant = sd.fused ? "" : "reference";  // a fused stage's names come from its first run
    if (sd.wanted && !sd.fused) {
      if (opt.golden) {
        sd.reason = "the golden runs every stage in fp32 IEEE on the reference kernels";
      } else if (!eff[st]) {
        const std::string prefix = std::string(to_string(st)) + ": ";
        for (const std::string& n : notes)
          if (n.compare(0, prefix.size(), prefix) == 0) sd.reason = n.substr(prefix.size());
        if (sd.reason.empty()) sd.reason = "the kernel does not support this shape";
      } else {
        sd.reason = "policy '" + opt.policy + "' runs every layer on the reference";
      }
    }
    dispatch.push_back(sd);
  }
  StageDispatch g;
  g.stage = Stage::graph;
  g.wanted = opt.stages[Stage::graph];
  g.fused = g.wanted;  // capture failure throws: a graph path without a graph does not exist
  g.variant = g.wanted ? "cuda_graph" : "stream";
  dispatch.push_back(g);
}

void StackPath::Impl::finish_dispatch() {
  if (variants_recorded) return;
  variants_recorded = true;
  for (StageDispatch& sd : dispatch) {
    if (sd.stage == Stage::graph) continue;
    const std::set<std::string>& names = variants[static_cast<int>(sd.stage)];
    if (names.empty()) continue;
    std::string joined;
    for (const std::string& n : names) joined += (joined.empty() ? "" : "+") + n;
    sd.variant = joined;
  }
}

void StackPath::Impl::layer_norm_ref(const void* x, const void* gamma, const void* beta,
                                     void* out) {
  reference::layernorm_two_pass(dt, x, gamma, beta, out, s.tokens(), s.d_model, s.eps, stream);
  record(Stage::norm, "reference");
}

void StackPath::Impl::add_norm(const AddNormArgs& a) {
  const std::string name = add_layernorm(a, stream);
  TLB_LAUNCH_CHECK(stream);
  record(Stage::norm, name);
}

// c[T, n] (row stride ldc) = a[T, kdim] (row stride lda) · w[n, kdim]^T on cuBLAS.
void StackPath::Impl::linear(const void* a, int64_t lda, const void* w, int64_t n, int64_t kdim,
                             void* c, int64_t ldc, std::optional<reference::GemmPrecision> p) {
  reference::linear(blas.h, dt, p.value_or(precision()), s.tokens(), n, kdim, a, lda, w, kdim, c, ldc, dt);
  TLB_LAUNCH_CHECK(stream);
}

// The same product kept in fp32 for a reference bias kernel to round once (gemm_f32).
void StackPath::Impl::linear_f32(const void* a, int64_t lda, const void* w, int64_t n,
                                 int64_t kdim, float* c, int64_t ldc, std::optional<reference::GemmPrecision> p) {
  if (c == nullptr) throw std::logic_error("layer stack: no fp32 GEMM buffer was planned");
  reference::linear(blas.h, dt, p.value_or(precision()), s.tokens(), n, kdim, a, lda, w, kdim, c, ldc,
                    DType::fp32);
  TLB_LAUNCH_CHECK(stream);
}

std::string StackPath::Impl::technique_gemm(const GemmArgs& a) {
  const bool needs_product = gemm_technique_needs_product(a);
  if (needs_product && gemm_f32_cols < a.N)
    throw std::logic_error("layer stack: no fp32 buffer was planned for cuBLAS's QKV product");
  return gemm_technique(blas.h, a, needs_product ? gemm_f32 : nullptr, stream);
}

void StackPath::Impl::keep(int64_t l, const void* y) {
  if (layer_outputs == nullptr) return;
  TLB_CUDA_CHECK(cudaMemcpyAsync(layer_outputs + static_cast<uint64_t>(l) * act_bytes(), y,
                                 act_bytes(), cudaMemcpyDeviceToDevice, stream));
}

void StackPath::Impl::forward() {
  const int64_t T = s.tokens(), d = s.d_model, f = s.d_ff, dh = s.head_dim();
  const int64_t e = dtype_bytes(dt);
  const void* x = data.input();
  const void* pending_b2 = nullptr;  // down-projection bias whose residual add is deferred

  for (int64_t l = 0; l < s.layers; ++l) {
    const LayerWeights& w = data.layer(l);
    const StageSwitch st = fused[static_cast<size_t>(l)] ? eff : StageSwitch{};
    char* y = y_buf[l % 2];

    // ---- LN1 (and the previous layer's pending y = h1 + proj + b2)
    const void* pending = pending_b2;
    pending_b2 = nullptr;
    stage(CostStage::ln1, [&] {
      if (pending != nullptr) {
        char* y_prev = y_buf[(l - 1) % 2];
        add_norm(add_norm_args(s, dt, h1, proj, pending, y_prev, normed, w.ln1_gamma, w.ln1_beta));
        keep(l - 1, y_prev);
      } else if (st[Stage::norm]) {
        add_norm(add_norm_args(s, dt, x, nullptr, nullptr, nullptr, normed, w.ln1_gamma, w.ln1_beta));
      } else {
        layer_norm_ref(x, w.ln1_gamma, w.ln1_beta, normed);
      }
    });

    // ---- q, k, v in [batch, heads, seq, head_dim]
    stage(CostStage::qkv, [&] {
      if (st[Stage::qkv]) {
        record(Stage::qkv, technique_gemm(qkv_gemm_args(s, dt, opt.fp32_math, normed, w.w_qkv, w.b_qkv, q, k, v)));
        TLB_LAUNCH_CHECK(stream);
      } else {
        // Three GEMMs over the q, k and v row blocks of Wqkv into the packed fp32 [T, 3d] buffer.
        for (int64_t part = 0; part < 3; ++part)
          linear_f32(normed, d, static_cast<const char*>(w.w_qkv) + part * d * d * e, d, d,
                     gemm_f32 + part * d, 3 * d);
        reference::bias_split_heads(dt, gemm_f32, w.b_qkv, q, k, v, s.batch, s.seq, s.heads, dh,
                                    stream);
        record(Stage::qkv, "reference");
      }
    });

    // ---- attention -> attn_out [batch, seq, d]
    stage(CostStage::attn, [&] {
      // The shape and scale both reference attentions take.
      auto shaped = [&](auto& a) {
        a.batch = s.batch;
        a.heads = s.heads;
        a.seq = s.seq;
        a.head_dim = dh;
        a.mask = s.mask;
        a.valid_lens = data.valid_lens();
        a.scale = attention_scale(s);
      };
      if (opt.golden) {
        reference::StreamedAttentionArgs a;
        shaped(a);
        a.q = reinterpret_cast<const float*>(q);
        a.k = reinterpret_cast<const float*>(k);
        a.v = reinterpret_cast<const float*>(v);
        a.o = reinterpret_cast<float*>(attn_out);
        record(Stage::attn, reference::attention_streamed_fp32(a, stream));
      } else if (st[Stage::attn]) {
        record(Stage::attn, flash_attention(flash_args(s, dt, opt.fp32_math, data.valid_lens(), q, k,
                                                       v, attn_out, flash_ws),
                                            stream));
        TLB_LAUNCH_CHECK(stream);
      } else {
        reference::DenseAttentionArgs a;
        shaped(a);
        a.dtype = dt;
        a.precision = precision();
        a.q = q;
        a.k = k;
        a.v = v;
        a.o = attn_out;
        a.scores = reinterpret_cast<float*>(scores);
        a.probs = probs;
        a.pv_pointers = pv_pointers;
        reference::attention_dense(blas.h, a);
        TLB_LAUNCH_CHECK(stream);
        record(Stage::attn, "reference");
      }
    });

    // ---- out-projection, h1 = x + proj + bo, LN2(h1). With norm, the fused add + LayerNorm
    // adds bo and the residual in fp32; without, proj = attn_out · Wo^T + bo is rounded once,
    // by our GEMM's epilogue or by the reference's bias kernel over cuBLAS's fp32 product.
    stage(CostStage::out_proj, [&] {
      const bool out_proj_here = st[Stage::attn] && out_proj_ours;
      if (out_proj_here) {
        const void* bias = st[Stage::norm] ? nullptr : w.b_out;
        record(Stage::attn, "out_proj_" + gemm_fused(out_proj_args(s, dt, opt.fp32_math, attn_out, w.w_out,
                                                                   bias, proj), stream));
        TLB_LAUNCH_CHECK(stream);
      } else {
        // With attn, the out-projection is the technique's, in its math; without, the reference's.
        const reference::GemmPrecision p = st[Stage::attn] ? fused_precision() : precision();
        if (st[Stage::attn])
          record(Stage::attn, p == reference::GemmPrecision::tf32 ? "out_proj_cublas_tf32" : "out_proj_cublas");
        if (st[Stage::norm]) {
          linear(attn_out, d, w.w_out, d, d, proj, d, p);
        } else {
          linear_f32(attn_out, d, w.w_out, d, d, gemm_f32, d, p);
          reference::bias_add(dt, proj, gemm_f32, w.b_out, T, d, stream);
        }
      }
    });
    stage(CostStage::ln2, [&] {
      if (st[Stage::norm]) {
        add_norm(add_norm_args(s, dt, x, proj, w.b_out, h1, normed, w.ln2_gamma, w.ln2_beta));
      } else {
        reference::residual_add(dt, h1, x, proj, T * d, stream);
        layer_norm_ref(h1, w.ln2_gamma, w.ln2_beta, normed);
      }
    });

    // ---- FFN: y = h1 + W2 · act(W1 · normed + b1) + b2
    if (st[Stage::ffn]) {
      stage(CostStage::ffn_up, [&] {
        record(Stage::ffn, technique_gemm(ffn_up_args(s, dt, opt.fp32_math, normed, w.w_ff1, w.b_ff1, hidden)));
        TLB_LAUNCH_CHECK(stream);
      });
      stage(CostStage::ffn_down, [&] {
        record(Stage::ffn, technique_gemm(ffn_down_args(s, dt, opt.fp32_math, hidden, w.w_ff2, w.b_ff2, h1, y)));
        TLB_LAUNCH_CHECK(stream);
        keep(l, y);
      });
    } else {
      stage(CostStage::ffn_up, [&] {
        linear_f32(normed, d, w.w_ff1, f, d, gemm_f32, f);
        reference::bias_add(dt, hidden, gemm_f32, w.b_ff1, T, f, stream);
        reference::activation_inplace(dt, s.activation, hidden, T * f, stream);
        record(Stage::ffn, "reference");
      });
      const bool defer = defers_residual(l);
      stage(CostStage::ffn_down, [&] {
        if (defer) {
          // The next layer's fused add + LayerNorm adds the bias and the residual in fp32.
          linear(hidden, f, w.w_ff2, d, f, proj, d);
        } else {
          linear_f32(hidden, f, w.w_ff2, d, f, gemm_f32, d);
          reference::bias_add(dt, proj, gemm_f32, w.b_ff2, T, d, stream);
          reference::residual_add(dt, y, h1, proj, T * d, stream);
          keep(l, y);
        }
      });
      if (defer) pending_b2 = w.b_ff2;
    }
    x = y;
  }
  if (pending_b2 != nullptr) throw std::logic_error("layer stack: the last layer deferred its residual");
  if (marker) marker(kNumCostStages);
  finish_dispatch();
}

void StackPath::Impl::ensure_events() {
  const size_t markers = static_cast<size_t>(s.layers) * kNumCostStages + 1;
  while (events.size() < markers) events.emplace_back();
}

std::vector<int> StackPath::Impl::forward_with_events(bool as_nodes, bool layers_only) {
  std::vector<int> stage_of;
  marker = [&](int stage) {
    if (layers_only && stage != static_cast<int>(CostStage::ln1) && stage != kNumCostStages) return;
    // Inside a capture a plain record only orders streams; the external flag makes it a node
    // (and is refused outside one).
    TLB_CUDA_CHECK(cudaEventRecordWithFlags(events[stage_of.size()], stream, as_nodes ? cudaEventRecordExternal : 0u));
    stage_of.push_back(stage);
  };
  const OnExit clear{[&] { marker = nullptr; }};
  forward();
  return stage_of;
}

void StackPath::Impl::launch_captured(CapturedGraph& g, const std::function<void()>& body) {
  if (g.exec == nullptr) {
    if (!variants_recorded) {
      forward();
      TLB_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
    capture(g, body);
  }
  TLB_CUDA_CHECK(cudaGraphLaunch(g.exec, stream));
  TLB_LAUNCH_CHECK(stream);
}

void StackPath::Impl::capture(CapturedGraph& into, const std::function<void()>& body) {
  cudaError_t err = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  if (err != cudaSuccess) {
    cudaGetLastError();
    throw_capture_failure(std::string("cudaStreamBeginCapture: ") + cudaGetErrorString(err),
                          false, false);
  }
  try {
    if (body) {
      body();
    } else {
      forward();
    }
  } catch (const std::exception& ex) {
    // End the broken capture so the stream is usable again, then report what broke it.
    cudaGraph_t partial = nullptr;
    cudaStreamEndCapture(stream, &partial);
    if (partial) cudaGraphDestroy(partial);
    cudaGetLastError();
    const auto* dev = dynamic_cast<const DeviceError*>(&ex);
    throw_capture_failure(ex.what(), dev != nullptr && dev->sticky(),
                          dynamic_cast<const DeviceOutOfMemory*>(&ex) != nullptr);
  }
  err = cudaStreamEndCapture(stream, &into.graph);
  if (err != cudaSuccess) {
    cudaGetLastError();
    into.graph = nullptr;
    throw_capture_failure(std::string("cudaStreamEndCapture: ") + cudaGetErrorString(err), false,
                          false);
  }
  err = cudaGraphInstantiate(&into.exec, into.graph, 0);
  if (err != cudaSuccess) {
    cudaGetLastError();
    into.exec = nullptr;
    cudaGraphDestroy(into.graph);  // a later capture into the same holder starts clean
    into.graph = nullptr;
    throw_capture_failure(std::string("cudaGraphInstantiate: ") + cudaGetErrorString(err), false,
                          err == cudaErrorMemoryAllocation);
  }
  // Upload now so the first timed replay does not pay for it.
  TLB_CUDA_CHECK(cudaGraphUpload(into.exec, stream));
  TLB_CUDA_CHECK(cudaStreamSynchronize(stream));
}

StackPath::StackPath(const CaseData& data, const PathOptions& opt, cudaStream_t stream)
    : impl_(std::make_unique<Impl>(data, opt, stream)) {}

StackPath::~StackPath() = default;

void StackPath::run() {
  if (impl_->captured.exec != nullptr) return impl_->launch_captured(impl_->captured);
  impl_->forward();
}

void StackPath::run_replayed() {
  impl_->launch_captured(impl_->captured.exec != nullptr ? impl_->captured : impl_->replay);
}

void StackPath::run_eager() { impl_->forward(); }

std::vector<bool> StackPath::deferred_layers() const {
  std::vector<bool> d(static_cast<size_t>(impl_->s.layers));
  for (int64_t l = 0; l < impl_->s.layers; ++l) d[static_cast<size_t>(l)] = impl_->defers_residual(l);
  return d;
}

StageTimes StackPath::Impl::timed_events(bool layers_only, EventsGraph& graph) {
  const PdlSuspension serial;
  ensure_events();
  std::vector<int> eager_stage;
  if (captured.exec != nullptr) {
    launch_captured(graph.graph, [&] { graph.stage = forward_with_events(true, layers_only); });
  } else {
    eager_stage = forward_with_events(false, layers_only);
  }
  const std::vector<int>& stage_of = captured.exec != nullptr ? graph.stage : eager_stage;
  TLB_CUDA_CHECK(cudaStreamSynchronize(stream));
  StageTimes t;
  for (size_t i = 0; i + 1 < stage_of.size(); ++i) {
    const double ms = elapsed_ms(events[i], events[i + 1]);
    t.ms[static_cast<size_t>(stage_of[i])] += ms;
    t.total_ms += ms;
  }
  return t;
}

StageTimes StackPath::run_stage_events() {
  return impl_->timed_events(false, impl_->with_events);
}

double StackPath::run_layer_events() {
  return impl_->timed_events(true, impl_->with_layer_events).total_ms;
}

void StackPath::run_serial() {
  Impl& m = *impl_;
  const PdlSuspension serial;
  if (m.captured.exec == nullptr) return m.forward();
  m.launch_captured(m.serial);
}

void StackPath::run_replayed_repeating(CostStage stage) {
  Impl& m = *impl_;
  m.launch_captured(m.repeated[static_cast<int>(stage)], [&] {
    m.repeat = static_cast<int>(stage);
    const OnExit reset{[&] { m.repeat = -1; }};
    m.forward();
  });
}

void StackPath::run_stage_alone(CostStage stage) {
  Impl& m = *impl_;
  if (!m.variants_recorded) throw std::logic_error("run_stage_alone: run a forward first (its buffers are the input)");
  // Each launch after its predecessor drains, as in the events' forward it is set beside.
  const PdlSuspension serial;
  m.only = static_cast<int>(stage);
  const OnExit reset{[&] { m.only = -1; }};
  m.forward();
}

bool StackPath::has_replay_graph() const {
  return impl_->captured.exec != nullptr || impl_->replay.exec != nullptr;
}

const void* StackPath::output() const { return impl_->y_buf[(impl_->s.layers - 1) % 2]; }

DType StackPath::dtype() const { return impl_->dt; }

std::vector<float> StackPath::output_host() const {
  return device_to_float(output(), impl_->dt, impl_->act_elems(), impl_->stream);
}

std::vector<std::vector<float>> StackPath::layer_outputs_host() const {
  std::vector<std::vector<float>> out;
  if (impl_->layer_outputs == nullptr) return out;
  const std::vector<float> all = device_to_float(
      impl_->layer_outputs, impl_->dt, impl_->s.layers * impl_->act_elems(), impl_->stream);
  const size_t n = static_cast<size_t>(impl_->act_elems());
  for (int64_t l = 0; l < impl_->s.layers; ++l)
    out.emplace_back(all.begin() + static_cast<ptrdiff_t>(l * n),
                     all.begin() + static_cast<ptrdiff_t>((l + 1) * n));
  return out;
}

void StackPath::poison() {
  // 0xFF bytes are NaN in fp16 (0xFFFF), bf16 (0xFFFF) and fp32 (0xFFFFFFFF) alike.
  const uint64_t bytes = impl_->act_bytes();
  TLB_CUDA_CHECK(cudaMemsetAsync(impl_->y_buf[0], 0xFF, bytes, impl_->stream));
  TLB_CUDA_CHECK(cudaMemsetAsync(impl_->y_buf[1], 0xFF, bytes, impl_->stream));
  if (impl_->layer_outputs != nullptr)
    TLB_CUDA_CHECK(cudaMemsetAsync(impl_->layer_outputs, 0xFF,
                                   bytes * static_cast<uint64_t>(impl_->s.layers), impl_->stream));
}

const std::vector<StageDispatch>& StackPath::dispatch() const { return impl_->dispatch; }

uint64_t StackPath::workspace_bytes() const { return impl_->ws.bytes(); }

cudaStream_t StackPath::stream() const { return impl_->stream; }

std::string dispatch_text(const std::vector<StageDispatch>& dispatch) {
  std::string out;
  for (const StageDispatch& d : dispatch) {
    if (!out.empty()) out += ';';
    out += std::string(to_string(d.stage)) + "=" + (d.variant.empty() ? (d.fused ? "fused" : "reference") : d.variant);
  }
  return out;
}

std::string stage_bits(const StageSwitch& s) {
  std::string b(kNumStages, '0');
  for (int i = 0; i < kNumStages; ++i) b[static_cast<size_t>(i)] = s.on[i] ? '1' : '0';
  return b;
}

}  // namespace tlb
