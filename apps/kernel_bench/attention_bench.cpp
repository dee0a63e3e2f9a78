#include "attention_bench.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "attention/attention.hpp"
#include "bench_common.hpp"
#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "config.hpp"
#include "tlbench_version.hpp"

namespace tlb::bench {
namespace {

// One attention shape of the speed table: forward TFLOP/s (4 b h s^2 d, halved under the causal
// mask) of the variant the dispatcher picks, or of `force`. With `jsonl`, also one JSON line
// per shape for scripts/attention_peer.py, which times the peer library on the same shape and
// completes the kernels.jsonl record.
void bench_attention(cudaStream_t st, DType dt, tlb::Fp32Math math, tlb::MaskKind mask, int64_t b, int64_t h, int64_t s, int64_t dh,
                     std::FILE* jsonl, const char* force = nullptr, const std::vector<int>& valid_lens = {},
                     double warm_s = 0) {
  const size_t n = static_cast<size_t>(b * h * s * dh);
  DeviceBuffer q = random_buffer(n, dt, 1.0f, 5), k = random_buffer(n, dt, 1.0f, 6),
               v = random_buffer(n, dt, 1.0f, 7);
  DeviceBuffer o(n * tlb::dtype_bytes(dt));
  tlb::AttentionArgs a;
  a.dtype = dt; a.fp32_math = math; a.batch = b; a.heads = h; a.seq = s; a.head_dim = dh; a.mask = mask;
  a.q = q.get(); a.k = k.get(); a.v = v.get(); a.o = o.get();
  a.scale = 1.0f / std::sqrt(static_cast<float>(dh));
  a.force = force;
  DeviceBuffer lens(std::max<size_t>(1, valid_lens.size()) * sizeof(int));
  if (mask == tlb::MaskKind::padding) {
    if (valid_lens.size() != static_cast<size_t>(b)) throw std::invalid_argument("padding needs one valid length per batch element");
    TLB_CUDA_CHECK(cudaMemcpy(lens.get(), valid_lens.data(), valid_lens.size() * sizeof(int), cudaMemcpyHostToDevice));
    a.valid_lens = lens.as<int>();
  }
  DeviceBuffer ws(std::max<uint64_t>(1, tlb::flash_attention_workspace_bytes(a)));
  a.workspace = ws.get();
  std::string variant;
  const Timed run = [&](cudaStream_t st2) { variant = tlb::flash_attention(a, st2); };
  warm_up(run, st, warm_s);
  const double ms = median_ms(run, st, 20);
  double flops = 4.0 * b * h * s * s * dh;
  if (mask == tlb::MaskKind::causal) flops *= 0.5;
  const double tflops = flops / ms / 1e9;
  const std::string dtype = dtype_name(dt, math);
  fmt::print("attn  {:>9} b={} h={} s={} dh={} {:<7} {:7.1f} TFLOP/s ({:.3f} ms, {})\n", dtype, b, h, s, dh,
             tlb::to_string(mask), tflops, ms, variant);
  if (jsonl) {
    fmt::print(jsonl,
               "{{\"kernel\": \"attention\", \"dtype\": \"{}\", \"batch\": {}, \"heads\": {}, \"seq\": {}, "
               "\"head_dim\": {}, \"causal\": {}, \"ours_tflops\": {:.1f}, \"ours_ms\": {:.4f}, \"variant\": \"{}\", "
               "\"commit\": \"{}\"}}\n",
               dtype, b, h, s, dh, mask == tlb::MaskKind::causal ? "true" : "false", tflops, ms, variant,
               TLBENCH_GIT_COMMIT);
    std::fflush(jsonl);
  }
}

}  // namespace

void bench_attention_cases(cudaStream_t st, const std::string& cases_path) {
  const tlb::CaseSet cases = tlb::load_cases(cases_path);
  for (const tlb::CaseSpec& c : cases.cases) {
    const tlb::LayerShape& s = c.shape;
    std::string why;
    if (!tlb::flash_attention_supported(s, DType::fp16, &why)) {
      fmt::print("attn  case {:>2}: not run: {}\n", c.id, why);
      continue;
    }
    fmt::print("attn  case {:>2} {}\n", c.id, c.name);
    for (const char* force : {static_cast<const char*>(nullptr), "tma,tiles", "tma,persistent"}) {
      if (force && !tlb::flash_attention_has_sm90a()) continue;
      bench_attention(st, DType::fp16, tlb::Fp32Math::tf32, s.mask, s.batch, s.heads, s.seq, s.head_dim(), nullptr, force, s.valid_lens);
    }
  }
}

void bench_attention_table(cudaStream_t st, std::FILE* jsonl) {
  using tlb::MaskKind;
  struct Row {
    DType dt;
    int64_t b, h, s, d;
    MaskKind mask;
    tlb::Fp32Math math = tlb::Fp32Math::tf32;  // fp32 only
  };
  constexpr tlb::Fp32Math kIeee = tlb::Fp32Math::ieee;
  const Row rows[] = {
      {DType::fp16, 1, 16, 16384, 128, MaskKind::none}, {DType::fp16, 1, 16, 16384, 128, MaskKind::causal},
      {DType::bf16, 1, 16, 16384, 128, MaskKind::none}, {DType::bf16, 1, 16, 16384, 128, MaskKind::causal},
      {DType::fp16, 1, 16, 100000, 64, MaskKind::causal}, {DType::fp16, 8, 16, 4096, 128, MaskKind::causal},
      {DType::fp16, 1, 16, 8192, 128, MaskKind::causal},
      {DType::fp16, 1, 16, 16384, 64, MaskKind::none},  {DType::fp16, 1, 16, 16384, 64, MaskKind::causal},
      {DType::fp16, 1, 16, 8192, 32, MaskKind::none},   {DType::fp16, 1, 16, 8192, 80, MaskKind::none},
      {DType::fp16, 1, 16, 8192, 96, MaskKind::none},   {DType::fp16, 1, 16, 8192, 192, MaskKind::none},
      {DType::fp16, 1, 16, 8192, 256, MaskKind::none},
      // Short sequences whose tiles run past seq (cases 4, 5, 7): 64, 257 and 1500 rows and keys.
      {DType::fp16, 64, 16, 64, 64, MaskKind::none},    {DType::fp16, 32, 16, 257, 64, MaskKind::none},
      {DType::bf16, 32, 16, 257, 64, MaskKind::none},   {DType::fp16, 4, 20, 1500, 64, MaskKind::none},
      {DType::fp32, 1, 8, 16384, 128, MaskKind::none, kIeee},  {DType::fp32, 1, 16, 8192, 128, MaskKind::causal, kIeee},
      {DType::fp32, 1, 16, 16384, 64, MaskKind::causal, kIeee}, {DType::fp32, 4, 20, 1500, 64, MaskKind::none, kIeee},
      {DType::fp32, 32, 16, 257, 64, MaskKind::none, kIeee},
      // A head narrower than the FMA kernel's width of 128 (zero-filled columns, products to 96).
      {DType::fp32, 1, 16, 8192, 80, MaskKind::none, kIeee},
  };
  // TF32 (fp32 storage) as dispatched (the sm_90a kernel on Hopper) and on the mma.sync kernel,
  // printed only: PyTorch's fp32 attention has no TF32 kernel to set them against.
  const Row tf32_rows[] = {
      {DType::fp32, 1, 16, 16384, 128, MaskKind::none},  {DType::fp32, 1, 16, 8192, 128, MaskKind::causal},
      {DType::fp32, 8, 16, 4096, 128, MaskKind::causal}, {DType::fp32, 1, 16, 16384, 64, MaskKind::causal},
      // Narrow heads: 80 (on Hopper the TMA kernel's width 96; the mma.sync kernel's 128) and
      // 112 (width 128 on both).
      {DType::fp32, 1, 16, 8192, 80, MaskKind::none},    {DType::fp32, 1, 16, 8192, 112, MaskKind::none},
  };
  // Heads over 128 on the mma.sync kernel's width 256 (what every GPU but Hopper runs), printed
  // only: the table above sets the dispatched kernel beside PyTorch at these heads.
  const Row wide_mma_rows[] = {
      {DType::fp16, 1, 16, 8192, 192, MaskKind::none}, {DType::bf16, 1, 16, 8192, 256, MaskKind::causal},
  };
  bool first = true;
  for (const Row& r : rows) {
    std::string why;
    tlb::LayerShape shape;
    shape.batch = r.b; shape.seq = r.s; shape.heads = r.h; shape.d_model = r.h * r.d; shape.mask = r.mask;
    if (!tlb::flash_attention_supported(shape, r.dt, &why)) {
      fmt::print("attn  {:>9} b={} h={} s={} dh={} {:<7} not run: {}\n", dtype_name(r.dt, r.math), r.b, r.h, r.s, r.d,
                 tlb::to_string(r.mask), why);
      continue;
    }
    bench_attention(st, r.dt, r.math, r.mask, r.b, r.h, r.s, r.d, jsonl, nullptr, {}, first ? 1.0 : 0.0);
    first = false;
  }
  for (const Row& r : tf32_rows)
    for (const char* force : {static_cast<const char*>(nullptr), "standard,mma"})
      bench_attention(st, r.dt, r.math, r.mask, r.b, r.h, r.s, r.d, nullptr, force);
  for (const Row& r : wide_mma_rows)
    bench_attention(st, r.dt, r.math, r.mask, r.b, r.h, r.s, r.d, nullptr, "standard,mma");
}

}  // namespace tlb::bench
