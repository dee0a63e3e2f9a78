// The device generator against the host generator: every tensor of a case, in every storage
// dtype (and the golden's fp32 storage of fp16/bf16-rounded values), must hold exactly the bits
// the CPU oracle draws; and the case data must occupy exactly the planned allocation.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "common/cuda_check.hpp"
#include "common/rng.hpp"
#include "common/rounding.hpp"
#include "gpu_test_util.hpp"
#include "stack/layer_stack.hpp"
#include "stack/memory_plan.hpp"
#include "test_support.hpp"

namespace tlb::test {
namespace {

struct TensorView {
  TensorId id;
  const void* ptr;
  int64_t elements;
};

std::vector<TensorView> layer_tensors(const CaseData& data, int64_t l) {
  const LayerShape& s = data.shape();
  const int64_t d = s.d_model, f = s.d_ff;
  const LayerWeights& w = data.layer(l);
  return {
      {TensorId::ln1_gamma, w.ln1_gamma, d}, {TensorId::ln1_beta, w.ln1_beta, d},
      {TensorId::w_qkv, w.w_qkv, 3 * d * d}, {TensorId::b_qkv, w.b_qkv, 3 * d},
      {TensorId::w_out, w.w_out, d * d},     {TensorId::b_out, w.b_out, d},
      {TensorId::ln2_gamma, w.ln2_gamma, d}, {TensorId::ln2_beta, w.ln2_beta, d},
      {TensorId::w_ff1, w.w_ff1, f * d},     {TensorId::b_ff1, w.b_ff1, f},
      {TensorId::w_ff2, w.w_ff2, d * f},     {TensorId::b_ff2, w.b_ff2, d},
  };
}

// The stored bit pattern the host expects for element i (16 or 32 bits, zero-extended).
uint32_t expected_bits(const TensorDist& dist, uint64_t i, DType storage, DType rounding) {
  const float v = sample_rounded(dist, i, rounding);
  switch (storage) {
    case DType::fp16: return f32_to_f16_bits(v);
    case DType::bf16: return f32_to_bf16_bits(v);
    default: return f32_bits(v);
  }
}

// Returns the number of mismatching elements; prints the first few.
int64_t check_tensor(const CaseSpec& c, uint32_t layer, const TensorView& t, DType storage,
                     DType rounding) {
  const size_t e = static_cast<size_t>(dtype_bytes(storage));
  std::vector<unsigned char> raw(static_cast<size_t>(t.elements) * e);
  TLB_CUDA_CHECK(cudaMemcpy(raw.data(), t.ptr, raw.size(), cudaMemcpyDeviceToHost));
  const TensorDist dist = tensor_dist(c.seed, static_cast<uint32_t>(c.id), layer, t.id,
                                      c.shape.d_model, c.shape.d_ff);
  int64_t bad = 0;
  for (int64_t i = 0; i < t.elements; ++i) {
    uint32_t got = 0;
    std::memcpy(&got, raw.data() + static_cast<size_t>(i) * e, e);
    const uint32_t want = expected_bits(dist, static_cast<uint64_t>(i), storage, rounding);
    if (got != want) {
      if (bad < 3)
        UNSCOPED_INFO("layer " << layer << " tensor " << static_cast<int>(t.id) << " element " << i
                               << ": device 0x" << std::hex << got << " host 0x" << want << std::dec);
      ++bad;
    }
  }
  return bad;
}

void check_case_data(const CaseSpec& c, DType storage, DType rounding, cudaStream_t stream) {
  INFO("storage " << to_string(storage) << ", rounded to " << to_string(rounding));
  CaseData data(c, storage, rounding, stream);
  int64_t bad = 0;
  for (int64_t l = 0; l < c.shape.layers; ++l)
    for (const TensorView& t : layer_tensors(data, l))
      bad += check_tensor(c, static_cast<uint32_t>(l), t, storage, rounding);
  bad += check_tensor(c, 0, {TensorId::input, data.input(), c.shape.tokens() * c.shape.d_model},
                      storage, rounding);
  CHECK(bad == 0);

  // Layers draw from their own streams: the same tensor differs between layers.
  std::vector<unsigned char> w0(64), w1(64);
  TLB_CUDA_CHECK(cudaMemcpy(w0.data(), data.layer(0).w_qkv, w0.size(), cudaMemcpyDeviceToHost));
  TLB_CUDA_CHECK(cudaMemcpy(w1.data(), data.layer(1).w_qkv, w1.size(), cudaMemcpyDeviceToHost));
  CHECK(w0 != w1);

  if (c.shape.mask == MaskKind::padding) {
    std::vector<int> lens(static_cast<size_t>(c.shape.batch));
    REQUIRE(data.valid_lens() != nullptr);
    TLB_CUDA_CHECK(cudaMemcpy(lens.data(), data.valid_lens(), lens.size() * sizeof(int),
                              cudaMemcpyDeviceToHost));
    CHECK(lens == c.shape.valid_lens);
  }
}

}  // namespace

TEST_CASE("device generator stores exactly the host generator's values in every dtype",
          "[gpu][stack][generator]") {
  TLB_REQUIRE_GPU();
  TestStream stream;
  // Odd sizes (d_ff 40, seq 5) so no tensor is a neat power of two; two layers, padding.
  const CaseSpec c = small_case(101, 2, 5, 24, 3, 40, 2, MaskKind::padding, Activation::gelu, {5, 2});
  for (DType dt : {DType::fp16, DType::bf16, DType::fp32}) check_case_data(c, dt, dt, stream.get());
}

TEST_CASE("golden case data keeps fp16 and bf16 values exactly in fp32 storage",
          "[gpu][stack][generator]") {
  TLB_REQUIRE_GPU();
  TestStream stream;
  const CaseSpec c = small_case(102, 1, 9, 16, 2, 48, 2);
  for (DType rounding : {DType::fp16, DType::bf16})
    check_case_data(c, DType::fp32, rounding, stream.get());
}

TEST_CASE("case data occupies exactly its planned allocation", "[gpu][stack][generator]") {
  TLB_REQUIRE_GPU();
  TestStream stream;
  const CaseSpec c = small_case(103, 3, 7, 40, 5, 72, 3, MaskKind::padding, Activation::relu, {7, 1, 4});
  for (DType dt : {DType::fp16, DType::bf16, DType::fp32}) {
    CaseData data(c, dt, dt, stream.get());
    CHECK(data.bytes() == aligned_total_bytes(data_layout(c.shape, dt)));
  }
  CHECK_THROWS_AS(CaseData(c, DType::fp16, DType::bf16, stream.get()), std::invalid_argument);
}

}  // namespace tlb::test
