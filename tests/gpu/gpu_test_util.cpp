#include "gpu_test_util.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "common/cuda_check.hpp"
#include "common/rounding.hpp"
#include "oracle/layer_oracle.hpp"

namespace tlb::test {

TestStream::TestStream() { TLB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
TestStream::~TestStream() {
  if (stream_) cudaStreamDestroy(stream_);
}

CaseSpec small_case(int id, int64_t batch, int64_t seq, int64_t d_model, int64_t heads,
                    int64_t d_ff, int64_t layers, MaskKind mask, Activation activation,
                    std::vector<int> valid_lens, uint64_t seed) {
  CaseSpec c;
  c.id = id;
  c.name = "test-" + std::to_string(id);
  c.seed = seed;
  c.shape.batch = batch;
  c.shape.seq = seq;
  c.shape.d_model = d_model;
  c.shape.heads = heads;
  c.shape.d_ff = d_ff;
  c.shape.layers = layers;
  c.shape.mask = mask;
  c.shape.activation = activation;
  c.shape.valid_lens = std::move(valid_lens);
  if (mask == MaskKind::padding && static_cast<int64_t>(c.shape.valid_lens.size()) != batch)
    throw std::invalid_argument("small_case: padding needs one valid length per batch element");
  return c;
}

StageSwitch stages_from_bits(const std::string& bits) {
  if (bits.size() < static_cast<size_t>(kNumStages))
    throw std::invalid_argument("stage bits need " + std::to_string(kNumStages) + " characters");
  StageSwitch s;
  for (int i = 0; i < kNumStages; ++i) s.on[i] = bits[static_cast<size_t>(i)] == '1';
  return s;
}

PathOptions options_from_bits(const std::string& bits, const std::string& policy,
                              Fp32Math fp32_math) {
  PathOptions o;
  o.stages = stages_from_bits(bits);
  o.policy = policy;
  o.fp32_math = fp32_math;
  return o;
}

PathResult run_path(const CaseData& data, const PathOptions& opt, cudaStream_t stream) {
  StackPath path(data, opt, stream);
  path.poison();
  path.run();
  TLB_CUDA_CHECK(cudaStreamSynchronize(stream));
  PathResult r;
  r.output = path.output_host();
  r.dispatch = path.dispatch();
  if (opt.keep_layer_outputs) r.layers = path.layer_outputs_host();
  return r;
}

namespace {
template <typename W>
ErrorStats compare_impl(const std::vector<float>& got, const std::vector<W>& want, bool finite_only) {
  if (got.size() != want.size())
    throw std::invalid_argument("compare: " + std::to_string(got.size()) + " values against " +
                                std::to_string(want.size()));
  ErrorStats e;
  e.count = got.size();
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = static_cast<double>(want[i]);
    if (std::isnan(g)) ++e.nan;
    if (std::isinf(g)) ++e.inf;
    if (finite_only && !std::isfinite(g)) continue;
    const double diff = g - w;
    num += diff * diff;
    den += w * w;
    const double a = std::fabs(diff);
    if (a > e.max_abs) {  // NaN never compares greater: NaNs are counted, not ranked
      e.max_abs = a;
      e.worst = i;
    }
  }
  e.rel_l2 = den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
  if (e.nan > 0 && !finite_only) e.rel_l2 = std::nan("");
  return e;
}
}  // namespace

ErrorStats compare(const std::vector<float>& got, const std::vector<double>& want) {
  return compare_impl(got, want, false);
}
ErrorStats compare(const std::vector<float>& got, const std::vector<float>& want) {
  return compare_impl(got, want, false);
}
ErrorStats compare_finite(const std::vector<float>& got, const std::vector<double>& want) {
  return compare_impl(got, want, true);
}
ErrorStats compare_finite(const std::vector<float>& got, const std::vector<float>& want) {
  return compare_impl(got, want, true);
}

void encode_value(float v, DType dt, uint8_t* dst) {
  if (dt == DType::fp32) {
    std::memcpy(dst, &v, 4);
  } else {
    const uint16_t b = dt == DType::fp16 ? f32_to_f16_bits(v) : f32_to_bf16_bits(v);
    std::memcpy(dst, &b, 2);
  }
}

float decode_value(const uint8_t* src, DType dt) {
  if (dt == DType::fp32) {
    float v;
    std::memcpy(&v, src, 4);
    return v;
  }
  uint16_t b;
  std::memcpy(&b, src, 2);
  return dt == DType::fp16 ? f16_bits_to_f32(b) : bf16_bits_to_f32(b);
}

DeviceBuffer upload_values(const std::vector<float>& values, DType dt) {
  const size_t esz = static_cast<size_t>(dtype_bytes(dt));
  std::vector<uint8_t> bytes(values.size() * esz);
  for (size_t i = 0; i < values.size(); ++i) encode_value(values[i], dt, &bytes[i * esz]);
  DeviceBuffer dev(bytes.size());
  TLB_CUDA_CHECK(cudaMemcpy(dev.get(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  return dev;
}

void poison(void* ptr, size_t bytes) { TLB_CUDA_CHECK(cudaMemset(ptr, 0xff, bytes)); }

GuardedOutput::GuardedOutput(size_t n, DType dt)
    : n_(n), dt_(dt), esz_(static_cast<size_t>(dtype_bytes(dt))), buf_(2 * kGuardBytes + n * esz_) {}

void GuardedOutput::poison() {
  TLB_CUDA_CHECK(cudaMemset(buf_.get(), kSentinel, buf_.bytes()));
  test::poison(ptr(), n_ * esz_);
}

std::vector<float> GuardedOutput::read(bool* guards_intact) const {
  std::vector<uint8_t> bytes(buf_.bytes());
  TLB_CUDA_CHECK(cudaMemcpy(bytes.data(), buf_.get(), bytes.size(), cudaMemcpyDeviceToHost));
  *guards_intact = true;
  for (size_t i = 0; i < kGuardBytes; ++i) {
    if (bytes[i] != kSentinel || bytes[bytes.size() - 1 - i] != kSentinel) *guards_intact = false;
  }
  std::vector<float> out(n_);
  for (size_t i = 0; i < n_; ++i) out[i] = decode_value(&bytes[kGuardBytes + i * esz_], dt_);
  return out;
}

std::string describe(const ErrorStats& e) {
  std::ostringstream o;
  o << "rel_l2=" << e.rel_l2 << " max_abs=" << e.max_abs << " (at " << e.worst << ") nan=" << e.nan
    << " inf=" << e.inf << " n=" << e.count;
  return o.str();
}

bool bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Against the fp64 oracle, which sees the same rounded inputs but keeps every intermediate in
// double. A path in dtype D rounds each stored intermediate (LN output, q/k/v, scores and
// probabilities, attention output, projections, residual stream, FFN hidden) once to D, about
// a dozen roundings per layer, each a relative error of at most u (u = 2^-11 fp16, 2^-8 bf16,
// 2^-24 fp32) and about u/sqrt(3) rms; the errors are independent, so per layer they grow like
// sqrt(12)·u/sqrt(3) = 2u rms, and over the 1-3 layers of the tests like sqrt(layers).
//   fp16: 2u = 1e-3 per layer -> 5e-3 leaves 2-3x headroom over three layers.
//   bf16: 2u = 7.8e-3 per layer -> 3e-2.
//   fp32: the roundings are ~1e-7; fp32 accumulation over K <= 6400 terms adds ~sqrt(K)·u
//         = 5e-6 in the worst dot product and far less in the norm: 1e-5.
double oracle_tolerance(DType dtype) {
  switch (dtype) {
    case DType::fp16: return 5e-3;
    case DType::bf16: return 3e-2;
    default: return 1e-5;
  }
}

// TF32 rounds GEMM operands to 10 mantissa bits (u = 2^-11, like fp16) but stores every
// intermediate in fp32, so it sits below the fp16 bound.
double tf32_tolerance() { return 5e-3; }

std::vector<double> oracle_output(const CaseSpec& c, DType dtype,
                                  std::vector<std::vector<double>>* per_layer) {
  return oracle::stack_forward(c, dtype, per_layer);
}

std::string label(const CaseSpec& c, DType dtype) {
  const LayerShape& s = c.shape;
  std::ostringstream o;
  o << c.name << " " << to_string(dtype) << " b" << s.batch << " s" << s.seq << " d" << s.d_model
    << " h" << s.heads << " f" << s.d_ff << " L" << s.layers << " " << to_string(s.mask) << " "
    << to_string(s.activation);
  return o.str();
}

void check_timed_row(const PointRow& p) {
  CHECK(p.status.ran());
  CHECK(p.baseline == "00000");
  REQUIRE(p.speedup.has_value());
  CHECK(*p.speedup > 0);
  CHECK(*p.speedup_ci_low <= *p.speedup);
  CHECK(*p.speedup_ci_high >= *p.speedup);
  CHECK(*p.reps >= 3);  // --quick: at least 3 pairs
  CHECK(*p.ref_ms > 0);
  CHECK(*p.cand_ms > 0);
}

}  // namespace tlb::test
