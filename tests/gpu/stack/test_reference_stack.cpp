// The cuBLAS reference path against the CPU fp64 oracle on small shapes covering seq 1, 7, 63
// and 257, batch 1 and 3, d_model 36 (not a multiple of 8: scalar paths), 64, 80, 128 and
// 1600, every mask (padding with lengths 1 and seq), every activation and every dtype; plus
// the properties the runner relies on: poisoned outputs are fully rewritten, runs repeat bit
// for bit, allocations equal the plan, and the per-layer trace is each layer's output.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "common/cuda_check.hpp"
#include "gpu_test_util.hpp"
#include "stack/layer_stack.hpp"
#include "stack/memory_plan.hpp"
#include "test_support.hpp"

namespace tlb::test {
namespace {

constexpr DType kDTypes[] = {DType::fp16, DType::bf16, DType::fp32};

void check_reference_against_oracle(const CaseSpec& c) {
  TestStream stream;
  for (DType dt : kDTypes) {
    INFO(label(c, dt));
    const std::vector<double> want = oracle_output(c, dt);
    CaseData data(c, dt, dt, stream.get());
    const PathResult r = run_path(data, PathOptions{}, stream.get());
    const ErrorStats e = compare(r.output, want);
    INFO(describe(e));
    CHECK(e.nan == 0);
    CHECK(e.inf == 0);
    CHECK(e.rel_l2 <= oracle_tolerance(dt));
    for (const StageDispatch& sd : r.dispatch) {
      CHECK_FALSE(sd.fused);
      if (sd.stage != Stage::graph) CHECK(sd.variant == "reference");
    }
  }
}

}  // namespace

TEST_CASE("reference matches the oracle: one token per sequence", "[gpu][stack][reference]") {
  TLB_REQUIRE_GPU();
  check_reference_against_oracle(small_case(201, 1, 1, 64, 4, 128, 2, MaskKind::none));
}

TEST_CASE("reference matches the oracle: seq 7, batch 3, causal, gelu_tanh",
          "[gpu][stack][reference]") {
  TLB_REQUIRE_GPU();
  check_reference_against_oracle(
      small_case(202, 3, 7, 64, 2, 96, 1, MaskKind::causal, Activation::gelu_tanh));
}

TEST_CASE("reference matches the oracle: seq 63, padding lengths 63, 1, 30, relu",
          "[gpu][stack][reference]") {
  TLB_REQUIRE_GPU();
  check_reference_against_oracle(
      small_case(203, 3, 63, 128, 4, 256, 2, MaskKind::padding, Activation::relu, {63, 1, 30}));
}

TEST_CASE("reference matches the oracle: seq 257, one head of 64, causal",
          "[gpu][stack][reference]") {
  TLB_REQUIRE_GPU();
  check_reference_against_oracle(small_case(204, 1, 257, 64, 1, 64, 1, MaskKind::causal));
}

TEST_CASE("reference matches the oracle: d_model 1600, 25 heads, d_ff 6400",
          "[gpu][stack][reference]") {
  TLB_REQUIRE_GPU();
  check_reference_against_oracle(small_case(205, 1, 7, 1600, 25, 6400, 1, MaskKind::none));
}

TEST_CASE("reference matches the oracle: d_model 36 and d_ff 50 (unaligned rows)",
          "[gpu][stack][reference]") {
  TLB_REQUIRE_GPU();
  check_reference_against_oracle(
      small_case(206, 2, 13, 36, 3, 50, 2, MaskKind::padding, Activation::gelu, {13, 4}));
}

TEST_CASE("reference matches the oracle: head_dim 80, relu", "[gpu][stack][reference]") {
  TLB_REQUIRE_GPU();
  check_reference_against_oracle(
      small_case(207, 2, 33, 80, 1, 72, 1, MaskKind::none, Activation::relu));
}

TEST_CASE("a poisoned output is fully rewritten by one run", "[gpu][stack][reference]") {
  TLB_REQUIRE_GPU();
  TestStream stream;
  const CaseSpec c = small_case(211, 2, 19, 64, 2, 128, 3, MaskKind::causal);
  for (DType dt : kDTypes) {
    INFO(to_string(dt));
    CaseData data(c, dt, dt, stream.get());
    StackPath path(data, PathOptions{}, stream.get());
    path.poison();
    const std::vector<float> poisoned = path.output_host();
    int64_t nan_before = 0;
    for (float x : poisoned) nan_before += std::isnan(x) ? 1 : 0;
    CHECK(nan_before == static_cast<int64_t>(poisoned.size()));  // the poison is real
    path.run();
    const ErrorStats e = compare(path.output_host(), oracle_output(c, dt));
    INFO(describe(e));
    CHECK(e.nan == 0);
    CHECK(e.rel_l2 <= oracle_tolerance(dt));
  }
}

TEST_CASE("the reference repeats bit for bit", "[gpu][stack][reference]") {
  TLB_REQUIRE_GPU();
  TestStream stream;
  const CaseSpec c = small_case(212, 2, 33, 128, 2, 256, 2, MaskKind::padding, Activation::gelu, {33, 20});
  for (DType dt : kDTypes) {
    INFO(to_string(dt));
    CaseData data(c, dt, dt, stream.get());
    StackPath path(data, PathOptions{}, stream.get());
    path.poison();
    path.run();
    const std::vector<float> first = path.output_host();
    path.poison();
    path.run();
    CHECK(bit_identical(first, path.output_host()));
  }
}

TEST_CASE("workspace allocations equal the memory plan", "[gpu][stack][reference]") {
  TLB_REQUIRE_GPU();
  TestStream stream;
  const CaseSpec c = small_case(213, 2, 17, 64, 2, 128, 2, MaskKind::causal);
  for (DType dt : kDTypes) {
    CaseData data(c, dt, dt, stream.get());
    for (const char* bits : {"00000", "11000", "00110", "11111"}) {
      for (bool keep : {false, true}) {
        INFO(to_string(dt) << " " << bits << " keep_layer_outputs=" << keep);
        PathOptions opt = options_from_bits(bits);
        opt.keep_layer_outputs = keep;
        StackPath path(data, opt, stream.get());
        CHECK(path.workspace_bytes() ==
              aligned_total_bytes(workspace_layout(c.shape, dt, opt.stages, opt.policy, false,
                                                   keep, opt.fp32_math)));
      }
    }
  }
  CaseData golden_data(c, DType::fp32, DType::bf16, stream.get());
  PathOptions g;
  g.golden = true;
  StackPath golden(golden_data, g, stream.get());
  CHECK(golden.workspace_bytes() ==
        aligned_total_bytes(workspace_layout(c.shape, DType::bf16, StageSwitch{}, "", true)));
}

TEST_CASE("the per-layer trace holds each layer's output", "[gpu][stack][reference]") {
  TLB_REQUIRE_GPU();
  TestStream stream;
  const CaseSpec c = small_case(214, 2, 11, 64, 4, 96, 3, MaskKind::padding, Activation::gelu_tanh, {11, 6});
  for (DType dt : kDTypes) {
    INFO(to_string(dt));
    std::vector<std::vector<double>> want_layers;
    const std::vector<double> want = oracle_output(c, dt, &want_layers);
    CaseData data(c, dt, dt, stream.get());
    PathOptions opt;
    opt.keep_layer_outputs = true;
    const PathResult r = run_path(data, opt, stream.get());
    REQUIRE(r.layers.size() == 3);
    for (size_t l = 0; l < 3; ++l) {
      const ErrorStats e = compare(r.layers[l], want_layers[l]);
      INFO("layer " << l << ": " << describe(e));
      CHECK(e.rel_l2 <= oracle_tolerance(dt));
    }
    CHECK(bit_identical(r.layers.back(), r.output));
  }
}

}  // namespace tlb::test
