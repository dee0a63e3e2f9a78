// The fp32 golden: the whole stack against the fp64 oracle (rel-L2 <= 1e-5) for inputs rounded
// to each working dtype; its streamed attention against the dense reference attention in fp32
// (seq 1500, every mask) and against an fp64 host loop for head dims from 8 to 1100; and the
// extreme case (seq 100000, causal) in seconds, with sampled rows checked in fp64.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "common/cuda_check.hpp"
#include "common/cuda_event.hpp"
#include "common/device_buffer.hpp"
#include "common/rng.hpp"
#include "gpu_test_util.hpp"
#include "reference/attention_dense.hpp"
#include "reference/attention_streamed.hpp"
#include "reference/linear_cublas.hpp"
#include "stack/generate.hpp"
#include "stack/layer_stack.hpp"
#include "stack/memory_plan.hpp"
#include "test_support.hpp"

namespace tlb::test {
namespace {

constexpr double kGoldenTolerance = 1e-5;  // fp32 roundings (~6e-8 each) over a few layers

void check_golden_against_oracle(const CaseSpec& c) {
  TestStream stream;
  for (DType rounding : {DType::fp16, DType::bf16, DType::fp32}) {
    INFO(label(c, rounding));
    std::vector<std::vector<double>> want_layers;
    const std::vector<double> want = oracle_output(c, rounding, &want_layers);
    CaseData data(c, DType::fp32, rounding, stream.get());
    PathOptions opt;
    opt.golden = true;
    opt.keep_layer_outputs = true;
    const PathResult r = run_path(data, opt, stream.get());
    const ErrorStats e = compare(r.output, want);
    INFO(describe(e));
    CHECK(e.nan == 0);
    CHECK(e.rel_l2 <= kGoldenTolerance);
    REQUIRE(r.layers.size() == want_layers.size());
    for (size_t l = 0; l < r.layers.size(); ++l) {
      const ErrorStats el = compare(r.layers[l], want_layers[l]);
      INFO("layer " << l << ": " << describe(el));
      CHECK(el.rel_l2 <= kGoldenTolerance);
    }
    bool streamed = false;
    for (const StageDispatch& sd : r.dispatch)
      if (sd.stage == Stage::attn) streamed = sd.variant.rfind("streamed_fp32", 0) == 0;
    CHECK(streamed);
  }
}

// q, k, v [batch, heads, seq, dh] in fp32, N(0, 1), on the device.
struct Qkv {
  int64_t batch, heads, seq, dh;
  DeviceBuffer q, k, v, o;
  int64_t elements() const { return batch * heads * seq * dh; }
};

Qkv make_qkv(int64_t batch, int64_t heads, int64_t seq, int64_t dh, uint32_t id,
             cudaStream_t stream) {
  Qkv t{batch, heads, seq, dh, {}, {}, {}, {}};
  const uint64_t bytes = static_cast<uint64_t>(t.elements()) * sizeof(float);
  t.q = DeviceBuffer(bytes);
  t.k = DeviceBuffer(bytes);
  t.v = DeviceBuffer(bytes);
  t.o = DeviceBuffer(bytes);
  uint32_t layer = 0;
  for (DeviceBuffer* b : {&t.q, &t.k, &t.v}) {
    TensorDist dist;
    dist.key = tensor_key(777, id, layer++, TensorId::input);
    dist.kind = DistKind::normal;
    generate_tensor(b->get(), DType::fp32, DType::fp32, dist, t.elements(), stream);
  }
  return t;
}

std::vector<float> to_host(const DeviceBuffer& b, int64_t n) {
  std::vector<float> h(static_cast<size_t>(n));
  TLB_CUDA_CHECK(cudaMemcpy(h.data(), b.get(), h.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return h;
}

int64_t visible_keys(MaskKind mask, const std::vector<int>& lens, int64_t b, int64_t i,
                     int64_t seq) {
  if (mask == MaskKind::causal) return i + 1;
  if (mask == MaskKind::padding) return lens[static_cast<size_t>(b)];
  return seq;
}

// Row (b, h, i) of attention in fp64, from [seq, dh] slices of one (b, h); writes dh values.
void host_attention_row(const float* q_bh, const float* k_bh, const float* v_bh, int64_t dh,
                        int64_t i, int64_t visible, double scale, double* out) {
  double m = -INFINITY;
  std::vector<double> s(static_cast<size_t>(visible));
  for (int64_t j = 0; j < visible; ++j) {
    double dot = 0.0;
    for (int64_t c = 0; c < dh; ++c) dot += static_cast<double>(q_bh[i * dh + c]) * k_bh[j * dh + c];
    s[static_cast<size_t>(j)] = dot * scale;
    m = std::max(m, s[static_cast<size_t>(j)]);
  }
  double l = 0.0;
  for (double& x : s) l += (x = std::exp(x - m));
  for (int64_t c = 0; c < dh; ++c) out[c] = 0.0;
  for (int64_t j = 0; j < visible; ++j)
    for (int64_t c = 0; c < dh; ++c) out[c] += s[static_cast<size_t>(j)] / l * v_bh[j * dh + c];
}

reference::StreamedAttentionArgs streamed_args(Qkv& t, MaskKind mask, const int* lens) {
  reference::StreamedAttentionArgs a;
  a.batch = t.batch;
  a.heads = t.heads;
  a.seq = t.seq;
  a.head_dim = t.dh;
  a.mask = mask;
  a.valid_lens = lens;
  a.q = t.q.as<float>();
  a.k = t.k.as<float>();
  a.v = t.v.as<float>();
  a.o = t.o.as<float>();
  a.scale = 1.0f / std::sqrt(static_cast<float>(t.dh));
  return a;
}

}  // namespace

TEST_CASE("golden matches the oracle: padding, two layers", "[gpu][golden]") {
  TLB_REQUIRE_GPU();
  check_golden_against_oracle(small_case(301, 2, 23, 64, 4, 96, 2, MaskKind::padding, Activation::gelu, {23, 9}));
}

TEST_CASE("golden matches the oracle: one token, relu", "[gpu][golden]") {
  TLB_REQUIRE_GPU();
  check_golden_against_oracle(small_case(302, 1, 1, 32, 2, 64, 1, MaskKind::none, Activation::relu));
}

TEST_CASE("golden matches the oracle: d_model 36, causal, gelu_tanh", "[gpu][golden]") {
  TLB_REQUIRE_GPU();
  check_golden_against_oracle(
      small_case(303, 2, 40, 36, 3, 50, 2, MaskKind::causal, Activation::gelu_tanh));
}

TEST_CASE("golden matches the oracle: head_dim 256", "[gpu][golden]") {
  TLB_REQUIRE_GPU();
  check_golden_against_oracle(small_case(304, 1, 9, 256, 1, 64, 1, MaskKind::causal));
}

TEST_CASE("streamed golden attention equals the dense reference attention in fp32 at seq 1500",
          "[gpu][golden][kernels]") {
  TLB_REQUIRE_GPU();
  TestStream stream;
  const int64_t B = 2, H = 2, S = 1500, DH = 64;
  Qkv t = make_qkv(B, H, S, DH, 310, stream.get());
  const std::vector<int> lens = {1500, 731};
  DeviceBuffer lens_dev(lens.size() * sizeof(int));
  TLB_CUDA_CHECK(cudaMemcpy(lens_dev.get(), lens.data(), lens.size() * sizeof(int), cudaMemcpyHostToDevice));
  DeviceBuffer scores(static_cast<uint64_t>(B * H * S * S) * sizeof(float));
  DeviceBuffer dense_out(static_cast<uint64_t>(t.elements()) * sizeof(float));
  DeviceBuffer table(static_cast<uint64_t>(reference::dense_attention_pointer_count(B, H)) * sizeof(void*));
  DeviceBuffer blas_ws(kCublasWorkspaceBytes);
  cublasHandle_t blas = nullptr;
  TLB_CUBLAS_CHECK(cublasCreate(&blas));
  reference::configure_handle(blas, stream.get(), blas_ws.get(), kCublasWorkspaceBytes);

  const std::vector<float> qh = to_host(t.q, t.elements()), kh = to_host(t.k, t.elements()),
                           vh = to_host(t.v, t.elements());
  for (MaskKind mask : {MaskKind::none, MaskKind::causal, MaskKind::padding}) {
    INFO("mask " << to_string(mask));
    reference::DenseAttentionArgs d;
    d.dtype = DType::fp32;
    d.precision = reference::GemmPrecision::pedantic;
    d.batch = B;
    d.heads = H;
    d.seq = S;
    d.head_dim = DH;
    d.mask = mask;
    d.valid_lens = lens_dev.as<int>();
    d.q = t.q.get();
    d.k = t.k.get();
    d.v = t.v.get();
    d.o = dense_out.get();
    d.scores = scores.as<float>();
    d.probs = scores.get();  // fp32: the softmax runs in place
    d.scale = 1.0f / std::sqrt(static_cast<float>(DH));
    const std::vector<void*> ptrs = reference::dense_attention_pointer_table(d);
    TLB_CUDA_CHECK(cudaMemcpy(table.get(), ptrs.data(), ptrs.size() * sizeof(void*), cudaMemcpyHostToDevice));
    REQUIRE(reference::dense_attention_pointers_aligned(d));
    TLB_CUDA_CHECK(cudaMemsetAsync(t.o.get(), 0xFF, t.o.bytes(), stream.get()));
    reference::attention_streamed_fp32(streamed_args(t, mask, lens_dev.as<int>()), stream.get());
    TLB_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    const std::vector<float> streamed = to_host(t.o, t.elements());

    // The dense P·V both ways: one call through the pointer table, one call per batch element.
    std::vector<float> dense;
    for (bool table_path : {true, false}) {
      INFO((table_path ? "P.V through the pointer table" : "P.V per batch element"));
      d.pv_pointers = table_path ? table.as<void*>() : nullptr;
      TLB_CUDA_CHECK(cudaMemsetAsync(dense_out.get(), 0xFF, dense_out.bytes(), stream.get()));
      reference::attention_dense(blas, d);
      TLB_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
      dense = to_host(dense_out, t.elements());
      const ErrorStats e = compare(streamed, dense);
      INFO("streamed vs dense: " << describe(e));
      CHECK(e.nan == 0);
      CHECK(e.rel_l2 <= 1e-5);
    }

    // Both against fp64 on a few rows: first, last, and one past the shorter padding length.
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i : {int64_t{0}, int64_t{900}, S - 1}) {
          const int64_t off = (b * H + h) * S * DH;
          std::vector<double> want(static_cast<size_t>(DH));
          host_attention_row(qh.data() + off, kh.data() + off, vh.data() + off, DH, i,
                             visible_keys(mask, lens, b, i, S), 1.0 / std::sqrt(double(DH)), want.data());
          std::vector<float> got_s(static_cast<size_t>(DH)), got_d(static_cast<size_t>(DH));
          for (int64_t c = 0; c < DH; ++c) {
            const size_t at = static_cast<size_t>((b * S + i) * H * DH + h * DH + c);
            got_s[static_cast<size_t>(c)] = streamed[at];
            got_d[static_cast<size_t>(c)] = dense[at];
          }
          INFO("b " << b << " h " << h << " row " << i);
          CHECK(compare(got_s, want).rel_l2 <= 1e-5);
          CHECK(compare(got_d, want).rel_l2 <= 1e-5);
        }
  }
  cublasDestroy(blas);
}

TEST_CASE("streamed golden attention matches fp64 for head dims 8 to 1100",
          "[gpu][golden][kernels]") {
  TLB_REQUIRE_GPU();
  TestStream stream;
  const int64_t B = 2, H = 2, S = 37;
  const std::vector<int> lens = {37, 1};
  DeviceBuffer lens_dev(lens.size() * sizeof(int));
  TLB_CUDA_CHECK(cudaMemcpy(lens_dev.get(), lens.data(), lens.size() * sizeof(int), cudaMemcpyHostToDevice));
  // Every thread-group width (1..32 threads per query), partial groups (40, 80, 200, 520) and
  // the one-warp-per-query kernel beyond 1024.
  for (int64_t dh : {8, 16, 40, 64, 80, 128, 200, 256, 520, 1024, 1100}) {
    Qkv t = make_qkv(B, H, S, dh, 320 + static_cast<uint32_t>(dh), stream.get());
    const std::vector<float> qh = to_host(t.q, t.elements()), kh = to_host(t.k, t.elements()),
                             vh = to_host(t.v, t.elements());
    for (MaskKind mask : {MaskKind::none, MaskKind::causal, MaskKind::padding}) {
      INFO("head_dim " << dh << " mask " << to_string(mask));
      TLB_CUDA_CHECK(cudaMemsetAsync(t.o.get(), 0xFF, t.o.bytes(), stream.get()));
      const std::string variant =
          reference::attention_streamed_fp32(streamed_args(t, mask, lens_dev.as<int>()), stream.get());
      TLB_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
      INFO("variant " << variant);
      const std::vector<float> got = to_host(t.o, t.elements());
      std::vector<double> want(got.size());
      std::vector<double> row(static_cast<size_t>(dh));
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t i = 0; i < S; ++i) {
            const int64_t off = (b * H + h) * S * dh;
            host_attention_row(qh.data() + off, kh.data() + off, vh.data() + off, dh, i,
                               visible_keys(mask, lens, b, i, S), 1.0 / std::sqrt(double(dh)), row.data());
            for (int64_t c = 0; c < dh; ++c)
              want[static_cast<size_t>((b * S + i) * H * dh + h * dh + c)] = row[static_cast<size_t>(c)];
          }
      const ErrorStats e = compare(got, want);
      INFO(describe(e));
      CHECK(e.nan == 0);
      CHECK(e.rel_l2 <= 1e-5);
    }
  }
}

TEST_CASE("streamed golden attention handles seq 100000 causal in seconds", "[gpu][golden][long]") {
  TLB_REQUIRE_GPU();
  TestStream stream;
  // Case 14's attention: 1 x 16 heads x 100000 keys x head_dim 64, causal.
  const int64_t B = 1, H = 16, S = 100000, DH = 64;
  Qkv t = make_qkv(B, H, S, DH, 330, stream.get());
  TLB_CUDA_CHECK(cudaMemsetAsync(t.o.get(), 0xFF, t.o.bytes(), stream.get()));
  const CudaEvent start, stop;
  TLB_CUDA_CHECK(cudaEventRecord(start, stream.get()));
  const std::string variant =
      reference::attention_streamed_fp32(streamed_args(t, MaskKind::causal, nullptr), stream.get());
  TLB_CUDA_CHECK(cudaEventRecord(stop, stream.get()));
  TLB_CUDA_CHECK(cudaEventSynchronize(stop));
  const double ms = elapsed_ms(start, stop);
  const double flops = 4.0 * B * H * DH * (static_cast<double>(S) * (S + 1) / 2.0);
  std::printf("streamed golden attention %s, seq %lld causal: %.1f ms, %.1f TFLOP/s (fp32 FMA)\n",
              variant.c_str(), static_cast<long long>(S), ms, flops / (ms * 1e-3) / 1e12);
  CHECK(ms < 10000.0);

  // Sampled rows of the first and last head against fp64.
  for (int64_t h : {int64_t{0}, H - 1}) {
    const size_t slice = static_cast<size_t>(S * DH);
    std::vector<float> qh(slice), kh(slice), vh(slice);
    const size_t off = static_cast<size_t>(h * S * DH) * sizeof(float);
    TLB_CUDA_CHECK(cudaMemcpy(qh.data(), static_cast<char*>(t.q.get()) + off, slice * sizeof(float), cudaMemcpyDeviceToHost));
    TLB_CUDA_CHECK(cudaMemcpy(kh.data(), static_cast<char*>(t.k.get()) + off, slice * sizeof(float), cudaMemcpyDeviceToHost));
    TLB_CUDA_CHECK(cudaMemcpy(vh.data(), static_cast<char*>(t.v.get()) + off, slice * sizeof(float), cudaMemcpyDeviceToHost));
    for (int64_t i : {int64_t{0}, int64_t{127}, int64_t{54321}, S - 1}) {
      std::vector<double> want(static_cast<size_t>(DH));
      host_attention_row(qh.data(), kh.data(), vh.data(), DH, i, i + 1, 1.0 / 8.0, want.data());
      std::vector<float> got(static_cast<size_t>(DH));
      TLB_CUDA_CHECK(cudaMemcpy(got.data(), t.o.as<float>() + (i * H + h) * DH, DH * sizeof(float), cudaMemcpyDeviceToHost));
      const ErrorStats e = compare(got, want);
      INFO("head " << h << " row " << i << ": " << describe(e));
      CHECK(e.rel_l2 <= 1e-5);
    }
  }
}

TEST_CASE("the golden of the extreme case runs without a score matrix", "[gpu][golden][long]") {
  TLB_REQUIRE_GPU();
  TestStream stream;
  CaseSpec c = small_case(14, 1, 100000, 1024, 16, 4096, 1, MaskKind::causal);
  c.name = "extreme-100k";
  const std::vector<BufferSpec> layout = workspace_layout(c.shape, DType::fp16, StageSwitch{}, "", true);
  for (const BufferSpec& b : layout) CHECK(b.name != "scores");
  const auto t0 = std::chrono::steady_clock::now();
  CaseData data(c, DType::fp32, DType::fp16, stream.get());
  PathOptions opt;
  opt.golden = true;
  StackPath path(data, opt, stream.get());
  CHECK(path.workspace_bytes() == aligned_total_bytes(layout));
  path.poison();
  path.run();
  const std::vector<float> out = path.output_host();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("golden of case 14 (fp16-rounded data): %.2f s including data generation\n", seconds);
  int64_t bad = 0;
  double sum_sq = 0.0;
  for (float x : out) {
    bad += std::isfinite(x) ? 0 : 1;
    sum_sq += static_cast<double>(x) * x;
  }
  CHECK(bad == 0);
  // The residual stream keeps the N(0, 1) input's scale.
  const double rms = std::sqrt(sum_sq / static_cast<double>(out.size()));
  INFO("output rms " << rms);
  CHECK(rms > 0.5);
  CHECK(rms < 5.0);
}

}  // namespace tlb::test
