// The fused add + bias + LayerNorm against an fp64 host LayerNorm on fresh random rows (with
// per-row offsets, so a one-pass variance formula would lose digits), outputs NaN-poisoned
// before every launch: resid_out bit-exact, norm_out within the dtype's rounding, every element
// written, both inverse square roots, resid aliasing x, rows beyond one wave of the grid.
// The bit trick's Newton step count and the support checks are host-only tests.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/rounding.hpp"
#include "layernorm/add_layernorm.hpp"
#include "layernorm/add_layernorm_plan.hpp"
#include "layernorm/rsqrt.hpp"
#include "test_support.hpp"

namespace {

using tlb::AddNormArgs;
using tlb::DeviceBuffer;
using tlb::DType;
using tlb::RsqrtKind;

// ---- host-only properties -------------------------------------------------------------------

double max_rel_error_of_bit_trick(int steps) {
  // Every exponent from 2^-40 to 2^40 with many mantissas: the seed's error depends on both.
  std::mt19937 gen(12345);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  double worst = 0.0;
  for (int e = -40; e <= 40; ++e) {
    for (int i = 0; i < 4000; ++i) {
      const float x = std::ldexp(mant(gen), e);
      const double exact = 1.0 / std::sqrt(static_cast<double>(x));
      const double got = tlb::rsqrt_bit_trick(x, steps);
      worst = std::max(worst, std::fabs(got / exact - 1.0));
    }
  }
  return worst;
}

TEST_CASE("bit-trick rsqrt: two Newton steps suffice for fp16/bf16, fp32 needs three",
          "[layernorm]") {
  const double e1 = max_rel_error_of_bit_trick(1);
  const double e2 = max_rel_error_of_bit_trick(2);
  const double e3 = max_rel_error_of_bit_trick(3);
  INFO("max relative error after 1/2/3 steps: " << e1 << " " << e2 << " " << e3);
  CHECK(e1 > 1e-4);   // one step is visible even in bf16 outputs
  CHECK(e2 < 5e-6);   // far below fp16's 2^-11 rounding
  CHECK(e2 > 1e-6);   // but not below fp32's 1e-6 test bar
  CHECK(e3 < 3e-7);   // a few fp32 ulps
  CHECK(tlb::bit_trick_newton_steps(DType::fp16) == 2);
  CHECK(tlb::bit_trick_newton_steps(DType::bf16) == 2);
  CHECK(tlb::bit_trick_newton_steps(DType::fp32) == 3);
}

AddNormArgs fake_args(DType dt, int64_t cols) {
  // Addresses only; nothing is dereferenced by the support check.
  AddNormArgs a;
  a.dtype = dt;
  a.rows = 3;
  a.cols = cols;
  a.x = reinterpret_cast<const void*>(uintptr_t{0x10000});
  a.delta = reinterpret_cast<const void*>(uintptr_t{0x20000});
  a.bias = reinterpret_cast<const void*>(uintptr_t{0x30000});
  a.resid_out = reinterpret_cast<void*>(uintptr_t{0x40000});
  a.norm_out = reinterpret_cast<void*>(uintptr_t{0x50000});
  a.gamma = reinterpret_cast<const void*>(uintptr_t{0x60000});
  a.beta = reinterpret_cast<const void*>(uintptr_t{0x70000});
  return a;
}

TEST_CASE("add_layernorm_supported names what it rejects", "[layernorm]") {
  std::string why;
  CHECK(tlb::add_layernorm_supported(fake_args(DType::fp16, 1600), &why));
  CHECK(tlb::add_layernorm_supported(fake_args(DType::fp32, tlb::kAddNormMaxCols), &why));

  CHECK_FALSE(tlb::add_layernorm_supported(fake_args(DType::fp16, 12), &why));
  CHECK(why.find("multiple of 8") != std::string::npos);
  CHECK_FALSE(tlb::add_layernorm_supported(fake_args(DType::bf16, tlb::kAddNormMaxCols + 8), &why));
  CHECK(why.find("registers") != std::string::npos);

  AddNormArgs a = fake_args(DType::fp16, 64);
  a.delta = reinterpret_cast<const void*>(uintptr_t{0x20008});
  CHECK_FALSE(tlb::add_layernorm_supported(a, &why));
  CHECK(why.find("delta is not 16-byte aligned") != std::string::npos);

  a = fake_args(DType::fp32, 64);
  a.resid_out = nullptr;
  CHECK_FALSE(tlb::add_layernorm_supported(a, &why));
  CHECK(why.find("resid_out is null") != std::string::npos);
  a.delta = nullptr;
  a.bias = nullptr;
  CHECK(tlb::add_layernorm_supported(a, &why));  // plain LayerNorm writes no resid

  a = fake_args(DType::fp16, 64);
  a.norm_out = a.resid_out;
  CHECK_FALSE(tlb::add_layernorm_supported(a, &why));
  CHECK(why.find("same buffer") != std::string::npos);

  a = fake_args(DType::fp16, 64);
  a.gamma = nullptr;
  CHECK_FALSE(tlb::add_layernorm_supported(a, &why));
  CHECK(why.find("gamma is null") != std::string::npos);

  // The launcher refuses what the check refuses, before touching the device.
  CHECK_THROWS_AS(tlb::add_layernorm(fake_args(DType::fp16, 12), nullptr), std::invalid_argument);
}

TEST_CASE("add_layernorm plan: a warp per row up to 1024 columns, a block beyond", "[layernorm]") {
  using tlb::detail::plan_add_layernorm;
  auto p = plan_add_layernorm(DType::fp16, 8);
  CHECK((p.threads_per_row == 32 && p.vecs_per_thread == 1));
  p = plan_add_layernorm(DType::fp16, 768);
  CHECK((p.threads_per_row == 32 && p.vecs_per_thread == 4));
  p = plan_add_layernorm(DType::fp32, 1024);
  CHECK((p.threads_per_row == 32 && p.vecs_per_thread == 8));
  p = plan_add_layernorm(DType::bf16, 1032);
  CHECK((p.threads_per_row == 64 && p.vecs_per_thread == 4));
  p = plan_add_layernorm(DType::fp16, 2048);
  CHECK((p.threads_per_row == 64 && p.vecs_per_thread == 4));
  p = plan_add_layernorm(DType::fp16, 8192);
  CHECK((p.threads_per_row == 256 && p.vecs_per_thread == 4));
  p = plan_add_layernorm(DType::fp32, tlb::kAddNormMaxCols);
  CHECK((p.threads_per_row == 512 && p.vecs_per_thread == 8));
  for (DType dt : {DType::fp16, DType::bf16, DType::fp32}) {
    for (int64_t cols = 8; cols <= tlb::kAddNormMaxCols; cols += 8) {
      p = plan_add_layernorm(dt, cols);
      const int64_t per_vec = 16 / tlb::dtype_bytes(dt);
      REQUIRE(int64_t{p.threads_per_row} * p.vecs_per_thread * per_vec >= cols);
      REQUIRE(p.vecs_per_thread * per_vec <= tlb::detail::kAddNormMaxValuesPerThread);
      REQUIRE(p.threads_per_row <= tlb::detail::kAddNormMaxThreadsPerRow);
    }
  }
}

TEST_CASE("add_layernorm bytes and rsqrt names", "[layernorm]") {
  AddNormArgs a = fake_args(DType::fp16, 2048);
  a.rows = 32768;
  const uint64_t tile = 32768ull * 2048 * 2;
  CHECK(tlb::add_layernorm_bytes(a) == 4 * tile + 3 * 2048 * 2);
  a.delta = nullptr;
  a.bias = nullptr;
  CHECK(tlb::add_layernorm_bytes(a) == 2 * tile + 2 * 2048 * 2);
  RsqrtKind k = RsqrtKind::hardware;
  CHECK(tlb::parse_rsqrt_kind("bit_trick", k));
  CHECK(k == RsqrtKind::bit_trick);
  CHECK(tlb::to_string(k) == "bit_trick");
  CHECK(tlb::parse_rsqrt_kind("hardware", k));
  CHECK(k == RsqrtKind::hardware);
  CHECK_FALSE(tlb::parse_rsqrt_kind("fast", k));
}

// ---- GPU against the fp64 host LayerNorm -----------------------------------------------------

// Host tensor: the dtype's bytes, and the same values as floats (exact).
struct HostTensor {
  DType dtype;
  std::vector<uint8_t> bytes;
  std::vector<float> values;
};

uint32_t encode(float v, DType dt) {
  switch (dt) {
    case DType::fp16: return tlb::f32_to_f16_bits(v);
    case DType::bf16: return tlb::f32_to_bf16_bits(v);
    default: return tlb::f32_bits(v);
  }
}

float decode(const uint8_t* p, DType dt) {
  if (dt == DType::fp32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return dt == DType::fp16 ? tlb::f16_bits_to_f32(h) : tlb::bf16_bits_to_f32(h);
}

HostTensor make_tensor(DType dt, const std::vector<float>& raw) {
  HostTensor t{dt, std::vector<uint8_t>(raw.size() * tlb::dtype_bytes(dt)), {}};
  t.values.resize(raw.size());
  const size_t esz = static_cast<size_t>(tlb::dtype_bytes(dt));
  for (size_t i = 0; i < raw.size(); ++i) {
    const uint32_t bits = encode(raw[i], dt);
    std::memcpy(&t.bytes[i * esz], &bits, esz);
    t.values[i] = decode(&t.bytes[i * esz], dt);
  }
  return t;
}

std::vector<float> decode_all(const std::vector<uint8_t>& bytes, DType dt) {
  const size_t esz = static_cast<size_t>(tlb::dtype_bytes(dt));
  std::vector<float> out(bytes.size() / esz);
  for (size_t i = 0; i < out.size(); ++i) out[i] = decode(&bytes[i * esz], dt);
  return out;
}

DeviceBuffer upload(const HostTensor& t) {
  DeviceBuffer d(t.bytes.size());
  TLB_CUDA_CHECK(cudaMemcpy(d.get(), t.bytes.data(), t.bytes.size(), cudaMemcpyHostToDevice));
  return d;
}

std::vector<uint8_t> download(const void* p, size_t bytes) {
  std::vector<uint8_t> h(bytes);
  TLB_CUDA_CHECK(cudaMemcpy(h.data(), p, bytes, cudaMemcpyDeviceToHost));
  return h;
}

void poison(void* p, size_t bytes) { TLB_CUDA_CHECK(cudaMemset(p, 0xFF, bytes)); }  // NaN in every dtype

struct Tolerance {
  double rel_l2;  // over the whole output
  double rtol;    // per element: about one ulp of the dtype, twice its rounding error
  double atol;
};

Tolerance tolerance(DType dt) {
  switch (dt) {
    case DType::fp16: return {1e-3, 1.0 / 1024, 1e-4};
    case DType::bf16: return {8e-3, 1.0 / 128, 1e-3};
    default: return {1e-6, 1e-5, 1e-5};
  }
}

enum class AddMode { delta_and_bias, delta_only, bias_only, none };

const char* mode_name(AddMode m) {
  switch (m) {
    case AddMode::delta_and_bias: return "delta+bias";
    case AddMode::delta_only: return "delta";
    case AddMode::bias_only: return "bias";
    default: return "none";
  }
}

// One problem's host data and its expected outputs per mode.
struct Problem {
  DType dtype;
  int64_t rows, cols;
  HostTensor x, delta, bias, gamma, beta;
};

Problem make_problem(DType dt, int64_t rows, int64_t cols, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uni(-0.5f, 0.5f);
  std::vector<float> x(static_cast<size_t>(rows * cols)), d(x.size()), b(cols), g(cols), be(cols);
  for (int64_t r = 0; r < rows; ++r) {
    // Row offsets up to 4 standard deviations: E[x^2] - E[x]^2 in fp32 would cancel digits.
    const float offset = static_cast<float>(r % 9 - 4);
    const float scale = 0.5f + static_cast<float>(r % 4) * 0.5f;
    for (int64_t c = 0; c < cols; ++c) {
      x[static_cast<size_t>(r * cols + c)] = offset + scale * normal(gen);
      d[static_cast<size_t>(r * cols + c)] = 0.7f * normal(gen);
    }
  }
  for (int64_t c = 0; c < cols; ++c) {
    b[static_cast<size_t>(c)] = uni(gen);
    g[static_cast<size_t>(c)] = 1.0f + uni(gen);
    be[static_cast<size_t>(c)] = uni(gen);
  }
  return Problem{dt, rows, cols, make_tensor(dt, x), make_tensor(dt, d), make_tensor(dt, b),
                 make_tensor(dt, g), make_tensor(dt, be)};
}

// resid as the kernel must store it: x + (delta + bias) in fp32, rounded once to the dtype.
std::vector<float> expected_resid(const Problem& p, AddMode m) {
  std::vector<float> r(p.x.values.size());
  for (int64_t row = 0; row < p.rows; ++row)
    for (int64_t c = 0; c < p.cols; ++c) {
      const size_t i = static_cast<size_t>(row * p.cols + c);
      float add = 0.0f;
      if (m == AddMode::delta_and_bias || m == AddMode::delta_only) add = p.delta.values[i];
      if (m == AddMode::delta_and_bias || m == AddMode::bias_only)
        add += p.bias.values[static_cast<size_t>(c)];
      r[i] = m == AddMode::none ? p.x.values[i]
                                : tlb::round_to_dtype(p.x.values[i] + add, p.dtype);
    }
  return r;
}

// LayerNorm of the stored resid in fp64.
std::vector<double> expected_norm(const Problem& p, const std::vector<float>& resid, double eps) {
  std::vector<double> out(resid.size());
  for (int64_t row = 0; row < p.rows; ++row) {
    const float* r = &resid[static_cast<size_t>(row * p.cols)];
    double mean = 0.0;
    for (int64_t c = 0; c < p.cols; ++c) mean += r[c];
    mean /= static_cast<double>(p.cols);
    double var = 0.0;
    for (int64_t c = 0; c < p.cols; ++c) var += (r[c] - mean) * (r[c] - mean);
    var /= static_cast<double>(p.cols);
    const double rstd = 1.0 / std::sqrt(var + eps);
    for (int64_t c = 0; c < p.cols; ++c)
      out[static_cast<size_t>(row * p.cols + c)] =
          (r[c] - mean) * rstd * p.gamma.values[static_cast<size_t>(c)] +
          p.beta.values[static_cast<size_t>(c)];
  }
  return out;
}

struct NormCheck {
  int64_t nans = 0, outside = 0;
  double rel_l2 = 0.0, max_abs = 0.0;
};

NormCheck compare_norm(const std::vector<float>& got, const std::vector<double>& want,
                       const Tolerance& tol) {
  NormCheck c;
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) {
      ++c.nans;
      continue;
    }
    const double e = std::fabs(got[i] - want[i]);
    c.max_abs = std::max(c.max_abs, e);
    if (e > tol.atol + tol.rtol * std::fabs(want[i])) ++c.outside;
    num += e * e;
    den += want[i] * want[i];
  }
  c.rel_l2 = std::sqrt(num / den);
  return c;
}

// Runs every mode and both inverse square roots on one problem, then resid aliasing x.
void check_problem(const Problem& p, cudaStream_t stream) {
  const DType dt = p.dtype;
  const size_t tile = p.x.bytes.size();
  const Tolerance tol = tolerance(dt);
  DeviceBuffer x = upload(p.x), delta = upload(p.delta), bias = upload(p.bias),
               gamma = upload(p.gamma), beta = upload(p.beta);
  DeviceBuffer resid(tile), norm(tile);

  struct Run {
    AddMode mode;
    RsqrtKind rsqrt;
    bool alias_x;
  };
  std::vector<Run> runs;
  for (AddMode m : {AddMode::delta_and_bias, AddMode::delta_only, AddMode::bias_only, AddMode::none})
    for (RsqrtKind k : {RsqrtKind::hardware, RsqrtKind::bit_trick}) runs.push_back({m, k, false});
  // Last, because it overwrites x.
  runs.push_back({AddMode::delta_and_bias, RsqrtKind::hardware, true});

  for (const Run& run : runs) {
    const bool with_delta = run.mode == AddMode::delta_and_bias || run.mode == AddMode::delta_only;
    const bool with_bias = run.mode == AddMode::delta_and_bias || run.mode == AddMode::bias_only;
    AddNormArgs a;
    a.dtype = dt;
    a.rows = p.rows;
    a.cols = p.cols;
    a.x = x.get();
    a.delta = with_delta ? delta.get() : nullptr;
    a.bias = with_bias ? bias.get() : nullptr;
    a.resid_out = run.alias_x ? x.get() : resid.get();
    a.norm_out = norm.get();
    a.gamma = gamma.get();
    a.beta = beta.get();
    a.eps = 1e-5f;
    a.rsqrt = run.rsqrt;
    poison(resid.get(), tile);
    poison(norm.get(), tile);
    TLB_CUDA_CHECK(cudaDeviceSynchronize());
    const std::string variant = tlb::add_layernorm(a, stream);
    TLB_CUDA_CHECK(cudaStreamSynchronize(stream));

    INFO(tlb::to_string(dt) << " rows " << p.rows << " cols " << p.cols << " mode "
                            << mode_name(run.mode) << " rsqrt " << tlb::to_string(run.rsqrt)
                            << (run.alias_x ? " resid_out aliasing x" : "") << " variant "
                            << variant);
    const std::vector<float> want_resid = expected_resid(p, run.mode);
    const std::vector<uint8_t> resid_bytes = download(a.resid_out, tile);
    if (run.mode == AddMode::none) {
      // Nothing to add: resid is x itself and the buffer must stay untouched.
      int64_t touched = 0;
      for (uint8_t b : resid_bytes) touched += b != 0xFF;
      CHECK(touched == 0);
    } else {
      const std::vector<float> got = decode_all(resid_bytes, dt);
      int64_t mismatched = 0;
      for (size_t i = 0; i < got.size(); ++i)
        mismatched += tlb::f32_bits(got[i]) != tlb::f32_bits(want_resid[i]);
      CHECK(mismatched == 0);
    }
    const std::vector<float> got_norm = decode_all(download(norm.get(), tile), dt);
    const NormCheck c = compare_norm(got_norm, expected_norm(p, want_resid, a.eps), tol);
    INFO("norm: rel-L2 " << c.rel_l2 << " max abs " << c.max_abs << " outside tolerance "
                         << c.outside << " non-finite " << c.nans);
    CHECK(c.nans == 0);
    CHECK(c.outside == 0);
    CHECK(c.rel_l2 <= tol.rel_l2);
  }
}

void check_dtype(DType dt) {
  cudaStream_t stream;
  TLB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  uint64_t seed = 1000 + static_cast<uint64_t>(dt) * 100;
  for (int64_t rows : {1, 7, 257})
    for (int64_t cols : {8, 64, 520, 1600, 4096, 8192}) check_problem(make_problem(dt, rows, cols, ++seed), stream);
  TLB_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST_CASE("add_layernorm fp16 matches the fp64 host LayerNorm", "[gpu][kernels][layernorm]") {
  TLB_REQUIRE_GPU();
  check_dtype(DType::fp16);
}

TEST_CASE("add_layernorm bf16 matches the fp64 host LayerNorm", "[gpu][kernels][layernorm]") {
  TLB_REQUIRE_GPU();
  check_dtype(DType::bf16);
}

TEST_CASE("add_layernorm fp32 matches the fp64 host LayerNorm", "[gpu][kernels][layernorm]") {
  TLB_REQUIRE_GPU();
  check_dtype(DType::fp32);
}

TEST_CASE("add_layernorm covers rows beyond one resident wave", "[gpu][kernels][layernorm]") {
  TLB_REQUIRE_GPU();
  // Enough rows that each block loops over several: a warp per row (64 cols) and a block per
  // row (4096 cols), both far past what one wave of resident blocks holds on any GPU.
  cudaStream_t stream;
  TLB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  check_problem(make_problem(DType::fp16, 40000, 64, 77), stream);
  check_problem(make_problem(DType::bf16, 3001, 4096, 78), stream);
  TLB_CUDA_CHECK(cudaStreamDestroy(stream));
}

}  // namespace
