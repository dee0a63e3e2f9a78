// fp32 -> fp16/bf16 round-to-nearest-even bit conversions: hand-derived bit patterns, an
// independent slow reference (nearest of the two neighbouring representables, ties to the even
// one) over random and boundary floats, and the fp16 -> fp32 round trip over every pattern.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "common/rounding.hpp"

namespace {

using tlb::f32_bits;
using tlb::f32_from_bits;

// Exact value of a finite, non-negative half pattern (0x7c00 stands for 2^16, the value the
// pattern after 0x7bff would have with an unbounded exponent: rounding there means overflow).
double half_value(uint32_t bits) {
  const uint32_t e = bits >> 10, m = bits & 0x3ffu;
  if (e == 0) return std::ldexp(static_cast<double>(m), -24);
  return std::ldexp(static_cast<double>(m | 0x400u), static_cast<int>(e) - 25);
}

const std::vector<double>& half_ladder() {
  static const std::vector<double> ladder = [] {
    std::vector<double> v;
    for (uint32_t b = 0; b <= 0x7c00u; ++b) v.push_back(half_value(b));
    return v;
  }();
  return ladder;
}

// The nearest half to f: find the neighbours below and above |f| on the ladder of all half
// values, compare against their midpoint (exact in double), break ties towards the even pattern.
uint16_t slow_f16(float f) {
  if (std::isnan(f)) return 0x7fff;
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(f));
  const std::vector<double>& ladder = half_ladder();
  if (a >= ladder.back()) return sign | 0x7c00;  // >= 2^16 (and inf)
  const auto above = std::upper_bound(ladder.begin(), ladder.end(), a);
  const uint32_t lo = static_cast<uint32_t>(above - ladder.begin()) - 1;
  if (ladder[lo] == a) return static_cast<uint16_t>(sign | lo);
  const double mid = (ladder[lo] + ladder[lo + 1]) * 0.5;
  uint32_t pick = a < mid ? lo : a > mid ? lo + 1 : ((lo & 1u) ? lo + 1 : lo);
  return static_cast<uint16_t>(sign | pick);
}

// The nearest bf16 to f: the neighbours are the float with its low 16 bits cleared and the
// next bf16 pattern up (0x7f80 standing for 2^128).
uint16_t slow_bf16(float f) {
  if (std::isnan(f)) return 0x7fff;
  const uint32_t u = f32_bits(f);
  const uint32_t sign = u & 0x80000000u, mag = u & 0x7fffffffu;
  if (mag == 0x7f800000u) return static_cast<uint16_t>((sign | mag) >> 16);
  const uint32_t lo = mag >> 16, hi = lo + 1;
  auto value = [](uint32_t b) {
    return b == 0x7f80u ? std::ldexp(1.0, 128) : static_cast<double>(f32_from_bits(b << 16));
  };
  const double a = static_cast<double>(f32_from_bits(mag));
  const double mid = (value(lo) + value(hi)) * 0.5;
  uint32_t pick = a < mid ? lo : a > mid ? hi : ((lo & 1u) ? hi : lo);
  return static_cast<uint16_t>((sign >> 16) | pick);
}

float fbits(uint32_t u) { return f32_from_bits(u); }

// Floats on and around every exponent boundary and every rounding position of both formats.
std::vector<float> boundary_floats() {
  std::vector<float> out;
  const uint32_t mants[] = {0u,       1u,       2u,        0x0fffu,   0x1000u,  0x1001u,
                            0x1fffu,  0x2000u,  0x3000u,   0x7fffu,   0x8000u,  0x8001u,
                            0x18000u, 0x400000u, 0x7fe000u, 0x7ff000u, 0x7fefffu, 0x7ff001u,
                            0x7fffffu, 0x7f8000u, 0x17fffu, 0x5000u};
  for (uint32_t e = 0; e <= 255; ++e)
    for (uint32_t m : mants)
      for (uint32_t s : {0u, 0x80000000u}) {
        const uint32_t u = s | (e << 23) | m;
        out.push_back(fbits(u));
        out.push_back(fbits(u + 1));
        out.push_back(fbits(u - 1));
      }
  // Every subnormal-half rounding position: k * 2^-25 (midpoints and representables) +-1 ulp.
  for (uint32_t k = 0; k <= 2 * 1024 + 2; ++k) {
    const float v = static_cast<float>(std::ldexp(static_cast<double>(k), -25));
    out.push_back(v);
    out.push_back(std::nextafter(v, 1.0f));
    out.push_back(std::nextafter(v, 0.0f));
  }
  return out;
}

}  // namespace

TEST_CASE("f32_to_f16_bits gives the hand-derived round-to-nearest-even patterns", "[rounding]") {
  struct Case {
    float in;
    uint16_t bits;
  };
  const float two_m24 = std::ldexp(1.0f, -24), two_m25 = std::ldexp(1.0f, -25);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const Case cases[] = {
      {1.0f, 0x3c00},
      {-2.5f, 0xc100},
      {65504.0f, 0x7bff},                       // largest finite half
      {65519.99f, 0x7bff},                      // the float 65519.98828125, below the midpoint
      {65520.0f, 0x7c00},                       // midpoint 65504/65536, odd below: overflows
      {-65520.0f, 0xfc00},
      {65536.0f, 0x7c00},
      {std::numeric_limits<float>::max(), 0x7c00},
      {std::ldexp(1.0f, -14), 0x0400},          // smallest normal half
      {two_m24, 0x0001},                        // smallest subnormal half
      {two_m25, 0x0000},                        // tie between 0 and 2^-24: to zero (even)
      {-two_m25, 0x8000},
      {std::nextafter(two_m25, 1.0f), 0x0001},  // just past the tie
      {3.0f * std::ldexp(1.0f, -26), 0x0001},   // 0.75 * 2^-24
      {1.5f * two_m24, 0x0002},                 // tie 1/2: to 2
      {2.5f * two_m24, 0x0002},                 // tie 2/3: to 2
      {1023.0f * two_m24, 0x03ff},              // largest subnormal half
      {1023.5f * two_m24, 0x0400},              // tie 0x3ff/0x400 carries into the exponent
      {1.0f + std::ldexp(1.0f, -11), 0x3c00},   // tie, even below: down
      {1.0f + 3.0f * std::ldexp(1.0f, -11), 0x3c02},  // tie, odd below: up
      {std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f), 0x3c01},
      {2049.0f, 0x6800},                        // tie 2048/2050: to 2048
      {2051.0f, 0x6802},                        // tie 2050/2052: to 2052
      {2.0f - std::ldexp(1.0f, -11), 0x4000},   // tie just below 2 carries into the exponent
      {0.5f + std::ldexp(1.0f, -12), 0x3800},
      {32768.0f, 0x7800},
      {0.1f, 0x2e66},
      {1.0f / 3.0f, 0x3555},
      {3.14159265f, 0x4248},
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {1e-8f, 0x0000},
      {-1e-8f, 0x8000},
      {fbits(0x00000001u), 0x0000},             // smallest float subnormal
      {inf, 0x7c00},
      {-inf, 0xfc00},
      {nan, 0x7fff},
      {fbits(0xffc00000u), 0x7fff},             // negative NaN: canonical, sign dropped
      {fbits(0x7f800001u), 0x7fff},             // signalling NaN
  };
  for (const Case& c : cases) {
    INFO("input bits 0x" << std::hex << f32_bits(c.in));
    CHECK(tlb::f32_to_f16_bits(c.in) == c.bits);
    CHECK(slow_f16(c.in) == c.bits);  // the reference agrees with the hand derivation too
  }
}

TEST_CASE("f32_to_bf16_bits gives the hand-derived round-to-nearest-even patterns", "[rounding]") {
  struct Case {
    uint32_t in;
    uint16_t bits;
  };
  const Case cases[] = {
      {0x3f800000u, 0x3f80},  // 1.0
      {0xc0200000u, 0xc020},  // -2.5
      {0x40490fdbu, 0x4049},  // pi: low half 0x0fdb rounds down
      {0x3dcccccdu, 0x3dcd},  // 0.1f: low half 0xcccd rounds up
      {0x7f7f0000u, 0x7f7f},  // largest finite bf16
      {0x7f7f7fffu, 0x7f7f},  // just below the midpoint to infinity
      {0x7f7f8000u, 0x7f80},  // midpoint, odd below: overflows to infinity
      {0x7f7fffffu, 0x7f80},  // FLT_MAX
      {0x7f7e8000u, 0x7f7e},  // midpoint, even below: down
      {0x3f808000u, 0x3f80},  // 1 + 2^-8: tie, even below
      {0x3f818000u, 0x3f82},  // 1 + 3*2^-8: tie, odd below
      {0x3f808001u, 0x3f81},  // just past the tie
      {0x3fffffffu, 0x4000},  // carry into the exponent
      {0x477fe000u, 0x4780},  // 65504 -> 65536
      {0x7f800000u, 0x7f80},  // inf
      {0xff800000u, 0xff80},  // -inf
      {0x7fc00000u, 0x7fff},  // NaN
      {0xffc00000u, 0x7fff},  // negative NaN
      {0x7f800001u, 0x7fff},  // signalling NaN whose payload would truncate to inf
      {0x7fffffffu, 0x7fff},
      {0x80000000u, 0x8000},  // -0
      {0x00000000u, 0x0000},
      {0x00000001u, 0x0000},  // float subnormals keep their bf16 subnormal value
      {0x00008000u, 0x0000},  // tie, even below
      {0x00018000u, 0x0002},  // tie, odd below
      {0x00008001u, 0x0001},
      {0x80018000u, 0x8002},
      {0x007fffffu, 0x0080},  // largest float subnormal rounds to the smallest normal
  };
  for (const Case& c : cases) {
    INFO("input bits 0x" << std::hex << c.in);
    CHECK(tlb::f32_to_bf16_bits(fbits(c.in)) == c.bits);
    CHECK(slow_bf16(fbits(c.in)) == c.bits);
  }
}

TEST_CASE("f16 and bf16 rounding agree with a slow nearest-representable reference",
          "[rounding]") {
  std::vector<float> inputs = boundary_floats();
  std::mt19937_64 rng(20240611);
  // Uniform over all bit patterns (every exponent, NaNs included) ...
  for (int i = 0; i < 500000; ++i) inputs.push_back(fbits(static_cast<uint32_t>(rng())));
  // ... and concentrated on the exponents where fp16 has representables.
  std::uniform_int_distribution<uint32_t> exp_in_half(100, 145);
  for (int i = 0; i < 500000; ++i) {
    const uint32_t r = static_cast<uint32_t>(rng());
    inputs.push_back(fbits((r & 0x807fffffu) | (exp_in_half(rng) << 23)));
  }
  int64_t f16_bad = 0, bf16_bad = 0;
  for (float f : inputs) {
    if (tlb::f32_to_f16_bits(f) != slow_f16(f) && f16_bad++ < 5)
      FAIL_CHECK("f16 of 0x" << std::hex << f32_bits(f) << ": got 0x" << tlb::f32_to_f16_bits(f)
                             << ", nearest is 0x" << slow_f16(f));
    if (tlb::f32_to_bf16_bits(f) != slow_bf16(f) && bf16_bad++ < 5)
      FAIL_CHECK("bf16 of 0x" << std::hex << f32_bits(f) << ": got 0x"
                              << tlb::f32_to_bf16_bits(f) << ", nearest is 0x" << slow_bf16(f));
  }
  CHECK(inputs.size() > 1000000);
  CHECK(f16_bad == 0);
  CHECK(bf16_bad == 0);
}

TEST_CASE("every fp16 pattern survives f16 -> f32 -> f16 and decodes to its exact value",
          "[rounding]") {
  int64_t bad = 0;
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    const float f = tlb::f16_bits_to_f32(static_cast<uint16_t>(h));
    const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    bool ok;
    if (e == 0x1f && m != 0) {
      ok = std::isnan(f);
    } else {
      double expect = e == 0x1f ? std::numeric_limits<double>::infinity() : half_value(h & 0x7fffu);
      if (h & 0x8000u) expect = -expect;
      ok = static_cast<double>(f) == expect && std::signbit(f) == ((h & 0x8000u) != 0) &&
           tlb::f32_to_f16_bits(f) == h;
    }
    if (!ok && bad++ < 5) FAIL_CHECK("pattern 0x" << std::hex << h << " decodes to " << f);
  }
  CHECK(bad == 0);
}

TEST_CASE("round_to_dtype keeps fp32 and lands on fp16/bf16 representables", "[rounding]") {
  CHECK(tlb::round_to_dtype(0.1f, tlb::DType::fp32) == 0.1f);
  CHECK(tlb::round_to_dtype(0.1f, tlb::DType::fp16) == 0.0999755859375f);
  CHECK(tlb::round_to_dtype(0.1f, tlb::DType::bf16) == 0.10009765625f);
  CHECK(tlb::round_to_dtype(65520.0f, tlb::DType::fp16) == std::numeric_limits<float>::infinity());
  CHECK(tlb::round_to_dtype(65520.0f, tlb::DType::bf16) == 65536.0f);
  CHECK(std::isnan(tlb::round_to_dtype(std::nanf(""), tlb::DType::bf16)));
}
