// Each stage's FLOPs and unavoidable bytes against values worked out by hand for three shapes
// (the official tiny case in fp16; an odd causal one in fp32; d_model 1600 with 25 heads in
// bf16, causal), their sum against forward_flops, and the floor arithmetic.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "stack/memory_plan.hpp"
#include "stack/stage_costs.hpp"

namespace {

using tlb::CostStage;
using tlb::DType;
using tlb::LayerShape;
using tlb::MaskKind;

LayerShape shape(int64_t batch, int64_t seq, int64_t d_model, int64_t heads, int64_t d_ff, int64_t layers,
                 MaskKind mask) {
  LayerShape s;
  s.batch = batch;
  s.seq = seq;
  s.d_model = d_model;
  s.heads = heads;
  s.d_ff = d_ff;
  s.layers = layers;
  s.mask = mask;
  return s;
}

struct Want {
  CostStage stage;
  double flops, bytes;
};

void check_costs(const LayerShape& s, DType dt, const std::vector<Want>& want) {
  const auto got = tlb::layer_stage_costs(s, dt);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO(tlb::to_string(want[i].stage));
    CHECK(got[i].stage == want[i].stage);
    CHECK(got[i].flops == want[i].flops);
    CHECK(got[i].min_bytes == want[i].bytes);
    CHECK(got[i].tensor == (want[i].flops > 0));
  }
}

}  // namespace

TEST_CASE("stage costs: case 1's tiny layer in fp16, by hand", "[stage_costs]") {
  // T = 128 tokens, d = 512, d_ff = 2048, 2-byte elements. LayerNorm: x read and written,
  // gamma and beta read: 2 x 128 x 512 x 2 + 2 x 512 x 2. QKV: 2 x 128 x 512 x 1536 FLOPs;
  // (128 x 512 + 512 x 1536 + 1536 + 128 x 1536) x 2 bytes. Attention: 4 x 128^2 x 512;
  // q, k, v and o: 4 x 128 x 512 x 2. The out-projection is the bare product (no bias:
  // (128 x 512 + 512 x 512 + 128 x 512) x 2); ln2 adds its bias and the residual first, reading
  // x and proj and writing h1 and normed: 4 x 128 x 512 x 2 + 3 x 512 x 2. The down projection
  // reads the residual.
  check_costs(shape(1, 128, 512, 8, 2048, 4, MaskKind::none), DType::fp16,
              {{CostStage::ln1, 0, 264192},
               {CostStage::qkv, 201326592, 2100224},
               {CostStage::attn, 33554432, 524288},
               {CostStage::out_proj, 67108864, 786432},
               {CostStage::ln2, 0, 527360},
               {CostStage::ffn_up, 268435456, 2756608},
               {CostStage::ffn_down, 268435456, 2884608}});
}

TEST_CASE("stage costs: an odd causal layer in fp32, by hand", "[stage_costs]") {
  // T = 2 x 7 = 14, d = 64, d_ff = 128, 4-byte elements; the causal mask halves attention's
  // 4 x 2 x 7^2 x 64 = 25088 FLOPs, not its bytes.
  check_costs(shape(2, 7, 64, 2, 128, 2, MaskKind::causal), DType::fp32,
              {{CostStage::ln1, 0, 7680},
               {CostStage::qkv, 344064, 64256},
               {CostStage::attn, 12544, 14336},
               {CostStage::out_proj, 114688, 23552},
               {CostStage::ln2, 0, 15104},
               {CostStage::ffn_up, 229376, 44032},
               {CostStage::ffn_down, 229376, 47360}});
}

TEST_CASE("stage costs: d_model 1600 over 25 heads in bf16, causal, by hand", "[stage_costs]") {
  // Case 9's shape: T = 8 x 1024 = 8192, d = 1600, d_ff = 6400.
  check_costs(shape(8, 1024, 1600, 25, 6400, 2, MaskKind::causal), DType::bf16,
              {{CostStage::ln1, 0, 52435200},
               {CostStage::qkv, 125829120000.0, 120227200},
               {CostStage::attn, 26843545600.0, 104857600},
               {CostStage::out_proj, 41943040000.0, 57548800},
               {CostStage::ln2, 0, 104867200},
               {CostStage::ffn_up, 167772160000.0, 151564800},
               {CostStage::ffn_down, 167772160000.0, 177769600}});
}

TEST_CASE("stage costs: a layer's FLOPs times its layers are forward_flops", "[stage_costs]") {
  for (const LayerShape& s : {shape(1, 128, 512, 8, 2048, 4, MaskKind::none),
                              shape(2, 7, 64, 2, 128, 2, MaskKind::causal),
                              shape(4, 1500, 1280, 20, 5120, 2, MaskKind::none),
                              shape(1, 100000, 1024, 16, 4096, 1, MaskKind::causal)}) {
    double flops = 0;
    for (const auto& c : tlb::layer_stage_costs(s, DType::fp16)) flops += c.flops;
    CHECK(flops * static_cast<double>(s.layers) == Approx(tlb::forward_flops(s)).epsilon(1e-12));
  }
}

TEST_CASE("stage costs: a layer that hands its residual add to the next one, by hand", "[stage_costs]") {
  // Case 1's layer with norm on and ffn off: its ffn_down is the bare product,
  // (128 x 2048 + 2048 x 512 + 128 x 512) x 2 = 2752512 bytes, and the next layer's ln1 adds
  // the bias and the residual as ln2 does: 527360 bytes.
  const LayerShape s = shape(1, 128, 512, 8, 2048, 4, MaskKind::none);
  const auto gives = tlb::layer_stage_costs(s, DType::fp16, {false, true});
  const auto takes = tlb::layer_stage_costs(s, DType::fp16, {true, false});
  CHECK(gives[6].min_bytes == 2752512);
  CHECK(gives[6].flops == 268435456);
  CHECK(gives[0].min_bytes == 264192);
  CHECK(takes[0].min_bytes == 527360);
  CHECK(takes[6].min_bytes == 2884608);
  // Over four layers, the first three handing off: ln1 plain once and taking three times,
  // ffn_down bare three times and whole once; the other stages four times a layer's.
  const auto whole = tlb::forward_stage_costs(s, DType::fp16, {true, true, true, false});
  CHECK(whole[0].min_bytes == 264192 + 3 * 527360);
  CHECK(whole[6].min_bytes == 3 * 2752512 + 2884608);
  CHECK(whole[4].min_bytes == 4 * 527360);
  CHECK(whole[1].flops == 4 * 201326592.0);
  // No hand-off: every stage a layer's times the layers.
  const auto plain = tlb::forward_stage_costs(s, DType::fp16, {});
  const auto layer = tlb::layer_stage_costs(s, DType::fp16);
  for (size_t i = 0; i < plain.size(); ++i) {
    CHECK(plain[i].min_bytes == 4 * layer[i].min_bytes);
    CHECK(plain[i].flops == 4 * layer[i].flops);
  }
}

TEST_CASE("stage floors: the longer of compute and memory at the ceilings", "[stage_costs]") {
  const tlb::Ceilings k{800, 4000};  // TFLOP/s, GB/s
  const auto tiny = tlb::layer_stage_costs(shape(1, 128, 512, 8, 2048, 4, MaskKind::none), DType::fp16);
  // QKV of the tiny layer is bound by its bytes: 2100224 B / 4e12 B/s (its FLOPs take 2.5e-4 ms).
  CHECK(tlb::floor_ms(tiny[1], k) == Approx(2100224 / 4e12 * 1e3));
  // LayerNorm has no tensor FLOPs: its bytes alone, 264192 B.
  CHECK(tlb::floor_ms(tiny[0], k) == Approx(264192 / 4e12 * 1e3));
  // d_model 1600's up projection is bound by its FLOPs: 1.6777216e11 / 8e14 s = 0.2097152 ms.
  const auto wide = tlb::layer_stage_costs(shape(8, 1024, 1600, 25, 6400, 2, MaskKind::causal), DType::bf16);
  CHECK(tlb::floor_ms(wide[5], k) == Approx(0.2097152));
  // A ceiling that was not measured bounds nothing.
  CHECK(tlb::floor_ms(wide[5], tlb::Ceilings{0, 4000}) == Approx(151564800 / 4e12 * 1e3));
  CHECK(tlb::floor_ms(wide[5], tlb::Ceilings{0, 0}) == 0);
  CHECK(tlb::floor_fraction(0.2, 0.25) == Approx(0.8));
  CHECK(std::isnan(tlb::floor_fraction(0.2, 0)));
  CHECK(std::isnan(tlb::floor_fraction(0.2, -1)));
}
