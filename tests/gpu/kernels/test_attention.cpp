// The fused attention against an fp64 host attention on fresh random q, k, v: every dtype and
// fp32 math mode, every mask (padding lengths of 1, seq and in between), head_dim 64 and 128
// everywhere and every compiled width of the sm_90a kernel (with the head_dims that round up to
// them) on Hopper, odd sequence lengths around the tile sizes, batch 1 and 3, 1-4 heads; every
// variant the dispatcher can pick (short-sequence, each standard tile shape, split-KV, each
// engine) forced on shapes where it runs. Outputs and the split-KV workspace are NaN-poisoned before each run, and the
// output is fenced by guard bytes. The host-only tests (fallback reasons, workspace planning)
// need no device.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "attention/attention.hpp"
#include "attention/attention_kernels.hpp"
#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/rounding.hpp"
#include "gpu_test_util.hpp"
#include "test_support.hpp"

namespace {

using tlb::AttentionArgs;
using tlb::DeviceBuffer;
using tlb::DType;
using tlb::MaskKind;

struct Mode {
  DType dtype;
  tlb::Fp32Math math;
  const char* name;
  double tolerance;  // relative L2 error against fp64
};
const Mode kFp16{DType::fp16, tlb::Fp32Math::tf32, "fp16", 2e-3};
const Mode kBf16{DType::bf16, tlb::Fp32Math::tf32, "bf16", 1e-2};
const Mode kTf32{DType::fp32, tlb::Fp32Math::tf32, "fp32-tf32", 5e-3};
const Mode kIeee{DType::fp32, tlb::Fp32Math::ieee, "fp32-ieee", 1e-5};
const Mode kModes[] = {kFp16, kBf16, kTf32, kIeee};

struct Shape {
  int64_t batch, heads, seq, head_dim;
  MaskKind mask;
  std::vector<int> valid_lens;  // padding only

  size_t elems() const { return static_cast<size_t>(batch * heads * seq * head_dim); }
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(head_dim)); }
  std::string describe() const {
    std::string s = "batch " + std::to_string(batch) + ", heads " + std::to_string(heads) + ", seq " +
                    std::to_string(seq) + ", head_dim " + std::to_string(head_dim) + ", mask " +
                    std::string(tlb::to_string(mask));
    if (mask == MaskKind::padding) {
      s += " [";
      for (size_t i = 0; i < valid_lens.size(); ++i) {
        if (i) s += ',';
        s += std::to_string(valid_lens[i]);
      }
      s += ']';
    }
    return s;
  }
};

// A tensor's values (already rounded to the dtype) on the host and its bits on the device, in
// an allocation of exactly its size (compute-sanitizer then flags any read past it).
struct Tensor {
  std::vector<float> host;
  DeviceBuffer dev;
};

Tensor make_tensor(size_t n, DType dt, float stddev, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, stddev);
  Tensor t;
  t.host.resize(n);
  for (size_t i = 0; i < n; ++i) t.host[i] = tlb::round_to_dtype(normal(rng), dt);
  t.dev = tlb::test::upload_values(t.host, dt);
  return t;
}

// q is drawn wider than k and v so the scores spread (sd 2) and the running max moves between
// key tiles, which exercises the online rescaling.
struct Problem {
  Shape shape;
  Tensor q, k, v;
  DeviceBuffer valid_lens;
};

Problem make_problem(const Shape& s, DType dt, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Problem p;
  p.shape = s;
  p.q = make_tensor(s.elems(), dt, 2.0f, rng);
  p.k = make_tensor(s.elems(), dt, 1.0f, rng);
  p.v = make_tensor(s.elems(), dt, 1.0f, rng);
  if (s.mask == MaskKind::padding) {
    REQUIRE(s.valid_lens.size() == static_cast<size_t>(s.batch));
    p.valid_lens = DeviceBuffer(s.valid_lens.size() * sizeof(int));
    TLB_CUDA_CHECK(cudaMemcpy(p.valid_lens.get(), s.valid_lens.data(), s.valid_lens.size() * sizeof(int),
                              cudaMemcpyHostToDevice));
  }
  return p;
}

// fp64 attention on the rounded inputs, output [batch, seq, heads*head_dim]. A row with no
// visible key is defined as zeros.
std::vector<double> reference_attention(const Problem& p) {
  const Shape& s = p.shape;
  const int64_t D = s.head_dim;
  const double scale = static_cast<double>(s.scale());
  std::vector<double> out(s.elems(), 0.0);
  std::vector<double> w(static_cast<size_t>(s.seq));
  for (int64_t b = 0; b < s.batch; ++b) {
    const int64_t limit = s.mask == MaskKind::padding
                              ? std::clamp<int64_t>(s.valid_lens[static_cast<size_t>(b)], 0, s.seq)
                              : s.seq;
    for (int64_t h = 0; h < s.heads; ++h) {
      const size_t base = static_cast<size_t>((b * s.heads + h) * s.seq * D);
      for (int64_t i = 0; i < s.seq; ++i) {
        const int64_t keys = s.mask == MaskKind::causal ? std::min(limit, i + 1) : limit;
        double* o = &out[static_cast<size_t>(((b * s.seq + i) * s.heads + h) * D)];
        if (keys <= 0) continue;
        const float* q = &p.q.host[base + static_cast<size_t>(i * D)];
        double mx = -INFINITY;
        for (int64_t j = 0; j < keys; ++j) {
          const float* k = &p.k.host[base + static_cast<size_t>(j * D)];
          double dot = 0.0;
          for (int64_t d = 0; d < D; ++d) dot += static_cast<double>(q[d]) * static_cast<double>(k[d]);
          w[static_cast<size_t>(j)] = dot * scale;
          mx = std::max(mx, w[static_cast<size_t>(j)]);
        }
        double sum = 0.0;
        for (int64_t j = 0; j < keys; ++j) {
          w[static_cast<size_t>(j)] = std::exp(w[static_cast<size_t>(j)] - mx);
          sum += w[static_cast<size_t>(j)];
        }
        for (int64_t j = 0; j < keys; ++j) {
          const float* v = &p.v.host[base + static_cast<size_t>(j * D)];
          const double pj = w[static_cast<size_t>(j)] / sum;
          for (int64_t d = 0; d < D; ++d) o[d] += pj * static_cast<double>(v[d]);
        }
      }
    }
  }
  return out;
}

struct Run {
  std::vector<float> out;
  bool guards_intact = false;
  std::string variant;
};

// The arguments of one call on the problem's inputs, output and workspace still to be set.
AttentionArgs attention_args(const Problem& p, const Mode& mode, const char* force) {
  const Shape& s = p.shape;
  AttentionArgs a;
  a.dtype = mode.dtype;
  a.fp32_math = mode.math;
  a.batch = s.batch;
  a.heads = s.heads;
  a.seq = s.seq;
  a.head_dim = s.head_dim;
  a.mask = s.mask;
  a.valid_lens = s.mask == MaskKind::padding ? p.valid_lens.as<int>() : nullptr;
  a.q = p.q.dev.get();
  a.k = p.k.dev.get();
  a.v = p.v.dev.get();
  a.scale = s.scale();
  a.force = force;
  return a;
}

// The dispatcher's questions (variant, workspace) need a shape and no buffers.
AttentionArgs shape_args(int64_t batch, int64_t heads, int64_t seq, int64_t head_dim, DType dtype, MaskKind mask,
                         tlb::Fp32Math math = tlb::Fp32Math::tf32, const char* force = nullptr) {
  AttentionArgs a;
  a.batch = batch;
  a.heads = heads;
  a.seq = seq;
  a.head_dim = head_dim;
  a.dtype = dtype;
  a.fp32_math = math;
  a.mask = mask;
  a.force = force;
  return a;
}
tlb::LayerShape layer_shape(int64_t batch, int64_t heads, int64_t seq, int64_t head_dim) {
  tlb::LayerShape l;
  l.batch = batch;
  l.heads = heads;
  l.seq = seq;
  l.d_model = heads * head_dim;
  return l;
}

// One call of flash_attention: output fenced by guard bytes and NaN inside, workspace NaN too.
Run run_flash(const Problem& p, const Mode& mode, const char* force) {
  const Shape& s = p.shape;
  AttentionArgs a = attention_args(p, mode, force);
  tlb::test::GuardedOutput out(s.elems(), mode.dtype);
  out.poison();
  a.o = out.ptr();
  DeviceBuffer ws(tlb::flash_attention_workspace_bytes(a));
  if (ws) tlb::test::poison(ws.get(), ws.bytes());
  a.workspace = ws.get();

  Run r;
  r.variant = tlb::flash_attention(a, nullptr);
  TLB_CUDA_CHECK(cudaDeviceSynchronize());
  r.out = out.read(&r.guards_intact);
  return r;
}

struct Errors {
  double rel_l2 = 0.0;
  size_t nonfinite = 0;  // NaN or Inf: never written, or computed wrong
};

template <typename Ref>
Errors compare(const std::vector<float>& got, const std::vector<Ref>& ref) {
  const tlb::test::ErrorStats stats = tlb::test::compare_finite(got, ref);
  Errors e;
  e.rel_l2 = stats.rel_l2;
  e.nonfinite = static_cast<size_t>(stats.nan + stats.inf);
  return e;
}

// Runs and checks against fp64; returns the variant name.
std::string check_against_fp64(const Problem& p, const std::vector<double>& ref, const Mode& mode,
                               const char* force) {
  const Run r = run_flash(p, mode, force);
  const Errors e = compare(r.out, ref);
  INFO(mode.name << ", " << p.shape.describe() << ", force " << (force ? force : "(none)") << " -> "
                 << r.variant << ": rel L2 " << e.rel_l2 << ", non-finite " << e.nonfinite);
  CHECK(r.guards_intact);
  CHECK(e.nonfinite == 0);
  CHECK(e.rel_l2 <= mode.tolerance);
  return r.variant;
}

uint64_t seed_of(const Shape& s, const Mode& m, uint64_t salt) {
  return ((static_cast<uint64_t>(s.seq) * 131 + static_cast<uint64_t>(s.head_dim)) * 31 +
          static_cast<uint64_t>(s.mask)) * 977 + static_cast<uint64_t>(s.batch * 7 + s.heads) +
         static_cast<uint64_t>(m.dtype) * 1000003 + static_cast<uint64_t>(m.math) * 7919 + salt * 104729;
}

// Padding lengths for `batch` elements: 1, seq, and in between.
std::vector<int> padding_lens(int64_t batch, int64_t seq, uint64_t salt) {
  std::vector<int> v;
  for (int64_t b = 0; b < batch; ++b) {
    if (b % 3 == 0) v.push_back(1);
    else if (b % 3 == 1) v.push_back(static_cast<int>(seq));
    else v.push_back(static_cast<int>(1 + (salt * 2654435761u + static_cast<uint64_t>(b)) % static_cast<uint64_t>(seq)));
  }
  return v;
}

const int64_t kSeqs[] = {1, 7, 63, 64, 65, 257, 1500};
const MaskKind kMasks[] = {MaskKind::none, MaskKind::causal, MaskKind::padding};

// The sweep every mode runs with the dispatcher's own choice of variant.
void check_sweep(const Mode& mode) {
  int idx = 0;
  for (int64_t head_dim : {64, 128})
    for (MaskKind mask : kMasks)
      for (int64_t seq : kSeqs) {
        ++idx;
        Shape s;
        s.head_dim = head_dim;
        s.mask = mask;
        s.seq = seq;
        // Keep the host reference affordable on the longest sequence.
        s.batch = mask == MaskKind::padding ? 3 : (idx % 2 ? 3 : 1);
        s.heads = seq >= 1500 ? 1 : 1 + idx % 4;
        if (seq >= 1500 && mask != MaskKind::padding) s.batch = 1;
        if (mask == MaskKind::padding) s.valid_lens = padding_lens(s.batch, seq, static_cast<uint64_t>(idx));
        const Problem p = make_problem(s, mode.dtype, seed_of(s, mode, 1));
        check_against_fp64(p, reference_attention(p), mode, nullptr);
      }
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// Whether this device runs the sm_90a TMA kernel; says why not where it does not.
bool tma_kernel_runs_here() {
  if (tlb::flash_attention_has_sm90a()) return true;
  WARN("not an sm_90 GPU running an sm_90a build: the TMA kernel cannot run here");
  return false;
}

// The key ranges a split-KV variant name reports ("flash_splitkv_x3_..." -> 3), or 0. A forced
// count is an upper bound: the ranges are equal whole key tiles, so a sequence of few (large)
// tiles can take fewer.
int split_count(const std::string& variant) {
  const std::string prefix = "flash_splitkv_x";
  if (!starts_with(variant, prefix.c_str())) return 0;
  return std::atoi(variant.c_str() + prefix.size());
}

}  // namespace

TEST_CASE("flash attention matches fp64 attention: fp16", "[gpu][kernels][attention]") {
  TLB_REQUIRE_GPU();
  check_sweep(kFp16);
}

TEST_CASE("flash attention matches fp64 attention: bf16", "[gpu][kernels][attention]") {
  TLB_REQUIRE_GPU();
  check_sweep(kBf16);
}

TEST_CASE("flash attention matches fp64 attention: fp32 tf32", "[gpu][kernels][attention]") {
  TLB_REQUIRE_GPU();
  check_sweep(kTf32);
}

TEST_CASE("flash attention matches fp64 attention: fp32 ieee", "[gpu][kernels][attention]") {
  TLB_REQUIRE_GPU();
  check_sweep(kIeee);
}

TEST_CASE("every fp16/bf16 tile shape and the short-sequence kernel match fp64 attention",
          "[gpu][kernels][attention]") {
  TLB_REQUIRE_GPU();
  const char* kTiles[] = {"standard,q128w8,mma", "standard,q128w4", "standard,q64w4"};
  int idx = 0;
  for (const Mode& mode : {kFp16, kBf16})
    for (int64_t head_dim : {64, 128})
      for (MaskKind mask : kMasks) {
        // Standard tiles on sequences shorter than, around and beyond one 128-row tile.
        for (int64_t seq : {7, 65, 129, 300}) {
          ++idx;
          Shape s{idx % 2 ? 1 : 3, 1 + idx % 3, seq, head_dim, mask, {}};
          if (mask == MaskKind::padding) s.valid_lens = padding_lens(s.batch, seq, static_cast<uint64_t>(idx));
          const Problem p = make_problem(s, mode.dtype, seed_of(s, mode, 2));
          const std::vector<double> ref = reference_attention(p);
          for (const char* tile : kTiles) {
            const std::string v = check_against_fp64(p, ref, mode, tile);
            CHECK(starts_with(v, "flash_fwd_sm80_"));
            CHECK(v.find(std::string(tile).substr(9, 6)) != std::string::npos);
            if (seq >= 300) {  // the same tile split over key ranges
              const std::string split = "splitkv:3," + std::string(tile).substr(9);
              CHECK(starts_with(check_against_fp64(p, ref, mode, split.c_str()), "flash_splitkv_x3_sm80_"));
            }
          }
        }
        // The short kernel on every length it takes (one 64- or 128-key tile).
        for (int64_t seq : {1, 7, 64, 65, 128}) {
          ++idx;
          Shape s{3, 1 + idx % 4, seq, head_dim, mask, {}};
          if (mask == MaskKind::padding) s.valid_lens = padding_lens(s.batch, seq, static_cast<uint64_t>(idx));
          const Problem p = make_problem(s, mode.dtype, seed_of(s, mode, 3));
          CHECK(starts_with(check_against_fp64(p, reference_attention(p), mode, "short"), "flash_short_"));
        }
      }
}

TEST_CASE("split-KV matches fp64 attention, including key ranges with no visible key",
          "[gpu][kernels][attention]") {
  TLB_REQUIRE_GPU();
  for (const Mode& mode : kModes)
    for (int64_t head_dim : {64, 128})
      for (MaskKind mask : kMasks) {
        // Padding lengths 100 and 1 leave most key ranges empty for those batch elements;
        // causal leaves the early rows with nothing to see in the late ranges.
        Shape s{mask == MaskKind::padding ? 3 : 1, 1, 1000, head_dim, mask, {}};
        if (mask == MaskKind::padding) s.valid_lens = {100, 1000, 1};
        const Problem p = make_problem(s, mode.dtype, seed_of(s, mode, 4));
        const std::vector<double> ref = reference_attention(p);
        const int forced = split_count(check_against_fp64(p, ref, mode, "splitkv:4"));
        CHECK((forced >= 2 && forced <= 4));
        CHECK(starts_with(check_against_fp64(p, ref, mode, "splitkv"), "flash_splitkv_x"));
      }
}

TEST_CASE("split-KV agrees with the standard kernel on a long sequence", "[gpu][kernels][attention]") {
  TLB_REQUIRE_GPU();
  for (const Mode& mode : kModes)
    for (int64_t head_dim : {64, 128}) {
      Shape s{1, 2, 4096, head_dim, MaskKind::none, {}};
      Problem p = make_problem(s, mode.dtype, seed_of(s, mode, 5));
      for (MaskKind mask : kMasks) {
        p.shape.mask = mask;
        if (mask == MaskKind::padding) {
          p.shape.valid_lens = {3001};
          p.valid_lens = DeviceBuffer(sizeof(int));
          TLB_CUDA_CHECK(cudaMemcpy(p.valid_lens.get(), p.shape.valid_lens.data(), sizeof(int),
                                    cudaMemcpyHostToDevice));
        }
        const Run standard = run_flash(p, mode, "standard");
        const Run split = run_flash(p, mode, "splitkv");
        const Run automatic = run_flash(p, mode, nullptr);
        const Errors e = compare(split.out, standard.out);
        INFO(mode.name << ", " << p.shape.describe() << ": " << split.variant << " vs " << standard.variant
                       << ": rel L2 " << e.rel_l2 << ", non-finite " << e.nonfinite);
        CHECK(standard.guards_intact);
        CHECK(split.guards_intact);
        CHECK(compare(standard.out, std::vector<double>(standard.out.size(), 0.0)).nonfinite == 0);
        CHECK(e.nonfinite == 0);
        CHECK(e.rel_l2 <= mode.tolerance);
        CHECK(starts_with(split.variant, "flash_splitkv_x"));
        CHECK(starts_with(standard.variant, "flash_fwd_"));
        // Two batch*heads cannot fill the GPU: the dispatcher splits on its own.
        if (std::getenv("TLBENCH_ATTN_VARIANT") == nullptr) CHECK(starts_with(automatic.variant, "flash_splitkv_x"));
        CHECK(compare(automatic.out, standard.out).rel_l2 <= mode.tolerance);
      }
    }
}

TEST_CASE("a batch element with no visible key gets zeros, never NaN", "[gpu][kernels][attention]") {
  TLB_REQUIRE_GPU();
  for (const Mode& mode : kModes)
    for (int64_t seq : {40, 300}) {
      Shape s{3, 2, seq, 64, MaskKind::padding, {0, static_cast<int>(seq), 3}};
      const Problem p = make_problem(s, mode.dtype, seed_of(s, mode, 6));
      const std::vector<double> ref = reference_attention(p);
      std::vector<const char*> forces = {nullptr, "standard"};
      if (seq > 64) forces.push_back("splitkv:3");
      for (const char* force : forces) {
        const Run r = run_flash(p, mode, force);
        INFO(mode.name << ", " << s.describe() << " -> " << r.variant);
        // Batch element 0 occupies the first seq rows of the output, all heads.
        const size_t n0 = static_cast<size_t>(seq * s.heads * s.head_dim);
        size_t nonzero = 0;
        for (size_t i = 0; i < n0; ++i) nonzero += r.out[i] != 0.0f;
        CHECK(nonzero == 0);
        const Errors e = compare(r.out, ref);
        CHECK(e.nonfinite == 0);
        CHECK(e.rel_l2 <= mode.tolerance);
      }
    }
}

TEST_CASE("the sm_90a wgmma kernel matches fp64 attention", "[gpu][kernels][attention]") {
  TLB_REQUIRE_GPU();
  if (!tlb::flash_attention_has_sm90a()) {
    WARN("not an sm_90 GPU running an sm_90a build: the wgmma kernel cannot run here");
    return;
  }
  int idx = 0;
  for (const Mode& mode : {kFp16, kBf16})
    for (int64_t head_dim : {64, 128})
      for (MaskKind mask : kMasks)
        for (int64_t seq : {1, 7, 65, 129, 300, 1000}) {
          ++idx;
          Shape s{idx % 2 ? 1 : 3, 1 + idx % 3, seq, head_dim, mask, {}};
          if (seq >= 300) s.heads = 1;  // keeps the host reference quick
          if (mask == MaskKind::padding) s.valid_lens = padding_lens(s.batch, seq, static_cast<uint64_t>(idx));
          const Problem p = make_problem(s, mode.dtype, seed_of(s, mode, 7));
          const std::vector<double> ref = reference_attention(p);
          CHECK(starts_with(check_against_fp64(p, ref, mode, "standard,wgmma"), "flash_fwd_sm90_wgmma_"));
          if (seq >= 300) CHECK(starts_with(check_against_fp64(p, ref, mode, "splitkv:3,wgmma"), "flash_splitkv_x3_sm90_wgmma_"));
        }
  // The long-sequence shape of the speed floor, scaled down, against the mma.sync kernel.
  for (const Mode& mode : {kFp16, kBf16}) {
    Shape s{1, 2, 4096, 128, MaskKind::causal, {}};
    const Problem p = make_problem(s, mode.dtype, seed_of(s, mode, 8));
    const Run w = run_flash(p, mode, "standard,wgmma");
    const Run m = run_flash(p, mode, "standard,q128w8,mma");
    const Errors e = compare(w.out, m.out);
    INFO(mode.name << ": " << w.variant << " vs " << m.variant << ": rel L2 " << e.rel_l2);
    CHECK(e.nonfinite == 0);
    CHECK(e.rel_l2 <= mode.tolerance);
  }
}

TEST_CASE("the sm_90a TMA kernel matches fp64 attention at every head_dim width", "[gpu][kernels][attention][tma]") {
  TLB_REQUIRE_GPU();
  if (!tma_kernel_runs_here()) return;
  // Each compiled width (32, 64, 80, 96, 128, 192, 256) and a head_dim that rounds up to each.
  int idx = 0;
  for (const Mode& mode : {kFp16, kBf16})
    for (int64_t head_dim : {8, 24, 32, 48, 64, 72, 80, 88, 96, 112, 128, 160, 192, 240, 256})
      for (MaskKind mask : kMasks)
        for (int64_t seq : {1, 7, 257, 1500}) {
          ++idx;
          Shape s{idx % 2 ? 1 : 3, 1 + idx % 3, seq, head_dim, mask, {}};
          if (seq >= 1500) s.heads = 1;  // keeps the host reference quick
          if (mask == MaskKind::padding) s.valid_lens = padding_lens(s.batch, seq, static_cast<uint64_t>(idx));
          const Problem p = make_problem(s, mode.dtype, seed_of(s, mode, 9));
          const std::vector<double> ref = reference_attention(p);
          // The width it runs on is named after the head: "d72w80" is a head of 72 on width 80.
          const int64_t w = head_dim <= 32 ? 32 : head_dim <= 64 ? 64 : head_dim <= 80 ? 80 : head_dim <= 96 ? 96
                          : head_dim <= 128 ? 128 : head_dim <= 192 ? 192 : 256;
          std::string name = "flash_fwd_sm90_tma_d" + std::to_string(head_dim);
          if (w != head_dim) name += 'w' + std::to_string(w);  // (char + string: no -Wrestrict alarm)
          name += "_q";
          CHECK(starts_with(check_against_fp64(p, ref, mode, "standard,tma,persistent"), name));
          CHECK(starts_with(check_against_fp64(p, ref, mode, "standard,tma,tiles"), name));
          // At 257 keys widths 32 and 64 without the causal mask take the short-keys tile; the
          // long one must still hold there.
          if (seq == 257) CHECK(starts_with(check_against_fp64(p, ref, mode, "standard,tma,longtile"), name));
          // Up to 64 columns a share of the exponentials may run on the FMA pipe: both ways hold.
          if (head_dim <= 64) {
            CHECK(check_against_fp64(p, ref, mode, "standard,tma,fmaexp").find("_fmaexp") != std::string::npos);
            CHECK(check_against_fp64(p, ref, mode, "standard,tma,mufuexp").find("_fmaexp") == std::string::npos);
          }
          if (seq >= 257) {
            const std::string v = check_against_fp64(p, ref, mode, "splitkv:3,tma");
            CHECK((split_count(v) >= 2 && split_count(v) <= 3));
            CHECK(v.find("_sm90_tma_") != std::string::npos);
          }
        }
  // Several rounds of the two-stage ring, and the causal diagonal far from the first tile.
  for (const Mode& mode : {kFp16, kBf16}) {
    Shape s{1, 1, 4097, 128, MaskKind::causal, {}};
    const Problem p = make_problem(s, mode.dtype, seed_of(s, mode, 10));
    const std::vector<double> ref = reference_attention(p);
    CHECK(check_against_fp64(p, ref, mode, "standard,tma") == "flash_fwd_sm90_tma_d128_q128_kv128");
    CHECK(check_against_fp64(p, ref, mode, "standard,tma,persistent") == "flash_fwd_sm90_tma_d128_q128_kv128_persistent");
  }
  // More items than SMs, handed out one by one: three persistent launches in a row (each must
  // find the item counter back at zero) compute every item as the grid of a block per item does,
  // itself checked against fp64 above. An item left out stays NaN.
  for (const Mode& mode : {kFp16, kBf16})
    for (int64_t head_dim : {64, 128})
      for (MaskKind mask : {MaskKind::causal, MaskKind::none}) {
        Shape s{4, 16, head_dim == 64 ? 1000 : 1024, head_dim, mask, {}};
        const Problem p = make_problem(s, mode.dtype, seed_of(s, mode, 13));
        const Run tiles = run_flash(p, mode, "standard,tma,tiles");
        for (int launch = 0; launch < 3; ++launch) {
          const Run persistent = run_flash(p, mode, "standard,tma,persistent");
          const Errors e = compare(persistent.out, tiles.out);
          INFO(mode.name << ", " << s.describe() << ", launch " << launch << ": " << persistent.variant << " vs "
                         << tiles.variant << ": rel L2 " << e.rel_l2 << ", non-finite " << e.nonfinite);
          CHECK(persistent.variant.find("_persistent") != std::string::npos);
          CHECK(persistent.guards_intact);
          CHECK(e.nonfinite == 0);
          CHECK(e.rel_l2 <= 1e-6);
        }
      }
  // The long-sequence shape of the speed table, scaled down, against the mma.sync kernel.
  for (const Mode& mode : {kFp16, kBf16})
    for (int64_t head_dim : {64, 128})
      for (MaskKind mask : {MaskKind::none, MaskKind::causal}) {
        Shape s{2, 2, 4096, head_dim, mask, {}};
        const Problem p = make_problem(s, mode.dtype, seed_of(s, mode, 11));
        const Run t = run_flash(p, mode, "standard,tma");
        const Run m = run_flash(p, mode, "standard,q128w8,mma");
        const Errors e = compare(t.out, m.out);
        INFO(mode.name << ", " << s.describe() << ": " << t.variant << " vs " << m.variant << ": rel L2 " << e.rel_l2);
        CHECK(t.guards_intact);
        CHECK(e.nonfinite == 0);
        CHECK(e.rel_l2 <= mode.tolerance);
      }
}

// A warpgroup whose rows all lie past seq stands by: it waits for every stage and hands it back
// without MMAs. Its warps once drifted apart there (one handed a stage back that another had
// not yet seen full, the stage was refilled, and the late warp waited for the round after),
// which hung a block once in some thousands of launches: the official sweep stopped in case 3.
// So case 3's attention (a 512-key padding mask: the last 192-row query tile leaves its third
// warpgroup standing by, items of one and of several key tiles) and a tf32 shape where the
// second of two warpgroups stands by, each grid, thousands of launches in a row. A launch that
// does not end within the deadline fails the test and ends the process (the GPU is held).
TEST_CASE("a standing-by warpgroup never holds the sm_90a TMA kernel over thousands of launches",
          "[gpu][kernels][attention][tma]") {
  TLB_REQUIRE_GPU();
  if (!tma_kernel_runs_here()) return;
  constexpr int kLaunches = 3000, kBatch = 200;  // launches between two looks at the stream
  constexpr double kDeadlineS = 60.0;
  const std::vector<int> case3_lens = {512, 384, 256, 500, 128, 512, 448, 300, 512, 200, 64, 511, 333, 480, 256, 1};
  struct Load {
    Mode mode;
    Shape shape;
    const char* tile;  // in the variant name
  };
  const Load loads[] = {
      {kFp16, {16, 12, 512, 64, MaskKind::padding, case3_lens}, "_q192_kv128"},
      {kBf16, {16, 12, 512, 64, MaskKind::padding, case3_lens}, "_q192_kv128"},
      {kTf32, {16, 4, 576, 128, MaskKind::padding, padding_lens(16, 576, 17)}, "_q128_kv"},
  };
  for (const Load& load : loads)
    for (const char* grid : {"standard,tma,persistent", "standard,tma,tiles"}) {
      const Problem p = make_problem(load.shape, load.mode.dtype, seed_of(load.shape, load.mode, 16));
      const Run once = run_flash(p, load.mode, grid);
      INFO(load.mode.name << ", " << load.shape.describe() << ", " << grid << " -> " << once.variant);
      REQUIRE(once.variant.find(load.tile) != std::string::npos);
      REQUIRE(once.guards_intact);
      REQUIRE(std::none_of(once.out.begin(), once.out.end(), [](float x) { return std::isnan(x); }));

      AttentionArgs a = attention_args(p, load.mode, grid);
      tlb::test::GuardedOutput out(load.shape.elems(), load.mode.dtype);
      out.poison();
      a.o = out.ptr();
      DeviceBuffer ws(tlb::flash_attention_workspace_bytes(a));
      a.workspace = ws.get();
      const auto start = std::chrono::steady_clock::now();
      for (int launched = 0; launched < kLaunches; launched += kBatch) {
        for (int i = 0; i < kBatch; ++i) tlb::flash_attention(a, nullptr);
        cudaError_t st;
        while ((st = cudaStreamQuery(nullptr)) == cudaErrorNotReady) {
          if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > kDeadlineS) {
            std::fprintf(stderr, "%s, %s, %s: launches %d..%d still running after %.0f s: a block never finished\n",
                         load.mode.name, load.shape.describe().c_str(), grid, launched, launched + kBatch - 1, kDeadlineS);
            std::fflush(stderr);
            std::_Exit(3);  // the kernel holds the GPU: nothing after it could run
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        TLB_CUDA_CHECK(st);
      }
      bool guards = false;
      const std::vector<float> last = out.read(&guards);
      CHECK(guards);
      CHECK(tlb::test::bit_identical(last, once.out));  // the same items, all of them, every time
    }
}

// tf32 on Hopper runs the TMA kernel (V transposed through the workspace) at widths 32, 64,
// 96 and 128; its mma.sync kernel stays the portable path and must still hold there too.
TEST_CASE("the sm_90a TMA kernel in tf32 and the mma.sync tf32 kernel match fp64 attention",
          "[gpu][kernels][attention][tma]") {
  TLB_REQUIRE_GPU();
  if (!tma_kernel_runs_here()) return;
  int idx = 0;
  for (int64_t head_dim : {32, 64, 96, 128})
    for (MaskKind mask : kMasks)
      for (int64_t seq : {1, 7, 65, 257, 1500}) {
        ++idx;
        Shape s{idx % 2 ? 1 : 3, seq >= 1500 ? 1 : 1 + idx % 3, seq, head_dim, mask, {}};
        if (mask == MaskKind::padding) s.valid_lens = padding_lens(s.batch, seq, static_cast<uint64_t>(idx));
        const Problem p = make_problem(s, kTf32.dtype, seed_of(s, kTf32, 14));
        const std::vector<double> ref = reference_attention(p);
        const std::string name = "flash_fwd_sm90_tma_tf32_d" + std::to_string(head_dim) + "_q128_kv";
        // As dispatched, few heads on a long sequence split over keys ("flash_splitkv_x3_sm90_...").
        CHECK(check_against_fp64(p, ref, kTf32, nullptr).find(name.substr(std::string("flash_fwd_").size())) !=
              std::string::npos);
        CHECK(starts_with(check_against_fp64(p, ref, kTf32, "standard,tma,persistent"), name));
        CHECK(starts_with(check_against_fp64(p, ref, kTf32, "standard,tma,tiles"), name));
        CHECK(starts_with(check_against_fp64(p, ref, kTf32, "standard,mma"), "flash_fwd_tf32_d"));
        if (seq >= 257) {
          const std::string v = check_against_fp64(p, ref, kTf32, "splitkv:3,tma");
          CHECK((split_count(v) >= 2 && split_count(v) <= 3));
          CHECK(v.find("_sm90_tma_tf32_") != std::string::npos);
        }
      }
  // Many rounds of the ring, keys that end mid-group of 8 (V^T's padding), the diagonal far from
  // the first tile.
  for (int64_t head_dim : {32, 64, 96, 128}) {
    Shape s{1, 1, 4097, head_dim, MaskKind::causal, {}};
    const Problem p = make_problem(s, kTf32.dtype, seed_of(s, kTf32, 15));
    const std::vector<double> ref = reference_attention(p);
    CHECK(starts_with(check_against_fp64(p, ref, kTf32, "standard,tma"), "flash_fwd_sm90_tma_tf32_d"));
  }
}

// Heads narrower than the cp.async kernels' widths (multiples of 8 below 64 and 128) on every
// engine that takes them, in every dtype and fp32 math: their columns zero-filled on the way
// in, only theirs stored on the way out (the guard bytes and the NaN-poisoned output and
// partials see any column written past the head), split-KV partials at the head's own width.
TEST_CASE("narrow heads on the mma.sync, tf32 and FMA kernels match fp64 attention", "[gpu][kernels][attention]") {
  TLB_REQUIRE_GPU();
  int idx = 0;
  // The name's head: "_d80w128" for a head of 80 on the width-128 kernel, "_d96" on its own.
  auto head_on = [](int64_t head_dim, int width) {
    std::string h = "_d";
    h += std::to_string(head_dim);
    if (head_dim != width) {
      h += 'w';
      h += std::to_string(width);
    }
    return h;
  };
  for (int64_t head_dim : {8, 24, 40, 72, 80, 96, 120})
    for (MaskKind mask : kMasks)
      for (int64_t seq : {1, 7, 65, 257}) {
        ++idx;
        Shape s{idx % 2 ? 1 : 3, 1 + idx % 3, seq, head_dim, mask, {}};
        if (mask == MaskKind::padding) s.valid_lens = padding_lens(s.batch, seq, static_cast<uint64_t>(idx));
        for (const Mode& mode : kModes) {
          const bool fma = mode.dtype == DType::fp32 && mode.math == tlb::Fp32Math::ieee;
          const std::string head =
              head_on(head_dim, fma ? tlb::attn::fma_width(head_dim) : tlb::attn::portable_width(head_dim));
          const Problem p = make_problem(s, mode.dtype, seed_of(s, mode, 16));
          const std::vector<double> ref = reference_attention(p);
          check_against_fp64(p, ref, mode, nullptr);  // as dispatched (on Hopper, 16-bit: the TMA kernel)
          if (mode.dtype != DType::fp32) {
            for (const char* tile : {"standard,q128w8,mma", "standard,q64w4,mma"})
              CHECK(check_against_fp64(p, ref, mode, tile).find("_sm80" + head) != std::string::npos);
            if (seq >= 257) CHECK(split_count(check_against_fp64(p, ref, mode, "splitkv:3,q64w4,mma")) == 3);
          } else {
            const char* engine = mode.math == tlb::Fp32Math::tf32 ? "standard,mma" : "standard";
            CHECK(check_against_fp64(p, ref, mode, engine).find(head) != std::string::npos);
            if (seq >= 257) {
              const std::string split = std::string("splitkv:3") + (mode.math == tlb::Fp32Math::tf32 ? ",mma" : "");
              CHECK(split_count(check_against_fp64(p, ref, mode, split.c_str())) >= 2);
            }
          }
        }
      }
  // Many key tiles, the diagonal far from the first one.
  for (const Mode& mode : {kTf32, kIeee}) {
    Shape s{1, 2, 1500, 80, MaskKind::causal, {}};
    const Problem p = make_problem(s, mode.dtype, seed_of(s, mode, 17));
    const bool tf32 = mode.math == tlb::Fp32Math::tf32;
    CHECK(check_against_fp64(p, reference_attention(p), mode, tf32 ? "standard,mma" : nullptr)
              .find(tf32 ? "_d80w128" : "_d80w96") != std::string::npos);
  }
  // tf32 on the TMA kernel at narrow heads (on the widths of 32, 64, 96 and 128 columns above
  // them: TMA fills the missing columns of a box that holds some of the head), both grids and
  // split.
  if (!tlb::flash_attention_has_sm90a()) return;
  for (int64_t head_dim : {8, 24, 40, 56, 72, 80, 104, 120})
    for (MaskKind mask : kMasks)
      for (int64_t seq : {7, 257, 1500}) {
        ++idx;
        Shape s{seq >= 1500 ? 1 : 2, 1 + idx % 2, seq, head_dim, mask, {}};
        if (mask == MaskKind::padding) s.valid_lens = padding_lens(s.batch, seq, static_cast<uint64_t>(idx));
        const Problem p = make_problem(s, kTf32.dtype, seed_of(s, kTf32, 18));
        const std::vector<double> ref = reference_attention(p);
        const std::string name = "flash_fwd_sm90_tma_tf32_d" + std::to_string(head_dim) + "w";
        CHECK(starts_with(check_against_fp64(p, ref, kTf32, "standard,tma,persistent"), name));
        CHECK(starts_with(check_against_fp64(p, ref, kTf32, "standard,tma,tiles"), name));
        if (seq >= 257) {
          const std::string v = check_against_fp64(p, ref, kTf32, "splitkv:3,tma");
          CHECK(split_count(v) >= 2);
          CHECK(v.find("_sm90_tma_tf32_d") != std::string::npos);
        }
      }
}

// Heads over 128 columns off Hopper (and on it, when asked for): the mma.sync kernel at width
// 256, q64w4 tiles of 32 keys, Q re-read from shared memory for every key tile.
TEST_CASE("heads over 128 on the mma.sync kernel match fp64 attention", "[gpu][kernels][attention]") {
  TLB_REQUIRE_GPU();
  int idx = 0;
  for (int64_t head_dim : {136, 200, 256})
    for (MaskKind mask : kMasks)
      for (int64_t seq : {1, 7, 257, 1500}) {
        ++idx;
        Shape s{seq >= 1500 ? 1 : 2, 1 + idx % 3, seq, head_dim, mask, {}};
        if (mask == MaskKind::padding) s.valid_lens = padding_lens(s.batch, seq, static_cast<uint64_t>(idx));
        const std::string head = "_sm80_d" + std::to_string(head_dim) + (head_dim == 256 ? "" : "w256") + "_q64w4_kv32";
        for (const Mode& mode : {kFp16, kBf16}) {
          const Problem p = make_problem(s, mode.dtype, seed_of(s, mode, 19));
          const std::vector<double> ref = reference_attention(p);
          check_against_fp64(p, ref, mode, nullptr);  // as dispatched (on Hopper: the TMA kernel)
          CHECK(check_against_fp64(p, ref, mode, "standard,mma").find(head) != std::string::npos);
          if (seq >= 257) CHECK(split_count(check_against_fp64(p, ref, mode, "splitkv:3,mma")) == 3);
        }
      }
  // Many key tiles and rounds of the double buffer, the causal diagonal far from the first one.
  for (const Mode& mode : {kFp16, kBf16}) {
    Shape s{1, 1, 4097, 256, MaskKind::causal, {}};
    const Problem p = make_problem(s, mode.dtype, seed_of(s, mode, 20));
    CHECK(check_against_fp64(p, reference_attention(p), mode, "standard,mma") == "flash_fwd_sm80_d256_q64w4_kv32");
  }
}

// ---- Host-only: no device needed.

// Small enough for compute-sanitizer (memcheck, racecheck): every compiled width of the TMA
// kernel (16-bit, with the exponentials on the FMA pipe where it has them, and tf32), both
// masks, a sequence that wraps the K/V ring and ends mid-tile, each grid. 575 keys
// take four tiles of 144 at widths 32 and 64 without the causal mask (the short-keys tile),
// five of 128 with it.
TEST_CASE("the sm_90a TMA kernel on small shapes, for the sanitizers", "[gpu][kernels][attention][sanitize]") {
  TLB_REQUIRE_GPU();
  if (!tma_kernel_runs_here()) return;
  for (int64_t head_dim : {32, 64, 80, 96, 160, 256})
    for (MaskKind mask : {MaskKind::none, MaskKind::causal}) {
      const Mode& mode = head_dim == 96 || head_dim == 32 ? kBf16 : kFp16;
      Shape s{2, 2, 575, head_dim, mask, {}};
      const Problem p = make_problem(s, mode.dtype, seed_of(s, mode, 12));
      const std::vector<double> ref = reference_attention(p);
      CHECK(starts_with(check_against_fp64(p, ref, mode, "standard,tma"), "flash_fwd_sm90_tma_d"));
      CHECK(starts_with(check_against_fp64(p, ref, mode, "standard,tma,persistent"), "flash_fwd_sm90_tma_d"));
      CHECK(split_count(check_against_fp64(p, ref, mode, "splitkv:2,tma")) == 2);
      if (head_dim <= 64)
        CHECK(check_against_fp64(p, ref, mode, "standard,tma,fmaexp").find("_fmaexp") != std::string::npos);
    }
  // tf32: every compiled width (32, 64, 96, 128), exact or narrower.
  for (int64_t head_dim : {8, 32, 64, 72, 96, 128})
    for (MaskKind mask : {MaskKind::none, MaskKind::causal}) {
      Shape s{2, 2, 575, head_dim, mask, {}};
      const Problem p = make_problem(s, kTf32.dtype, seed_of(s, kTf32, 21));
      const std::vector<double> ref = reference_attention(p);
      CHECK(starts_with(check_against_fp64(p, ref, kTf32, "standard,tma"), "flash_fwd_sm90_tma_tf32_d"));
      CHECK(split_count(check_against_fp64(p, ref, kTf32, "splitkv:2,tma")) == 2);
    }
}

TEST_CASE("head_dims the kernels do not cover fall back with a reason", "[kernels][attention]") {
  // Multiples of 8 up to 128 run everywhere in every dtype (narrower heads on the widths 64 and
  // 128 with zero-filled columns), and up to 256 in fp16/bf16 (the sm_90a kernel on Hopper, the
  // mma.sync one at width 256 elsewhere); fp32 falls back over 128 and says why. Widths outside
  // 8..256 or off the multiples of 8 fall back everywhere.
  auto layer = [](int64_t head_dim) { return layer_shape(2, 4, 100, head_dim); };
  std::string why;
  for (int64_t head_dim : {8, 24, 32, 40, 64, 80, 96, 120, 128})
    for (DType dt : {DType::fp16, DType::bf16, DType::fp32}) {
      INFO("head_dim " << head_dim << " " << tlb::to_string(dt));
      CHECK(tlb::flash_attention_supported(layer(head_dim), dt, &why));
    }
  for (int64_t head_dim : {136, 192, 256}) {
    INFO("head_dim " << head_dim);
    CHECK(tlb::flash_attention_supported(layer(head_dim), DType::fp16, &why));
    CHECK(tlb::flash_attention_supported(layer(head_dim), DType::bf16, &why));
    CHECK_FALSE(tlb::flash_attention_supported(layer(head_dim), DType::fp32, &why));
    CHECK(why == "head_dim " + std::to_string(head_dim) + " is over 128, the fp32 kernels' widest head");
    CHECK(tlb::flash_attention_workspace_bytes(layer(head_dim), DType::fp32) == 0);
  }
  for (int64_t head_dim : {36, 264}) {
    CHECK_FALSE(tlb::flash_attention_supported(layer(head_dim), DType::bf16, &why));
    CHECK(why == "head_dim " + std::to_string(head_dim) + " is not a multiple of 8 in 8..256");
    CHECK(tlb::flash_attention_workspace_bytes(layer(head_dim), DType::bf16) == 0);
    AttentionArgs a;
    a.dtype = DType::bf16;
    a.head_dim = head_dim;
    a.seq = 100;
    CHECK_THROWS_AS(tlb::flash_attention(a, nullptr), std::invalid_argument);
  }
}

// The variant a narrow head runs, by engine: the width it is compiled at in its name, the tiles
// and kernels it cannot run refused when forced.
TEST_CASE("narrow heads run on the width above them and say so", "[kernels][attention]") {
  if (std::getenv("TLBENCH_ATTN_VARIANT") != nullptr) {
    WARN("TLBENCH_ATTN_VARIANT is set: the dispatcher's own choices are not what this test checks");
    return;
  }
  const bool sm90a = tlb::flash_attention_has_sm90a();
  auto args = [](int64_t head_dim, DType dt, tlb::Fp32Math math, const char* force) {
    return shape_args(2, 8, 1000, head_dim, dt, MaskKind::causal, math, force);
  };
  using tlb::Fp32Math;
  CHECK(tlb::flash_attention_variant(args(80, DType::fp32, Fp32Math::ieee, nullptr)) == "flash_fwd_fp32fma_d80w96_q64_kv64");
  CHECK(tlb::flash_attention_variant(args(40, DType::fp32, Fp32Math::ieee, nullptr)) == "flash_fwd_fp32fma_d40w64_q64_kv64");
  CHECK(tlb::flash_attention_variant(args(64, DType::fp32, Fp32Math::ieee, nullptr)) == "flash_fwd_fp32fma_d64_q64_kv64");
  // tf32 on Hopper: the TMA kernel on the width of 32, 64, 96 or 128 columns at or above the
  // head, elsewhere the mma.sync kernel on 64 or 128; 1000 causal keys make short items there
  // (a mean of 4-8 key tiles), so a persistent grid.
  CHECK(tlb::flash_attention_variant(args(80, DType::fp32, Fp32Math::tf32, nullptr)) ==
        (sm90a ? "flash_fwd_sm90_tma_tf32_d80w96_q128_kv64_persistent" : "flash_fwd_tf32_d80w128_q64_kv32"));
  CHECK(tlb::flash_attention_variant(args(24, DType::fp32, Fp32Math::tf32, nullptr)) ==
        (sm90a ? "flash_fwd_sm90_tma_tf32_d24w32_q128_kv128_persistent" : "flash_fwd_tf32_d24w64_q64_kv32"));
  CHECK(tlb::flash_attention_variant(args(112, DType::fp32, Fp32Math::tf32, nullptr)) ==
        (sm90a ? "flash_fwd_sm90_tma_tf32_d112w128_q128_kv64_persistent" : "flash_fwd_tf32_d112w128_q64_kv32"));
  CHECK(tlb::flash_attention_variant(args(112, DType::fp32, Fp32Math::tf32, "standard,mma")) ==
        "flash_fwd_tf32_d112w128_q64_kv32");
  CHECK(tlb::flash_attention_variant(args(48, DType::fp32, Fp32Math::tf32, "standard,mma")) ==
        "flash_fwd_tf32_d48w64_q64_kv32");
  for (const char* spec : {"standard,tma", "tma"}) {
    INFO(spec);
    if (sm90a) {
      CHECK(tlb::flash_attention_variant(args(96, DType::fp32, Fp32Math::tf32, spec)) ==
            "flash_fwd_sm90_tma_tf32_d96_q128_kv64_persistent");
      CHECK(tlb::flash_attention_variant(args(56, DType::fp32, Fp32Math::tf32, spec)) ==
            "flash_fwd_sm90_tma_tf32_d56w64_q128_kv128_persistent");
    }
  }
  // fp16/bf16 on mma.sync (everywhere but Hopper, where it is asked for): the two standard
  // tiles; q128w4, the short-sequence kernel and the wgmma one take heads of 64 and 128 only.
  CHECK(tlb::flash_attention_variant(args(80, DType::fp16, Fp32Math::tf32, "standard,q128w8,mma")) ==
        "flash_fwd_sm80_d80w128_q128w8_kv64");
  CHECK(tlb::flash_attention_variant(args(8, DType::bf16, Fp32Math::tf32, "standard,q64w4,mma")) ==
        "flash_fwd_sm80_d8w64_q64w4_kv64");
  CHECK(tlb::flash_attention_variant(args(40, DType::fp16, Fp32Math::tf32, "standard,q128w8,mma")) ==
        "flash_fwd_sm80_d40w64_q128w8_kv32");
  CHECK_THROWS_AS(tlb::flash_attention_variant(args(80, DType::fp16, Fp32Math::tf32, "standard,q128w4,mma")),
                  std::invalid_argument);
  CHECK_THROWS_AS(tlb::flash_attention_variant(args(80, DType::fp16, Fp32Math::tf32, "short")), std::invalid_argument);
  CHECK_THROWS_AS(tlb::flash_attention_variant(args(80, DType::fp16, Fp32Math::tf32, "wgmma")), std::invalid_argument);
  // Over 128 columns: the q64w4 tile at width 256, the only one there.
  CHECK(tlb::flash_attention_variant(args(136, DType::fp16, Fp32Math::tf32, "standard,mma")) ==
        "flash_fwd_sm80_d136w256_q64w4_kv32");
  CHECK(tlb::flash_attention_variant(args(256, DType::bf16, Fp32Math::tf32, "standard,q64w4,mma")) ==
        "flash_fwd_sm80_d256_q64w4_kv32");
  CHECK_THROWS_AS(tlb::flash_attention_variant(args(192, DType::fp16, Fp32Math::tf32, "standard,q128w8,mma")),
                  std::invalid_argument);
  CHECK_THROWS_AS(tlb::flash_attention_variant(args(256, DType::fp16, Fp32Math::tf32, "short,mma")),
                  std::invalid_argument);
  if (!sm90a)
    CHECK(tlb::flash_attention_variant(args(200, DType::fp16, Fp32Math::tf32, nullptr)) ==
          "flash_fwd_sm80_d200w256_q64w4_kv32");
  CHECK(tlb::flash_attention_workspace_bytes(args(256, DType::fp16, Fp32Math::tf32, "splitkv:4,mma")) ==
        4ull * 16 * 1000 * 256 * 4 + 4ull * 16 * 1000 * 2 * 4);
  // A split's partials are the head's own columns.
  AttentionArgs split = args(80, DType::fp32, Fp32Math::ieee, "splitkv:4");
  split.mask = MaskKind::none;
  CHECK(tlb::flash_attention_variant(split) == "flash_splitkv_x4_fp32fma_d80w96_q64_kv64");
  CHECK(tlb::flash_attention_workspace_bytes(split) == 4ull * 16 * 1000 * 80 * 4 + 4ull * 16 * 1000 * 2 * 4);
}

TEST_CASE("attention variants and workspace are pure functions of the shape, linear in seq",
          "[kernels][attention]") {
  if (std::getenv("TLBENCH_ATTN_VARIANT") != nullptr) {
    WARN("TLBENCH_ATTN_VARIANT is set: the dispatcher's own choices are not what this test checks");
    return;
  }
  // The speed-floor shape: the standard 128-row kernel (mma.sync, or wgmma on Hopper), no
  // workspace.
  const bool sm90a = tlb::flash_attention_has_sm90a();
  const std::string floor_variant = tlb::flash_attention_variant(shape_args(1, 16, 16384, 128, DType::fp16, MaskKind::none));
  CHECK(floor_variant == (sm90a ? "flash_fwd_sm90_tma_d128_q128_kv176" : "flash_fwd_sm80_d128_q128w8_kv64"));
  // Short unmasked items run on a persistent grid; on Hopper 257 keys take two tiles of 144 (288
  // computed) rather than three of 128 (384), 1500 twelve of 128 (1536) rather than eleven of
  // 144 (1584), and `longtile` keeps the long-sequence tile.
  CHECK(tlb::flash_attention_variant(shape_args(32, 16, 257, 64, DType::fp16, MaskKind::none)) ==
        (sm90a ? "flash_fwd_sm90_tma_d64_q128_kv144_persistent" : "flash_fwd_sm80_d64_q128w8_kv32"));
  CHECK(tlb::flash_attention_variant(shape_args(4, 20, 1500, 64, DType::bf16, MaskKind::none)) ==
        (sm90a ? "flash_fwd_sm90_tma_d64_q192_kv128_persistent" : "flash_fwd_sm80_d64_q128w8_kv32"));
  if (sm90a) {
    AttentionArgs long_tile = shape_args(32, 16, 257, 64, DType::fp16, MaskKind::none);
    long_tile.force = "longtile";
    CHECK(tlb::flash_attention_variant(long_tile) == "flash_fwd_sm90_tma_d64_q192_kv128_persistent");
  }
  // Exponentials on the FMA pipe: the TMA kernel's, every 4th 8-key column at width 64, every
  // 3rd at 32; a spec asking for them elsewhere is refused.
  AttentionArgs fma_exp = shape_args(4, 20, 1500, 64, DType::bf16, MaskKind::none);
  fma_exp.force = "fmaexp";
  if (sm90a) {
    CHECK(tlb::flash_attention_variant(fma_exp) == "flash_fwd_sm90_tma_d64_q192_kv128_fmaexp4_persistent");
    fma_exp.head_dim = 24;
    CHECK(tlb::flash_attention_variant(fma_exp) == "flash_fwd_sm90_tma_d24w32_q192_kv128_fmaexp3_persistent");
    fma_exp.force = "mufuexp";
    CHECK(tlb::flash_attention_variant(fma_exp) == "flash_fwd_sm90_tma_d24w32_q192_kv128_persistent");
    fma_exp.force = "fmaexp";
  } else {
    CHECK_THROWS_AS(tlb::flash_attention_variant(fma_exp), std::invalid_argument);
  }
  fma_exp.head_dim = 80;
  CHECK_THROWS_AS(tlb::flash_attention_variant(fma_exp), std::invalid_argument);
  fma_exp.head_dim = 64;
  fma_exp.dtype = DType::fp32;
  CHECK_THROWS_AS(tlb::flash_attention_variant(fma_exp), std::invalid_argument);
  // fmaexp asks for the TMA kernel (a short sequence would otherwise take the short-sequence
  // kernel); a grid or the long tile forced onto the short-sequence kernel is refused.
  AttentionArgs short_seq = shape_args(64, 16, 64, 64, DType::fp16, MaskKind::none);
  short_seq.force = "fmaexp";
  if (sm90a)
    CHECK(tlb::flash_attention_variant(short_seq).find("flash_fwd_sm90_tma_d64_q") != std::string::npos);
  else
    CHECK_THROWS_AS(tlb::flash_attention_variant(short_seq), std::invalid_argument);
  for (const char* spec : {"short,persistent", "short,tiles", "short,longtile"}) {
    INFO(spec);
    short_seq.force = spec;
    CHECK_THROWS_AS(tlb::flash_attention_variant(short_seq), std::invalid_argument);
  }
  static_assert(tlb::attn::sm90_tile(64, false, 257).kv_cols == 144 && tlb::attn::sm90_tile(64, false, 1500).kv_cols == 128);
  static_assert(tlb::attn::sm90_tile(32, false, 257).kv_cols == 144 && tlb::attn::sm90_tile(64, true, 257).kv_cols == 128);
  static_assert(tlb::attn::sm90_tile(128, false, 257).kv_cols == 176 && tlb::attn::sm90_tile(64, false, 64).kv_cols == 128);
  CHECK(tlb::flash_attention_variant(shape_args(1, 16, 16384, 128, DType::bf16, MaskKind::causal)) ==
        (sm90a ? "flash_fwd_sm90_tma_d128_q128_kv128" : "flash_fwd_sm80_d128_q128w8_kv64"));
  // Causal items of 1 to 32 key tiles average 16.5: short, a persistent grid; of up to 64, not.
  CHECK(tlb::flash_attention_variant(shape_args(8, 16, 4096, 128, DType::fp16, MaskKind::causal)) ==
        (sm90a ? "flash_fwd_sm90_tma_d128_q128_kv128_persistent" : "flash_fwd_sm80_d128_q128w8_kv64"));
  CHECK(tlb::flash_attention_variant(shape_args(1, 16, 8192, 128, DType::fp16, MaskKind::causal)) ==
        (sm90a ? "flash_fwd_sm90_tma_d128_q128_kv128" : "flash_fwd_sm80_d128_q128w8_kv64"));
  CHECK(tlb::flash_attention_workspace_bytes(layer_shape(1, 16, 16384, 128), DType::fp16) == 0);
  // Short sequences take the single-tile kernel.
  CHECK(starts_with(tlb::flash_attention_variant(shape_args(64, 16, 64, 64, DType::fp16, MaskKind::none)), "flash_short_d64_q64_kv64"));
  CHECK(starts_with(tlb::flash_attention_variant(shape_args(8, 12, 128, 64, DType::bf16, MaskKind::padding)), "flash_short_d64_q64_kv128"));
  CHECK(starts_with(tlb::flash_attention_variant(shape_args(1, 8, 128, 64, DType::fp32, MaskKind::none)),
                    sm90a ? "flash_fwd_sm90_tma_tf32_d64_q128_kv128" : "flash_fwd_tf32_d64"));
  AttentionArgs ieee = shape_args(1, 8, 128, 64, DType::fp32, MaskKind::none);
  ieee.fp32_math = tlb::Fp32Math::ieee;
  CHECK(starts_with(tlb::flash_attention_variant(ieee), "flash_fwd_fp32fma_d64"));
  // Few batch*heads on a long sequence split over keys, with a workspace linear in seq.
  for (DType dt : {DType::fp16, DType::bf16, DType::fp32})
    for (int64_t seq : {1024, 2048, 4096}) {
      const uint64_t ws = tlb::flash_attention_workspace_bytes(layer_shape(1, 2, seq, 128), dt);
      INFO(tlb::to_string(dt) << " seq " << seq << ": " << ws << " bytes");
      CHECK(ws > 0);
      CHECK(ws <= 16ull * 2 * static_cast<uint64_t>(seq) * (128 + 2) * 4 + 512);
      CHECK(starts_with(tlb::flash_attention_variant(shape_args(1, 2, seq, 128, dt, MaskKind::causal)), "flash_splitkv_x"));
      // The same shape given as args plans the same workspace.
      AttentionArgs a = shape_args(1, 2, seq, 128, dt, MaskKind::none);
      CHECK(tlb::flash_attention_workspace_bytes(a) <= ws);
    }
  // Longer still, the query tiles alone fill the GPU: no split, no workspace (the official
  // 100k-token case included).
  CHECK(tlb::flash_attention_workspace_bytes(layer_shape(1, 2, 65536, 128), DType::fp16) == 0);
  CHECK(tlb::flash_attention_workspace_bytes(layer_shape(1, 16, 100000, 64), DType::fp16) == 0);
  // A forced split's workspace is exactly its partials: O in fp32 and (max, sum) per row.
  AttentionArgs forced = shape_args(1, 2, 4096, 128, DType::fp16, MaskKind::none);
  forced.force = "splitkv:4";
  CHECK(tlb::flash_attention_variant(forced) ==
        (sm90a ? "flash_splitkv_x4_sm90_tma_d128_q128_kv176_persistent" : "flash_splitkv_x4_sm80_d128_q64w4_kv64"));
  // (Each of the four ranges holds 6 key tiles: short items, a persistent grid.)
  CHECK(tlb::flash_attention_workspace_bytes(forced) == 4ull * 2 * 4096 * 128 * 4 + 4ull * 2 * 4096 * 2 * 4);
  // Forced specs that cannot run the shape are errors, not silent substitutions.
  forced.force = "short";
  CHECK_THROWS_AS(tlb::flash_attention_variant(forced), std::invalid_argument);
  forced.force = "splitkv,q256w2";
  CHECK_THROWS_AS(tlb::flash_attention_variant(forced), std::invalid_argument);
  forced.force = "standard,q64w4,wgmma";
  CHECK_THROWS_AS(tlb::flash_attention_variant(forced), std::invalid_argument);
  forced.force = "standard,q128w8,tma";  // the TMA kernel's tile follows the head
  CHECK_THROWS_AS(tlb::flash_attention_variant(forced), std::invalid_argument);
  if (!sm90a) {
    forced.force = "tma";
    CHECK_THROWS_AS(tlb::flash_attention_variant(forced), std::invalid_argument);
  }
  AttentionArgs fp32_wgmma = shape_args(1, 2, 4096, 128, DType::fp32, MaskKind::none);
  fp32_wgmma.force = "wgmma";
  CHECK_THROWS_AS(tlb::flash_attention_variant(fp32_wgmma), std::invalid_argument);
  AttentionArgs one_tile = shape_args(1, 1, 50, 64, DType::fp16, MaskKind::none);
  one_tile.force = "splitkv";
  CHECK_THROWS_AS(tlb::flash_attention_variant(one_tile), std::invalid_argument);
}
