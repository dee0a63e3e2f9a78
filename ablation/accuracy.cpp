#include "accuracy.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "accuracy/compare.hpp"
#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"

namespace tlb {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}

bool strict_pass(const StrictStats& s) {
  return s.violations == 0 && s.nan == 0 && s.inf == 0;
}

const GoldenTolerance& golden_tolerance(DType dtype, Fp32Math math) {
  for (const GoldenTolerance& t : kGoldenTolerances)
    if (t.dtype == dtype && (dtype != DType::fp32 || t.math == math)) return t;
  return kGoldenTolerances[0];  // unreachable: every dtype is in the table
}

GoldenVerdict golden_verdict(const GoldenError& cand, std::optional<double> reference_rel_l2,
                             DType dtype, Fp32Math math) {
  GoldenVerdict v;
  const GoldenTolerance& t = golden_tolerance(dtype, math);
  if (reference_rel_l2 && std::isfinite(*reference_rel_l2)) {
    const double scaled = kGoldenRatio * *reference_rel_l2;
    if (scaled >= t.allowance) {
      v.threshold = scaled;
      v.rule = fmt::format("{} x reference {:.3e}", kGoldenRatio, *reference_rel_l2);
    } else {
      v.threshold = t.allowance;
      v.rule = fmt::format("allowance {:.1e} ({} x reference {:.3e} is below it)", t.allowance,
                           kGoldenRatio, *reference_rel_l2);
    }
  } else {
    v.threshold = t.floor;
    v.rule = fmt::format("{} floor {:.1e} (no reference error)", to_string(dtype), t.floor);
  }
  // Comparisons written so that a NaN error fails.
  v.pass = cand.nan == 0 && cand.inf == 0 && cand.rel_l2 <= v.threshold;
  return v;
}

StrictStats compare_to_reference(const void* cand, const void* ref, DType dtype, size_t n,
                                 const Tolerance& tol, cudaStream_t stream) {
  StrictStats s;
  s.elements = n;
  const int blocks = compare_block_count(n);
  if (blocks == 0) return s;
  DeviceBuffer partials(sizeof(CompareBlockPartial) * static_cast<size_t>(blocks));
  launch_compare_to_reference(cand, ref, dtype, n, tol.atol, tol.rtol,
                              partials.as<CompareBlockPartial>(), stream);
  std::vector<CompareBlockPartial> host(static_cast<size_t>(blocks));
  TLB_CUDA_CHECK(cudaMemcpyAsync(host.data(), partials.get(), partials.bytes(),
                                 cudaMemcpyDeviceToHost, stream));
  TLB_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (const CompareBlockPartial& p : host) {
    s.max_abs = std::max(s.max_abs, p.max_abs);
    s.max_rel = std::max(s.max_rel, p.max_rel);
    s.violations += p.violations;
    s.nan += p.cand_nan;
    s.inf += p.cand_inf;
    s.ref_nonfinite += p.ref_nonfinite;
  }
  return s;
}

GoldenError compare_to_golden(const void* cand, DType dtype, const float* golden, size_t n,
                              cudaStream_t stream) {
  GoldenError e;
  const int blocks = compare_block_count(n);
  if (blocks == 0) return e;
  DeviceBuffer partials(sizeof(GoldenBlockPartial) * static_cast<size_t>(blocks));
  launch_compare_to_golden(cand, dtype, golden, n, partials.as<GoldenBlockPartial>(), stream);
  std::vector<GoldenBlockPartial> host(static_cast<size_t>(blocks));
  TLB_CUDA_CHECK(cudaMemcpyAsync(host.data(), partials.get(), partials.bytes(),
                                 cudaMemcpyDeviceToHost, stream));
  TLB_CUDA_CHECK(cudaStreamSynchronize(stream));
  double err = 0, ref = 0;
  for (const GoldenBlockPartial& p : host) {  // fixed order: the result is reproducible
    err += p.err_sq;
    ref += p.golden_sq;
    e.nan += p.cand_nan;
    e.inf += p.cand_inf;
  }
  e.rel_l2 = e.nan > 0 ? kNaN : (ref > 0 ? std::sqrt(err / ref) : (err > 0 ? INFINITY : 0.0));
  return e;
}

double rel_l2(const std::vector<float>& out, const std::vector<float>& golden) {
  if (out.size() != golden.size()) return kNaN;
  double err = 0, ref = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const double d = static_cast<double>(out[i]) - static_cast<double>(golden[i]);
    err += d * d;
    ref += static_cast<double>(golden[i]) * golden[i];
  }
  if (std::isnan(err)) return kNaN;
  return ref > 0 ? std::sqrt(err / ref) : (err > 0 ? INFINITY : 0.0);
}

std::vector<double> layer_rel_l2(const std::vector<std::vector<float>>& outs,
                                 const std::vector<std::vector<float>>& golden) {
  std::vector<double> r;
  const size_t n = std::max(outs.size(), golden.size());
  for (size_t l = 0; l < n; ++l)
    r.push_back(l < outs.size() && l < golden.size() ? rel_l2(outs[l], golden[l]) : kNaN);
  return r;
}

}  // namespace tlb
