// The plan: viability from the stack's own memory layouts, the attn-only baseline where the
// dense reference cannot fit, the official 448-point plan, its printing and JSON.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <string>

#include "config.hpp"
#include "grid.hpp"
#include "plan_report.hpp"
#include "attention/attention.hpp"
#include "stack/memory_plan.hpp"

using tlb::DType;
using tlb::Stage;
using tlb::StageSwitch;

namespace {

const tlb::CaseSet& official_cases() {
  static const tlb::CaseSet set =
      tlb::load_cases(std::string(TLBENCH_SOURCE_DIR) + "/configs/cases.json");
  return set;
}

const tlb::CaseSpec& official(int id) { return official_cases().cases[static_cast<size_t>(id - 1)]; }

constexpr uint64_t kGiB = 1ull << 30;

StageSwitch only(Stage s) {
  StageSwitch sw;
  sw[s] = true;
  return sw;
}

std::string capture(const tlb::Plan& plan) {
  std::FILE* f = std::tmpfile();
  REQUIRE(f != nullptr);
  tlb::print_plan(plan, f);
  std::rewind(f);
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  std::fclose(f);
  return text;
}

}  // namespace

TEST_CASE("a point is viable exactly when its predicted peak fits the budget", "[plan]") {
  const tlb::CaseSpec& c = official(6);
  const StageSwitch cand = only(Stage::ffn);
  const uint64_t peak = tlb::point_peak_bytes(c.shape, DType::fp16, StageSwitch{}, cand, c.policy);
  const tlb::PointViability fits = tlb::assess_point(c, DType::fp16, cand, peak);
  CHECK(fits.viable);
  CHECK(fits.peak_bytes == peak);
  CHECK(fits.baseline.is_reference);
  CHECK(fits.reason.empty());
  const tlb::PointViability tight = tlb::assess_point(c, DType::fp16, cand, peak - 1);
  CHECK_FALSE(tight.viable);
  CHECK(tight.reason.find("> budget") != std::string::npos);
}

TEST_CASE("assess_point's peak is point_peak_bytes, and a layer trace adds the candidate's outputs", "[plan]") {
  const tlb::TechniqueSet techniques = tlb::default_techniques();
  for (int id : {1, 3, 9}) {
    const tlb::CaseSpec& c = official(id);
    for (uint32_t config : {0u, 0b01000u, 0b10110u, 31u}) {
      INFO("case " << id << " config " << techniques.bits(config));
      const StageSwitch cand = techniques.stages(config);
      const tlb::PointViability v = tlb::assess_point(c, DType::bf16, cand, 80 * kGiB);
      CHECK(v.peak_bytes == tlb::point_peak_bytes(c.shape, DType::bf16, StageSwitch{}, cand, c.policy));
      tlb::PathMemoryOptions trace;
      trace.keep_layer_outputs = true;
      const tlb::PointViability t = tlb::assess_point(c, DType::bf16, cand, 80 * kGiB, trace);
      const uint64_t outputs = static_cast<uint64_t>(c.shape.layers * c.shape.tokens() * c.shape.d_model) * 2;
      CHECK(t.peak_bytes >= v.peak_bytes + outputs);
      CHECK(t.peak_bytes < v.peak_bytes + outputs + tlb::kBufferAlign);
    }
  }
  // fp32 in IEEE math: the QKV technique's product in fp32 [tokens, 3 d] is the difference
  // (with attn and norm on, nothing else stages a product in fp32 on case 3).
  {
    const tlb::CaseSpec& c = official(3);
    const StageSwitch four_on = techniques.stages(0b11110u);
    tlb::PathMemoryOptions ieee_opt;
    ieee_opt.fp32_math = tlb::Fp32Math::ieee;
    const tlb::PointViability v = tlb::assess_point(c, DType::fp32, four_on, 80 * kGiB, ieee_opt);
    const uint64_t ieee_peak =
        tlb::point_peak_bytes(c.shape, DType::fp32, StageSwitch{}, four_on, c.policy, tlb::Fp32Math::ieee);
    CHECK(v.peak_bytes == ieee_peak);
    const uint64_t qkv_product = static_cast<uint64_t>(c.shape.tokens() * 3 * c.shape.d_model) * sizeof(float);
    const uint64_t tf32_peak = tlb::point_peak_bytes(c.shape, DType::fp32, StageSwitch{}, four_on, c.policy);
    CHECK(ieee_peak >= tf32_peak + qkv_product);
    CHECK(ieee_peak < tf32_peak + qkv_product + tlb::kBufferAlign);
  }
  // The plan carries the options into its per-point decisions.
  tlb::PathMemoryOptions ieee;
  ieee.fp32_math = tlb::Fp32Math::ieee;
  ieee.keep_layer_outputs = true;
  const auto sel = tlb::parse_selection("2", "", "fp32", official_cases(), techniques);
  const tlb::Plan plan = tlb::make_plan(official_cases(), techniques, sel, 1,
                                        tlb::fixed_memory_budget(80, "test"), ieee);
  CHECK(plan.paths.fp32_math == tlb::Fp32Math::ieee);
  REQUIRE(plan.cases.size() == 1);
  CHECK(plan.cases[0].dtypes[0].fused_peak ==
        tlb::path_peak_bytes(official(2).shape, DType::fp32, techniques.stages(31), official(2).policy, ieee));
  CHECK(capture(plan).find("fp32 math:     ieee") != std::string::npos);
}

TEST_CASE("path peaks add data, workspace and one cuBLAS workspace", "[plan]") {
  const tlb::LayerShape& s = official(2).shape;
  const uint64_t ref = tlb::path_peak_bytes(s, DType::bf16, StageSwitch{}, "");
  CHECK(ref == tlb::aligned_total_bytes(tlb::data_layout(s, DType::bf16)) +
                   tlb::aligned_total_bytes(tlb::workspace_layout(s, DType::bf16, StageSwitch{}, "")) +
                   tlb::kCublasWorkspaceBytes);
  // The reference holds the dense fp32 scores and the bf16 probabilities; the attn path does not.
  const uint64_t scores = tlb::case_memory(s, DType::bf16).scores;
  CHECK(scores == 8ull * 12 * 128 * 128 * (4 + 2));
  // fp32 runs its softmax in place: the scores buffer only.
  CHECK(tlb::case_memory(s, DType::fp32).scores == 8ull * 12 * 128 * 128 * 4);
  CHECK(ref > tlb::path_peak_bytes(s, DType::bf16, only(Stage::attn), ""));
}

TEST_CASE("where the reference cannot fit, points are timed against attn-only and say so", "[plan]") {
  const tlb::CaseSpec& c = official(14);
  for (DType d : {DType::fp16, DType::bf16, DType::fp32}) {
    INFO(tlb::to_string(d));
    const tlb::BaselineChoice b = tlb::choose_baseline(c, d, 80 * kGiB);
    CHECK_FALSE(b.is_reference);
    CHECK(b.stages == only(Stage::attn));
    CHECK(b.reason.find("attn-only") != std::string::npos);
    CHECK(b.reason.find("dense scores") != std::string::npos);
    CHECK(b.reference_peak > 80 * kGiB);
    // Without attn the candidate itself needs the dense scores: nonviable and the reason says why.
    const tlb::PointViability ref = tlb::assess_point(c, d, StageSwitch{}, 80 * kGiB);
    CHECK_FALSE(ref.viable);
    CHECK(ref.reason.find("dense scores buffer alone") != std::string::npos);
    const tlb::PointViability attn = tlb::assess_point(c, d, only(Stage::attn), 80 * kGiB);
    CHECK(attn.viable);
    CHECK_FALSE(attn.baseline.is_reference);
  }
  // A small case keeps the reference baseline even on a small budget.
  const tlb::BaselineChoice small = tlb::choose_baseline(official(1), DType::fp32, 2 * kGiB);
  CHECK(small.is_reference);
  CHECK(small.reason.empty());
}

TEST_CASE("the official plan: 448 points per dtype, case 14 viable exactly with attn", "[plan]") {
  const auto techniques = tlb::default_techniques();
  const auto budget = tlb::fixed_memory_budget(80, "test");
  const tlb::Plan plan = tlb::make_plan(official_cases(), techniques, {}, 1, budget);
  const std::string text = capture(plan);
  const std::string js = tlb::plan_json(plan);

  CHECK(plan.total_points == 1344);
  CHECK(plan.configs_selected == 32);
  REQUIRE(plan.cases.size() == 14);
  for (int d = 0; d < 3; ++d) {
    CHECK(plan.points_per_dtype[d] == 448);
    CHECK(plan.viable_per_dtype[d] + plan.nonviable_per_dtype[d] == 448);
    CHECK(plan.nonviable_per_dtype[d] == 16);  // case 14 without attn, nothing else
  }
  for (const auto& cp : plan.cases) {
    INFO("case " << cp.spec->id);
    REQUIRE(cp.dtypes.size() == 3);
    CHECK(cp.forward_flops == tlb::forward_flops(cp.spec->shape));
    for (const auto& dp : cp.dtypes) {
      CHECK(dp.selected_points == 32);
      CHECK(dp.order.size() == 32);
      CHECK(dp.memory.scores == tlb::case_memory(cp.spec->shape, dp.dtype).scores);
      CHECK(dp.golden_viable);
      CHECK(dp.fused_viable);
      if (cp.spec->id != 14) {
        CHECK(dp.reference_viable);
        CHECK(dp.baseline.is_reference);
        CHECK(dp.viable_points == 32);
        continue;
      }
      CHECK_FALSE(dp.reference_viable);
      CHECK_FALSE(dp.baseline.is_reference);
      CHECK(dp.viable_points == 16);
      CHECK(dp.nonviable_with_attn == 0);
      REQUIRE(dp.nonviable_configs.size() == 16);
      for (uint32_t c : dp.nonviable_configs) CHECK((c & 0b01000) == 0);
    }
  }
  CHECK(plan.estimated_seconds > 0);
  CHECK(std::isfinite(plan.estimated_seconds));

  CHECK(text.find("1344 points (per dtype: fp16 448, bf16 448, fp32 448)") != std::string::npos);
  CHECK(text.find("shuffle seed:  1") != std::string::npos);
  CHECK(text.find("memory budget: 80.00 GiB (test)") != std::string::npos);
  CHECK(text.find("case 14 fp16: reference needs") != std::string::npos);
  CHECK(text.find("case 14 fp32: 16 nonviable point(s) (16 without attn, 0 with attn)") !=
        std::string::npos);
  CHECK(text.find("time estimate: about") != std::string::npos);
  CHECK(text.find("a model, not a measurement") != std::string::npos);
  // Every technique's kernels run every official case in every dtype.
  CHECK(text.find("fallbacks: none") != std::string::npos);

  const auto doc = nlohmann::json::parse(js);
  CHECK(doc["total_points"] == 1344);
  CHECK(doc["seed"] == 1);
  CHECK(doc["per_dtype"]["bf16"]["points"] == 448);
  CHECK(doc["per_dtype"]["bf16"]["nonviable"] == 16);
  CHECK(doc["time_estimate"]["is_estimate"] == true);
  REQUIRE(doc["cases"].size() == 14);
  const auto& c14 = doc["cases"][13];
  CHECK(c14["id"] == 14);
  CHECK(c14["seq"] == 100000);
  CHECK(c14["dtypes"][0]["baseline"]["kind"] == "attn-only");
  CHECK(c14["dtypes"][0]["reference_viable"] == false);
  for (const auto& bits : c14["dtypes"][0]["nonviable_configs"])
    CHECK(bits.get<std::string>()[1] == '0');
  CHECK(doc["cases"][1]["valid_lens"].size() == 8);
  CHECK(doc["cases"][0]["dtypes"][0]["order"].size() == 32);
  for (const auto& c : doc["cases"])
    for (const auto& d : c["dtypes"]) CHECK(d["fallbacks"].empty());
  // Each dtype's per-layer stage costs: seven stages whose FLOPs make up forward_flops, and
  // fp32's bytes twice fp16's.
  for (const auto& c : doc["cases"]) {
    INFO("case " << c["id"]);
    const auto& fp16 = c["dtypes"][0]["layer_stage_costs"];
    const auto& fp32 = c["dtypes"][2]["layer_stage_costs"];
    REQUIRE(fp16.size() == 7);
    CHECK(fp16[0]["stage"] == "ln1");
    CHECK(fp16[6]["stage"] == "ffn_down");
    double flops = 0;
    for (size_t i = 0; i < 7; ++i) {
      flops += fp16[i]["flops"].get<double>();
      CHECK(fp32[i]["min_bytes"].get<double>() == 2 * fp16[i]["min_bytes"].get<double>());
    }
    CHECK(flops * c["layers"].get<double>() == Approx(c["forward_flops"].get<double>()));
  }
}

TEST_CASE("the plan follows the selection and the seed", "[plan]") {
  const auto techniques = tlb::default_techniques();
  const auto sel = tlb::parse_selection("13-14", "x1xxx,00000", "fp16", official_cases(), techniques);
  const tlb::Plan plan =
      tlb::make_plan(official_cases(), techniques, sel, 99, tlb::fixed_memory_budget(80, "test"));
  CHECK(plan.total_points == 2 * 17);
  CHECK(plan.configs_selected == 17);
  CHECK(plan.points_per_dtype[0] == 34);
  CHECK(plan.points_per_dtype[1] == 0);
  REQUIRE(plan.cases.size() == 2);
  // Case 14: the 16 attn configurations are viable, the reference (00000) is not.
  CHECK(plan.cases[1].dtypes[0].viable_points == 16);
  CHECK(plan.cases[1].dtypes[0].nonviable_configs == std::vector<uint32_t>{0});
  // Order = build_grid's order for this seed.
  const auto grid = tlb::build_grid(official_cases(), techniques, sel, 99);
  for (size_t i = 0; i < 17; ++i) CHECK(plan.cases[0].dtypes[0].order[i] == grid[i].config);
  const std::string text = capture(plan);
  CHECK(text.find("2 cases x 17 configurations x 1 dtypes = 34 points (per dtype: fp16 34)") != std::string::npos);
  CHECK(text.find("shuffle seed:  99") != std::string::npos);
}

TEST_CASE("a smaller memory budget makes large points nonviable, never small ones", "[plan]") {
  const auto techniques = tlb::default_techniques();
  const tlb::Plan plan = tlb::make_plan(official_cases(), techniques, {}, 1,
                                        tlb::fixed_memory_budget(16, "16 GiB card"));
  CHECK(plan.cases[0].dtypes[0].viable_points == 32);  // tiny-4l fits anywhere
  // Case 13 fp32: the dense scores alone are 8*16*4096^2*4 bytes = 8 GiB; with two workspaces
  // and data the reference baseline does not fit 16 GiB with every candidate.
  int nonviable = 0;
  for (int d = 0; d < 3; ++d) nonviable += plan.nonviable_per_dtype[d];
  CHECK(nonviable > 3 * 16);
  for (const auto& cp : plan.cases)
    for (const auto& dp : cp.dtypes)
      CHECK(dp.viable_points + dp.nonviable_points == dp.selected_points);
}

TEST_CASE("plan budget: --mem-gib: an explicit budget wins and a bad one is a config error", "[plan]") {
  const tlb::MemoryBudget b = tlb::resolve_memory_budget(24.5);
  CHECK(b.bytes == static_cast<uint64_t>(24.5 * kGiB));
  CHECK_FALSE(b.from_device);
  CHECK(b.source.find("--mem-gib 24.5") != std::string::npos);
  for (double bad : {0.0, -1.0, std::nan("")}) {
    try {
      tlb::resolve_memory_budget(bad);
      FAIL("accepted --mem-gib " << bad);
    } catch (const tlb::ConfigError& e) {
      CHECK(std::string(e.what()).rfind("--mem-gib: expected a positive number of GiB", 0) == 0);
    }
  }
  // Without an explicit value: the device's free memory, or the stated 80 GiB assumption.
  const tlb::MemoryBudget auto_budget = tlb::resolve_memory_budget(std::nullopt);
  if (auto_budget.from_device) {
    CHECK(auto_budget.source.find("free memory of CUDA device 0") != std::string::npos);
    CHECK(auto_budget.bytes > 0);
  } else {
    CHECK(auto_budget.bytes == 80 * kGiB);
    CHECK(auto_budget.source.find("assumed") != std::string::npos);
  }
}

TEST_CASE("the time model calls host-bound the groups the H200 measured host-bound, and times them twice",
          "[plan]") {
  // The official sweep at d258325: the eager reference of case 1 (every dtype) and of case 2
  // (fp16, bf16) was host-bound, case 2's in fp32 and case 4's (1.08 eager over replayed) not.
  const auto techniques = tlb::default_techniques();
  const tlb::Plan plan = tlb::make_plan(official_cases(), techniques, {}, 1, tlb::fixed_memory_budget(80, "test"));
  const nlohmann::json js = nlohmann::json::parse(tlb::plan_json(plan));
  for (const auto& cp : plan.cases)
    for (const auto& dp : cp.dtypes) {
      const int id = cp.spec->id;
      INFO("case " << id << " " << tlb::to_string(dp.dtype));
      CHECK(dp.host_bound == (id == 1 || (id == 2 && dp.dtype != DType::fp32)));
      CHECK(dp.baseline_times.eager >= dp.baseline_times.replayed);
    }
  CHECK(js["cases"][0]["dtypes"][0]["host_bound"] == true);
  CHECK(js["cases"][3]["dtypes"][0]["host_bound"] == false);
  // A host-bound group's points are timed a second time against the replay: case 1's group
  // costs about twice case 4's, whose forwards are longer but timed once.
  CHECK(plan.cases[0].dtypes[0].estimated_seconds > 1.7 * plan.cases[3].dtypes[0].estimated_seconds);
  CHECK(capture(plan).find("case 1 fp16: the baseline is likely host-bound") != std::string::npos);

  // A graph forward is its replay; an eager one the longer of GPU and launch time, plus a share
  // of the shorter: on case 1's shape the launches, on case 13's the GPU.
  StageSwitch graph_only;
  graph_only[Stage::graph] = true;
  const tlb::ForwardTimes ref = tlb::estimated_forward_times(official(1).shape, DType::fp16, StageSwitch{});
  const tlb::ForwardTimes graph = tlb::estimated_forward_times(official(1).shape, DType::fp16, graph_only);
  CHECK(graph.graph);
  CHECK_FALSE(ref.graph);
  CHECK(tlb::estimated_forward_seconds(official(1).shape, DType::fp16, graph_only) == graph.replayed);
  CHECK(tlb::estimated_forward_seconds(official(1).shape, DType::fp16, StageSwitch{}) == ref.eager);
  const tlb::TimeModel m;
  const double launches = 4 * m.reference_launches_per_layer * m.launch_us * 1e-6;
  CHECK(ref.eager == Approx(launches + m.launch_overlap_loss * ref.replayed));
  const tlb::ForwardTimes big = tlb::estimated_forward_times(official(13).shape, DType::fp16, StageSwitch{});
  CHECK(big.eager == Approx(big.replayed + m.launch_overlap_loss * 1 * m.reference_launches_per_layer *
                                                m.launch_us * 1e-6));
  CHECK_FALSE(big.host_bound());

  // Above 2^16 outputs attn's out-projection runs on cuBLAS in the fused path's math: in fp32
  // with TF32 at the fused rate, so attn alone saves the out-projection's IEEE time too.
  StageSwitch attn_only;
  attn_only[Stage::attn] = true;
  const tlb::LayerShape& s10 = official(10).shape;
  const double out_proj_flops = 2.0 * s10.tokens() * s10.d_model * s10.d_model * s10.layers;
  const double tf32 = tlb::estimated_forward_seconds(s10, DType::fp32, attn_only, m, tlb::Fp32Math::tf32);
  const double ieee = tlb::estimated_forward_seconds(s10, DType::fp32, attn_only, m, tlb::Fp32Math::ieee);
  const double attn_flops = 4.0 * s10.batch * s10.seq * s10.seq * s10.d_model * 0.5 * s10.layers;
  CHECK(ieee - tf32 == Approx(out_proj_flops / (m.reference_tflops[2] * 1e12) -
                              out_proj_flops / (m.fused_tflops[2] * 1e12) +
                              attn_flops / (m.fused_fp32_ieee_attention_tflops * 1e12) -
                              attn_flops / (m.fused_attention_tflops[2] * 1e12))
                             .epsilon(1e-6));
}

TEST_CASE("the time model prices the dense reference above the fused path on long sequences", "[plan]") {
  const tlb::LayerShape& s = official(11).shape;
  StageSwitch all;
  for (bool& b : all.on) b = true;
  for (DType d : {DType::fp16, DType::fp32}) {
    const double ref = tlb::estimated_forward_seconds(s, d, StageSwitch{});
    const double fused = tlb::estimated_forward_seconds(s, d, all);
    CHECK(ref > 0);
    CHECK(fused > 0);
    CHECK(fused < ref);
  }
  // The model's forward time follows the FLOP count: twice the layers, twice the time.
  tlb::LayerShape two = s;
  two.layers = 2 * s.layers;
  CHECK(tlb::estimated_forward_seconds(two, DType::bf16, all) ==
        Approx(2 * tlb::estimated_forward_seconds(s, DType::bf16, all)));
}

TEST_CASE("the out-projection joins attn on small products only and then needs no fp32 staging", "[plan]") {
  StageSwitch attn_only;
  attn_only[Stage::attn] = true;
  const tlb::LayerShape tiny = official(1).shape;  // 128 tokens x 512: 65536 outputs
  const tlb::LayerShape bert = official(2).shape;  // 1024 tokens x 768
  CHECK(tlb::out_projection_fused(tiny, DType::fp16, attn_only));
  CHECK(tlb::out_projection_fused(tiny, DType::fp32, attn_only, tlb::Fp32Math::ieee));
  CHECK_FALSE(tlb::out_projection_fused(tiny, DType::fp16, StageSwitch{}));
  std::string why;
  CHECK_FALSE(tlb::out_projection_fused(bert, DType::fp16, attn_only, tlb::Fp32Math::tf32, &why));
  CHECK(why == "cuBLAS is faster at this size");

  // With attn alone (qkv, ffn and norm on the reference), the fp32 staging of the reference's
  // cuBLAS products is as wide as the FFN's up projection either way; with attn and ffn
  // fused but norm not, only the out-projection still needs it on case 2, not on case 1.
  auto staging = [](const tlb::LayerShape& s, const StageSwitch& st) -> uint64_t {
    for (const tlb::BufferSpec& b : tlb::workspace_layout(s, DType::fp16, st, ""))
      if (b.name == "gemm_f32") return b.bytes;
    return 0;
  };
  StageSwitch no_norm;
  no_norm[Stage::qkv] = no_norm[Stage::attn] = no_norm[Stage::ffn] = true;
  CHECK(staging(tiny, no_norm) == 0);
  CHECK(staging(bert, no_norm) == static_cast<uint64_t>(bert.tokens() * bert.d_model) * sizeof(float));
  CHECK(staging(tiny, attn_only) == static_cast<uint64_t>(tiny.tokens() * tiny.d_ff) * sizeof(float));
}

TEST_CASE("fp32 ieee plans the QKV technique's cuBLAS product an fp32 buffer", "[plan]") {
  // Every stage fused: in TF32 no fp32 staging at all; in IEEE the head split's product
  // [tokens, 3 d] in fp32 (the FFN's products go straight to their fp32 outputs).
  const tlb::LayerShape& s = official(3).shape;
  StageSwitch all;
  for (bool& b : all.on) b = true;
  auto staging = [&](tlb::Fp32Math math, const StageSwitch& st) -> uint64_t {
    for (const tlb::BufferSpec& b : tlb::workspace_layout(s, DType::fp32, st, "", false, false, math))
      if (b.name == "gemm_f32") return b.bytes;
    return 0;
  };
  CHECK(staging(tlb::Fp32Math::tf32, all) == 0);
  CHECK(staging(tlb::Fp32Math::ieee, all) == static_cast<uint64_t>(s.tokens() * 3 * s.d_model) * sizeof(float));
  StageSwitch no_qkv = all;
  no_qkv[Stage::qkv] = false;  // the reference's QKV: the same buffer, as before
  CHECK(staging(tlb::Fp32Math::ieee, no_qkv) == staging(tlb::Fp32Math::tf32, no_qkv));
}

TEST_CASE("plan names, per case and dtype, every technique whose kernels cannot run the shape, and why",
          "[plan]") {
  // head_dim 20: neither the head-split QKV epilogue nor attention; head_dim 272: attention
  // only (past the widest compiled width); head_dim 136: fp16/bf16 attention everywhere (the
  // sm_90a kernel's width 192, or the mma.sync one's 256), never fp32's (its attention kernels'
  // widest head is 128); head_dim 96: every stage in every dtype (on a width of 128, or the
  // sm_90a kernel's 96).
  const tlb::CaseSet cases = tlb::parse_cases(R"({"cases": [
    {"id": 1, "name": "hd20", "batch": 1, "seq": 7, "d_model": 80, "heads": 4, "d_ff": 256, "layers": 1, "mask": "none"},
    {"id": 2, "name": "hd272", "batch": 1, "seq": 257, "d_model": 544, "heads": 2, "d_ff": 1024, "layers": 1, "mask": "causal"},
    {"id": 3, "name": "hd136", "batch": 2, "seq": 33, "d_model": 544, "heads": 4, "d_ff": 1536, "layers": 1, "mask": "none"},
    {"id": 4, "name": "hd96", "batch": 2, "seq": 33, "d_model": 384, "heads": 4, "d_ff": 1536, "layers": 1, "mask": "none"}
  ]})", "odd.json");
  const tlb::Plan plan =
      tlb::make_plan(cases, tlb::default_techniques(), {}, 1, tlb::fixed_memory_budget(80, "test"));
  REQUIRE(plan.cases.size() == 4);
  auto stages_of = [&](int c, int d) {
    std::string out;
    for (const tlb::StageFallback& f : plan.cases[static_cast<size_t>(c)].dtypes[static_cast<size_t>(d)].fallbacks) {
      if (!out.empty()) out += ',';
      out += tlb::to_string(f.stage);
      CHECK_FALSE(f.why.empty());
    }
    return out;
  };
  for (int d = 0; d < 3; ++d) {
    INFO("dtype " << d);
    CHECK(stages_of(0, d) == "qkv,attn");
    CHECK(stages_of(1, d) == "attn");
    CHECK(stages_of(2, d) == (d == 2 ? "attn" : ""));
    CHECK(stages_of(3, d).empty());
  }
  const tlb::StageFallback& hd272 = plan.cases[1].dtypes[0].fallbacks.front();
  CHECK(hd272.why.find("272") != std::string::npos);
  // The stack switches off exactly these stages (the rows' notes are the same reasons).
  std::vector<std::string> notes;
  const StageSwitch all = tlb::default_techniques().stages(31);
  const StageSwitch eff = tlb::effective_stages(cases.cases[1].shape, DType::fp16, all, &notes);
  CHECK_FALSE(eff[Stage::attn]);
  CHECK(eff[Stage::qkv]);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0] == "attn: " + hd272.why);

  const std::string text = capture(plan);
  CHECK(text.find("fallbacks (the stage runs the reference's kernels") != std::string::npos);
  CHECK(text.find("  2  fp16  attn  " + hd272.why) != std::string::npos);
  const auto doc = nlohmann::json::parse(tlb::plan_json(plan));
  REQUIRE(doc["cases"][0]["dtypes"][0]["fallbacks"].size() == 2);
  CHECK(doc["cases"][0]["dtypes"][0]["fallbacks"][1]["stage"] == "attn");
  REQUIRE(doc["cases"][2]["dtypes"][2]["fallbacks"].size() == 1);
  CHECK(doc["cases"][2]["dtypes"][2]["fallbacks"][0]["why"].get<std::string>().find("136") != std::string::npos);
}
