// Technique composition: every one of the 32 stage switches, mixed E/F policies, the deferred
// residual between layers, graph replay against eager runs, and the dispatch record. All
// outputs are checked against the fp64 oracle with the dtype's tolerance, so these pass only
// when the hand-written kernels (gemm, attention, add+LayerNorm) are right on these shapes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>
#include <vector>

#include "common/cuda_check.hpp"
#include "gpu_test_util.hpp"
#include "stack/layer_stack.hpp"
#include "stack/memory_plan.hpp"
#include "test_support.hpp"

namespace tlb::test {
namespace {

constexpr DType kDTypes[] = {DType::fp16, DType::bf16, DType::fp32};

std::string bits_of(uint32_t config) {
  std::string b(kNumStages, '0');
  for (int i = 0; i < kNumStages; ++i)
    if (config & (1u << (kNumStages - 1 - i))) b[static_cast<size_t>(i)] = '1';
  return b;
}

// What the dispatch record must say for a configuration that ran.
void check_dispatch(const std::vector<StageDispatch>& dispatch, const StageSwitch& wanted,
                    bool any_fused_layer) {
  REQUIRE(dispatch.size() == static_cast<size_t>(kNumStages));
  for (int i = 0; i < kNumStages; ++i) {
    const StageDispatch& sd = dispatch[static_cast<size_t>(i)];
    INFO("stage " << to_string(sd.stage) << " variant '" << sd.variant << "' reason '" << sd.reason << "'");
    CHECK(static_cast<int>(sd.stage) == i);
    CHECK(sd.wanted == wanted.on[i]);
    CHECK_FALSE(sd.variant.empty());
    if (sd.stage == Stage::graph) {
      CHECK(sd.fused == wanted.on[i]);
      continue;
    }
    if (sd.fused) {
      CHECK(sd.wanted);
      CHECK(any_fused_layer);
      CHECK(sd.variant != "reference");  // a fused stage names the kernel that ran
    }
    if (sd.wanted && !sd.fused) CHECK_FALSE(sd.reason.empty());  // fallbacks say why
    if (!sd.wanted) CHECK(sd.variant == "reference");
  }
}

struct ConfigCheck {
  std::string bits;
  std::string policy;
  Fp32Math math = Fp32Math::tf32;
};

double tolerance(DType dt, Fp32Math math) {
  return dt == DType::fp32 && math == Fp32Math::tf32 ? tf32_tolerance() : oracle_tolerance(dt);
}

void check_configs_against_oracle(const CaseSpec& c, const std::vector<ConfigCheck>& configs) {
  TestStream stream;
  for (DType dt : kDTypes) {
    const std::vector<double> want = oracle_output(c, dt);
    CaseData data(c, dt, dt, stream.get());
    for (const ConfigCheck& cc : configs) {
      if (dt != DType::fp32 && cc.math == Fp32Math::ieee) continue;  // the mode is fp32 only
      INFO(label(c, dt) << " config " << cc.bits << " policy '" << cc.policy << "' fp32 "
                        << to_string(cc.math));
      const PathOptions opt = options_from_bits(cc.bits, cc.policy, cc.math);
      const PathResult r = run_path(data, opt, stream.get());
      const ErrorStats e = compare(r.output, want);
      INFO(describe(e));
      CHECK(e.nan == 0);
      CHECK(e.inf == 0);
      CHECK(e.rel_l2 <= tolerance(dt, cc.math));
      bool any_fused_layer = cc.policy.size() != static_cast<size_t>(c.shape.layers);
      for (char p : cc.policy) any_fused_layer |= p == 'F';
      check_dispatch(r.dispatch, opt.stages, any_fused_layer);
    }
  }
}

// Each configuration in fp32's two math modes (fp16/bf16 run them in their own math).
std::vector<ConfigCheck> in_both_fp32_maths(std::initializer_list<const char*> bits) {
  std::vector<ConfigCheck> configs;
  for (const char* b : bits)
    for (Fp32Math math : {Fp32Math::tf32, Fp32Math::ieee}) configs.push_back({b, "", math});
  return configs;
}

// f(dtype, math) for each dtype in each fp32 math mode it has (ieee is fp32's only).
template <class F>
void for_each_dtype_and_math(F f) {
  for (DType dt : kDTypes)
    for (Fp32Math math : {Fp32Math::tf32, Fp32Math::ieee})
      if (dt == DType::fp32 || math == Fp32Math::tf32) f(dt, math);
}

// The attention stage's dispatch record of configuration `bits` on the case, in dtype and
// fp32 math.
StageDispatch attn_dispatch(const CaseSpec& c, DType dt, Fp32Math math, const char* bits, cudaStream_t stream) {
  CaseData data(c, dt, dt, stream);
  const PathResult r = run_path(data, options_from_bits(bits, "", math), stream);
  const auto sd = std::find_if(r.dispatch.begin(), r.dispatch.end(),
                               [](const StageDispatch& d) { return d.stage == Stage::attn; });
  REQUIRE(sd != r.dispatch.end());
  return *sd;
}

}  // namespace

TEST_CASE("all 32 stage switches match the oracle", "[gpu][stack][configs]") {
  TLB_REQUIRE_GPU();
  // head_dim 64 (what the hand-written kernels target), seq 40 (not a tile multiple), padding
  // with a short sequence, two layers so the residual hand-over between layers runs.
  const CaseSpec c = small_case(401, 2, 40, 128, 2, 256, 2, MaskKind::padding, Activation::gelu, {40, 17});
  std::vector<ConfigCheck> configs;
  for (uint32_t cfg = 0; cfg < (1u << kNumStages); ++cfg) configs.push_back({bits_of(cfg), ""});
  // fp32 with IEEE math in the fused kernels too: the tight fp32 bound applies.
  for (const char* bits : {"11110", "11111", "00010", "10100"})
    configs.push_back({bits, "", Fp32Math::ieee});
  check_configs_against_oracle(c, configs);
}

TEST_CASE("stage switches compose on a causal shape with an odd sequence", "[gpu][stack][configs]") {
  TLB_REQUIRE_GPU();
  const CaseSpec c = small_case(402, 1, 77, 128, 2, 384, 2, MaskKind::causal, Activation::gelu_tanh);
  check_configs_against_oracle(c, {{"10000", ""}, {"01000", ""}, {"00100", ""}, {"00010", ""},
                                   {"11110", ""}, {"11111", ""}, {"01010", ""}, {"10101", ""}});
}

// Above kOutProjectionOursMaxOutputs the attention's out-projection runs on cuBLAS: in the
// fused path's fp32 math (TF32, or IEEE where the run asks for it), named so in the dispatch;
// fp16/bf16 as the reference runs it.
TEST_CASE("the attention's cuBLAS out-projection runs in the fused path's fp32 math", "[gpu][stack][configs]") {
  TLB_REQUIRE_GPU();
  const CaseSpec c = small_case(409, 2, 257, 256, 4, 512, 2, MaskKind::causal, Activation::gelu);
  REQUIRE(c.shape.tokens() * c.shape.d_model > kOutProjectionOursMaxOutputs);
  check_configs_against_oracle(c, in_both_fp32_maths({"01000", "01010", "11110", "11111"}));
  TestStream stream;
  for_each_dtype_and_math([&](DType dt, Fp32Math math) {
    const std::string attn = attn_dispatch(c, dt, math, "01010", stream.get()).variant;
    INFO(to_string(dt) << " " << to_string(math) << ": " << attn);
    const bool tf32 = dt == DType::fp32 && math == Fp32Math::tf32;
    CHECK(attn.find(tf32 ? "+out_proj_cublas_tf32" : "+out_proj_cublas") != std::string::npos);
    if (!tf32) CHECK(attn.find("out_proj_cublas_tf32") == std::string::npos);
  });
}

// fp32 in IEEE math runs the techniques' GEMMs as cuBLAS's product and the epilogue pass
// (gemm_prefers_cublas), the head split's product through the planned fp32 buffer, eager and
// captured, fused and reference layers mixed; the dispatch names it.
TEST_CASE("fp32 ieee techniques' GEMMs run on cuBLAS with the epilogue pass", "[gpu][stack][configs]") {
  TLB_REQUIRE_GPU();
  const CaseSpec c = small_case(410, 2, 37, 192, 3, 320, 2, MaskKind::padding, Activation::gelu, {37, 9});
  check_configs_against_oracle(c, {{"10000", "", Fp32Math::ieee}, {"00100", "", Fp32Math::ieee},
                                   {"10110", "EF", Fp32Math::ieee}, {"10111", "FE", Fp32Math::ieee},
                                   {"11111", "", Fp32Math::ieee}});
  TestStream stream;
  CaseData data(c, DType::fp32, DType::fp32, stream.get());
  const PathResult r = run_path(data, options_from_bits("10100", "", Fp32Math::ieee), stream.get());
  for (const StageDispatch& sd : r.dispatch) {
    INFO(to_string(sd.stage) << ": " << sd.variant);
    if (sd.stage == Stage::qkv || sd.stage == Stage::ffn) CHECK(sd.variant == "cublas+epilogue_pass");
  }
}

// Heads of 80 and 24 columns (d_model 240 over 3 heads, 96 over 4): the attention technique
// runs our kernel on them in every dtype and fp32 math, not the reference (on the mma.sync,
// tf32 and FMA kernels compiled at 128 and 64 columns, or the sm_90a kernel in fp16/bf16).
TEST_CASE("narrow heads run the fused attention in every dtype", "[gpu][stack][configs]") {
  TLB_REQUIRE_GPU();
  for (const CaseSpec& c : {small_case(411, 2, 45, 240, 3, 480, 2, MaskKind::causal, Activation::gelu),
                            small_case(412, 2, 70, 96, 4, 192, 1, MaskKind::padding, Activation::relu, {70, 33})}) {
    check_configs_against_oracle(c, in_both_fp32_maths({"01000", "11111"}));
    TestStream stream;
    for_each_dtype_and_math([&](DType dt, Fp32Math math) {
      const StageDispatch sd = attn_dispatch(c, dt, math, "01000", stream.get());
      INFO(label(c, dt) << " " << to_string(math) << ": " << sd.variant << " (" << sd.reason << ")");
      CHECK(sd.fused);
      CHECK(sd.variant.find("_d" + std::to_string(c.shape.head_dim())) != std::string::npos);
    });
  }
}

TEST_CASE("mixed E/F policies match the oracle", "[gpu][stack][configs]") {
  TLB_REQUIRE_GPU();
  const CaseSpec c = small_case(403, 2, 24, 128, 2, 256, 2, MaskKind::none, Activation::relu);
  check_configs_against_oracle(c, {{"11111", "EF"}, {"11111", "FE"}, {"11110", "EF"},
                                   {"11010", "FE"}, {"00010", "EF"}, {"00010", "FE"},
                                   {"11111", "EE"}, {"11111", "FF"}});
}

TEST_CASE("the norm stage's residual hand-over keeps every layer's output", "[gpu][stack][configs]") {
  TLB_REQUIRE_GPU();
  TestStream stream;
  // norm on, ffn off: layers 0 -> 1 hand the down-projection residual to the next LN1; layer
  // 2 is 'E', so layer 1 adds its own; the trace must still be every layer's y.
  const CaseSpec c = small_case(404, 2, 21, 64, 1, 128, 3, MaskKind::causal);
  for (DType dt : kDTypes) {
    std::vector<std::vector<double>> want_layers;
    const std::vector<double> want = oracle_output(c, dt, &want_layers);
    CaseData data(c, dt, dt, stream.get());
    for (const char* policy : {"FFE", "FFF", "EFF"}) {
      for (const char* bits : {"00010", "00011", "11010"}) {
        INFO(label(c, dt) << " config " << bits << " policy " << policy);
        PathOptions opt = options_from_bits(bits, policy);
        opt.keep_layer_outputs = true;
        const PathResult r = run_path(data, opt, stream.get());
        REQUIRE(r.layers.size() == 3);
        for (size_t l = 0; l < 3; ++l) {
          const ErrorStats e = compare(r.layers[l], want_layers[l]);
          INFO("layer " << l << ": " << describe(e));
          CHECK(e.nan == 0);
          CHECK(e.rel_l2 <= tolerance(dt, Fp32Math::tf32));
        }
        CHECK(bit_identical(r.layers.back(), r.output));
      }
    }
  }
}

TEST_CASE("graph replay is bit-identical to eager runs", "[gpu][stack][configs][graph]") {
  TLB_REQUIRE_GPU();
  TestStream stream;
  const CaseSpec c = small_case(405, 2, 33, 128, 2, 256, 3, MaskKind::padding, Activation::gelu, {33, 5});
  for (DType dt : kDTypes) {
    CaseData data(c, dt, dt, stream.get());
    for (const char* eager_bits : {"00000", "11110", "01000", "00010", "10100"}) {
      std::string graph_bits = eager_bits;
      graph_bits[4] = '1';
      INFO(to_string(dt) << " " << eager_bits << " vs " << graph_bits);
      PathOptions eager_opt = options_from_bits(eager_bits);
      PathOptions graph_opt = options_from_bits(graph_bits);
      eager_opt.keep_layer_outputs = graph_opt.keep_layer_outputs = true;
      const PathResult eager = run_path(data, eager_opt, stream.get());
      StackPath graph(data, graph_opt, stream.get());
      // Replay twice from poisoned buffers: a replay must rewrite everything, every time.
      for (int rep = 0; rep < 2; ++rep) {
        graph.poison();
        graph.run();
        CHECK(bit_identical(graph.output_host(), eager.output));
        const std::vector<std::vector<float>> layers = graph.layer_outputs_host();
        REQUIRE(layers.size() == eager.layers.size());
        for (size_t l = 0; l < layers.size(); ++l) CHECK(bit_identical(layers[l], eager.layers[l]));
      }
      CHECK(graph.dispatch().back().fused);
      CHECK(graph.dispatch().back().variant == "cuda_graph");
    }
  }
}

// run_replayed(): an eager path's own forward captured on first use (the runner times a
// host-bound baseline that way), a graph path's graph as it is.
TEST_CASE("an eager path replayed from a graph is bit-identical to its eager runs", "[gpu][stack][configs][graph]") {
  TLB_REQUIRE_GPU();
  TestStream stream;
  const CaseSpec c = small_case(406, 2, 33, 128, 2, 256, 3, MaskKind::causal, Activation::gelu);
  for (DType dt : kDTypes) {
    CaseData data(c, dt, dt, stream.get());
    for (const char* bits : {"00000", "01000", "11110", "11111"}) {
      INFO(to_string(dt) << " " << bits);
      PathOptions opt = options_from_bits(bits);
      opt.keep_layer_outputs = true;
      const PathResult eager = run_path(data, opt, stream.get());
      StackPath path(data, opt, stream.get());
      CHECK(path.has_replay_graph() == (bits[4] == '1'));  // an eager path captures on first use
      for (int rep = 0; rep < 2; ++rep) {
        path.poison();
        path.run_replayed();
        CHECK(path.has_replay_graph());
        CHECK(bit_identical(path.output_host(), eager.output));
        const std::vector<std::vector<float>> layers = path.layer_outputs_host();
        REQUIRE(layers.size() == eager.layers.size());
        for (size_t l = 0; l < layers.size(); ++l) CHECK(bit_identical(layers[l], eager.layers[l]));
      }
      // The eager run still runs eagerly after the capture, and agrees.
      path.poison();
      path.run();
      CHECK(bit_identical(path.output_host(), eager.output));
    }
  }
}

// tlbench explain's two ways of timing stages must not change what a forward computes: the
// events are only markers (graph nodes in a graph configuration), a stage run twice
// recomputes the same outputs (its work reads no buffer it writes), and the forward without
// PDL is the same forward. Configurations cover the reference, every fused stage, the
// norm-only path whose FFN defers its residual into the next layer's LayerNorm, and a graph.
TEST_CASE("stage events and repeated stages leave a forward's output bit-identical", "[gpu][stack][configs][explain]") {
  TLB_REQUIRE_GPU();
  TestStream stream;
  const CaseSpec c = small_case(407, 2, 33, 128, 2, 256, 3, MaskKind::causal, Activation::gelu);
  for (DType dt : kDTypes) {
    CaseData data(c, dt, dt, stream.get());
    for (const char* bits : {"00000", "00010", "01110", "11111"}) {
      INFO(to_string(dt) << " " << bits);
      const PathOptions opt = options_from_bits(bits);
      const PathResult eager = run_path(data, opt, stream.get());
      StackPath path(data, opt, stream.get());
      path.poison();
      const StageTimes t = path.run_stage_events();
      CHECK(bit_identical(path.output_host(), eager.output));
      double sum = 0;
      for (double ms : t.ms) {
        CHECK(ms >= 0);
        sum += ms;
      }
      CHECK(t.total_ms > 0);
      CHECK(sum == Approx(t.total_ms).epsilon(1e-9));
      // A second time (a graph configuration's events graph now exists and is replayed).
      path.poison();
      CHECK(path.run_stage_events().total_ms > 0);
      CHECK(bit_identical(path.output_host(), eager.output));
      path.poison();
      path.run_serial();
      CHECK(bit_identical(path.output_host(), eager.output));
      // With events before each layer only, twice (a graph configuration's own graph, then
      // replayed): a positive total, the output untouched, and the stage events still read
      // each stage (their graph keeps its own intervals' stages).
      for (int i = 0; i < 2; ++i) {
        path.poison();
        CHECK(path.run_layer_events() > 0);
        CHECK(bit_identical(path.output_host(), eager.output));
      }
      const StageTimes again = path.run_stage_events();
      for (double ms : again.ms) CHECK(ms > 0);  // every stage has work in every configuration
      CHECK(again.total_ms > 0);
      for (int s = 0; s < kNumCostStages; ++s) {
        INFO(to_string(static_cast<CostStage>(s)));
        path.poison();
        path.run_replayed_repeating(static_cast<CostStage>(s));
        CHECK(bit_identical(path.output_host(), eager.output));
      }
      // A stage run alone after a forward (tlbench_kernel_bench stages): the only stage that
      // writes the output buffer is ffn_down, whose last layer writes what the forward's did;
      // but where a layer defers its residual (00010), ln1 adds it into the previous layer's
      // output buffer, and with three layers layer 1's is the output's.
      const std::vector<bool> deferred = path.deferred_layers();
      const bool defers = std::find(deferred.begin(), deferred.end(), true) != deferred.end();
      CHECK(defers == (std::string(bits) == "00010"));
      for (int s = 0; s < kNumCostStages; ++s) {
        const auto cs = static_cast<CostStage>(s);
        INFO("alone: " << to_string(cs));
        path.run();
        path.run_stage_alone(cs);
        if (defers && cs == CostStage::ln1) {
          CHECK_FALSE(bit_identical(path.output_host(), eager.output));
        } else {
          CHECK(bit_identical(path.output_host(), eager.output));
        }
      }
      // The plain forward is untouched by either.
      path.poison();
      path.run();
      CHECK(bit_identical(path.output_host(), eager.output));
    }
  }
}

TEST_CASE("a stage run alone needs a forward first: its buffers are the input", "[gpu][stack][explain]") {
  TLB_REQUIRE_GPU();
  TestStream stream;
  const CaseSpec c = small_case(408, 1, 8, 64, 1, 64, 1);
  CaseData data(c, DType::fp16, DType::fp16, stream.get());
  StackPath path(data, options_from_bits("11110"), stream.get());
  CHECK_THROWS_AS(path.run_stage_alone(CostStage::attn), std::logic_error);
  path.run();
  path.run_stage_alone(CostStage::attn);
  TLB_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
}

TEST_CASE("a graph that cannot be captured is reported, not hidden", "[gpu][stack][configs][graph]") {
  TLB_REQUIRE_GPU();
  TestStream stream;
  const CaseSpec c = small_case(406, 1, 8, 64, 1, 64, 1);
  CaseData data(c, DType::fp16, DType::fp16, stream.get());
  // The legacy default stream cannot be captured.
  try {
    StackPath path(data, options_from_bits("00001"), nullptr);
    FAIL("capturing the legacy default stream should have failed");
  } catch (const DeviceError& e) {
    CHECK_THAT(e.what(), Catch::Contains("graph capture failed"));
    CHECK_FALSE(e.sticky());
  }
  // The context is still usable afterwards.
  const PathResult r = run_path(data, PathOptions{}, stream.get());
  const ErrorStats e = compare(r.output, oracle_output(c, DType::fp16));
  CHECK(e.rel_l2 <= oracle_tolerance(DType::fp16));
}

TEST_CASE("fused configurations rewrite poisoned outputs", "[gpu][stack][configs]") {
  TLB_REQUIRE_GPU();
  TestStream stream;
  const CaseSpec c = small_case(407, 3, 9, 64, 1, 192, 2, MaskKind::padding, Activation::relu, {9, 1, 5});
  for (DType dt : kDTypes) {
    CaseData data(c, dt, dt, stream.get());
    for (const char* bits : {"11110", "11111", "00100"}) {
      INFO(to_string(dt) << " " << bits);
      StackPath path(data, options_from_bits(bits), stream.get());
      for (int rep = 0; rep < 2; ++rep) {
        path.poison();
        path.run();
        int64_t nan = 0;
        for (float x : path.output_host()) nan += std::isnan(x) ? 1 : 0;
        CHECK(nan == 0);
      }
    }
  }
}

}  // namespace tlb::test
