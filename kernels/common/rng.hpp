// The one counter-based generator: every input and weight element is a pure function of
// (seed, case, layer, tensor, index), so the CPU oracle and the GPU regenerate identical
// values without copying. Only integer ops, IEEE-exact operations (+ - * / sqrt on doubles)
// and explicit fma() are used, so host and device agree bit for bit; the transcendental
// parts of Box-Muller are our own fma polynomials for that reason.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "common/host_device.hpp"
#include "common/rounding.hpp"
#include "common/types.hpp"

namespace tlb {

// Tensors of one layer, in a fixed order (part of the data's identity: do not reorder).
enum class TensorId : uint32_t {
  input = 0,  // x, layer index 0
  ln1_gamma,
  ln1_beta,
  w_qkv,
  b_qkv,
  w_out,
  b_out,
  ln2_gamma,
  ln2_beta,
  w_ff1,
  b_ff1,
  w_ff2,
  b_ff2,
};
constexpr int kNumTensorIds = 13;

TLB_HD uint64_t mix64(uint64_t z) {  // splitmix64 finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

TLB_HD uint64_t tensor_key(uint64_t seed, uint32_t case_id, uint32_t layer, TensorId t) {
  uint64_t k = mix64(seed + 0x9e3779b97f4a7c15ull);
  k = mix64(k ^ (static_cast<uint64_t>(case_id) << 32 | 0x5bd1e995u));
  k = mix64(k ^ (static_cast<uint64_t>(layer) << 16 | static_cast<uint64_t>(t)));
  return k;
}

// A uniform double in (0, 1] from 53 random bits.
TLB_HD double unit_open0(uint64_t bits) {
  return static_cast<double>((bits >> 11) + 1) * (1.0 / 9007199254740992.0);
}
// A uniform double in [0, 1).
TLB_HD double unit_closed0(uint64_t bits) {
  return static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0);
}

// Natural log of x in (0, 1], about 1e-15 relative accuracy.
TLB_HD double det_log(double x) {
  uint64_t b;
  memcpy(&b, &x, sizeof b);
  int e = static_cast<int>((b >> 52) & 0x7ff) - 1023;
  uint64_t mb = (b & 0xfffffffffffffull) | 0x3ff0000000000000ull;
  double m;
  memcpy(&m, &mb, sizeof m);
  if (m > 1.4142135623730951) {
    m *= 0.5;  // exact
    e += 1;
  }
  const double s = (m - 1.0) / (m + 1.0);
  const double s2 = s * s;
  // log(m) = 2 atanh(s) = 2 s (1 + s^2/3 + s^4/5 + ...), |s| <= 0.172.
  double p = 1.0 / 23.0;
  p = fma(p, s2, 1.0 / 21.0);
  p = fma(p, s2, 1.0 / 19.0);
  p = fma(p, s2, 1.0 / 17.0);
  p = fma(p, s2, 1.0 / 15.0);
  p = fma(p, s2, 1.0 / 13.0);
  p = fma(p, s2, 1.0 / 11.0);
  p = fma(p, s2, 1.0 / 9.0);
  p = fma(p, s2, 1.0 / 7.0);
  p = fma(p, s2, 1.0 / 5.0);
  p = fma(p, s2, 1.0 / 3.0);
  p = fma(p, s2, 1.0);
  const double two_s = 2.0 * s;  // exact
  return fma(two_s, p, static_cast<double>(e) * 0.69314718055994530942);
}

// cos(2 pi v) for v in [0, 1).
TLB_HD double det_cos_2pi(double v) {
  const double r = v * 4.0;  // exact
  const double q = floor(r);
  const double f = r - q;    // exact, in [0, 1)
  const double t = f * 1.5707963267948966;
  const double t2 = t * t;
  // Taylor series of cos and sin on [0, pi/2): truncation error below 4e-15 (cos's next
  // term at pi/2), far under fp32's resolution; what matters is that host and device
  // evaluate the same operations.
  double c = 1.0 / 6402373705728000.0;  // 1/18!
  c = fma(c, -t2, 1.0 / 20922789888000.0);
  c = fma(c, -t2, 1.0 / 87178291200.0);
  c = fma(c, -t2, 1.0 / 479001600.0);
  c = fma(c, -t2, 1.0 / 3628800.0);
  c = fma(c, -t2, 1.0 / 40320.0);
  c = fma(c, -t2, 1.0 / 720.0);
  c = fma(c, -t2, 1.0 / 24.0);
  c = fma(c, -t2, 1.0 / 2.0);
  c = fma(c, -t2, 1.0);
  double s = 1.0 / 121645100408832000.0;  // 1/19!
  s = fma(s, -t2, 1.0 / 355687428096000.0);
  s = fma(s, -t2, 1.0 / 1307674368000.0);
  s = fma(s, -t2, 1.0 / 6227020800.0);
  s = fma(s, -t2, 1.0 / 39916800.0);
  s = fma(s, -t2, 1.0 / 362880.0);
  s = fma(s, -t2, 1.0 / 5040.0);
  s = fma(s, -t2, 1.0 / 120.0);
  s = fma(s, -t2, 1.0 / 6.0);
  s = fma(s, -t2, 1.0);
  s = s * t;
  switch (static_cast<int>(q)) {
    case 0: return c;
    case 1: return -s;
    case 2: return -c;
    default: return s;
  }
}

enum class DistKind : uint32_t { normal = 0, uniform = 1, one_plus_uniform = 2 };

// How one tensor's elements are drawn: normal(0,1), or U(-bound, bound), or 1 + U(-bound, bound).
struct TensorDist {
  uint64_t key = 0;
  DistKind kind = DistKind::normal;
  double bound = 0.0;
};

// Element `index` of a tensor, as a double (the caller rounds it to fp32, then to its dtype).
TLB_HD double sample(const TensorDist& d, uint64_t index) {
  const uint64_t h1 = mix64(d.key ^ mix64(index * 2 + 1));
  if (d.kind == DistKind::normal) {
    const uint64_t h2 = mix64(d.key ^ mix64(index * 2 + 2) ^ 0xd6e8feb86659fd93ull);
    const double radius = sqrt(-2.0 * det_log(unit_open0(h1)));
    return radius * det_cos_2pi(unit_closed0(h2));
  }
  const double u = fma(2.0 * d.bound, unit_closed0(h1), -d.bound);
  return d.kind == DistKind::uniform ? u : 1.0 + u;
}

// The stored value of an element: drawn, rounded to fp32, then to the working dtype.
TLB_HD float sample_rounded(const TensorDist& d, uint64_t index, DType dtype) {
  return round_to_dtype(static_cast<float>(sample(d, index)), dtype);
}

// The distribution of tensor `t` of `layer` in a case (docs/design.md §1): PyTorch's Linear
// init for projections, LayerNorm gamma = 1 + U(-0.1, 0.1), beta = U(-0.1, 0.1), x ~ N(0, 1).
inline TensorDist tensor_dist(uint64_t seed, uint32_t case_id, uint32_t layer, TensorId t,
                              int64_t d_model, int64_t d_ff) {
  TensorDist d;
  d.key = tensor_key(seed, case_id, layer, t);
  switch (t) {
    case TensorId::input: d.kind = DistKind::normal; break;
    case TensorId::ln1_gamma:
    case TensorId::ln2_gamma: d.kind = DistKind::one_plus_uniform; d.bound = 0.1; break;
    case TensorId::ln1_beta:
    case TensorId::ln2_beta: d.kind = DistKind::uniform; d.bound = 0.1; break;
    case TensorId::w_ff2:
    case TensorId::b_ff2:
      d.kind = DistKind::uniform;
      d.bound = 1.0 / sqrt(static_cast<double>(d_ff));
      break;
    default:
      d.kind = DistKind::uniform;
      d.bound = 1.0 / sqrt(static_cast<double>(d_model));
      break;
  }
  return d;
}

}  // namespace tlb
