// Round-to-nearest-even conversions between fp32 and fp16/bf16 bit patterns, written in
// integer arithmetic so the host produces exactly the bits that CUDA's __float2half_rn and
// __float2bfloat16_rn produce (NaN becomes the canonical 0x7fff, overflow becomes infinity).
#pragma once

#include <cstdint>
#include <cstring>

#include "common/host_device.hpp"
#include "common/types.hpp"

namespace tlb {

TLB_HD uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
TLB_HD float f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

TLB_HD uint16_t f32_to_bf16_bits(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;  // NaN
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;
  return static_cast<uint16_t>(u >> 16);
}
TLB_HD float bf16_bits_to_f32(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }

TLB_HD uint16_t f32_to_f16_bits(float f) {
  uint32_t u = f32_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7fffu;                        // NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520: rounds to inf
  if (a >= 0x38800000u) {                                      // normal half (>= 2^-14)
    uint32_t mant = a & 0x7fffffu;
    uint32_t exp = (a >> 23) - 112u;                           // rebias 127 -> 15
    uint32_t h = (exp << 10) | (mant >> 13);
    uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // carries into exponent correctly
    return static_cast<uint16_t>(sign | h);
  }
  if (a < 0x33000000u) return static_cast<uint16_t>(sign);     // < 2^-25: rounds to zero
  // Subnormal half: value = m * 2^-24 with m < 1024.
  uint32_t exp = a >> 23;
  uint32_t mant = (a & 0x7fffffu) | 0x800000u;
  uint32_t shift = 126u - exp;  // in 14..24
  uint32_t h = mant >> shift;
  uint32_t rest = mant & ((1u << shift) - 1u);
  uint32_t half = 1u << (shift - 1u);
  if (rest > half || (rest == half && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

TLB_HD float f16_bits_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1fu) return f32_from_bits(sign | 0x7f800000u | (mant << 13));
  if (exp != 0) return f32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return f32_from_bits(sign);
  // Subnormal: normalise.
  int e = -1;
  do {
    mant <<= 1;
    ++e;
  } while ((mant & 0x400u) == 0);
  return f32_from_bits(sign | ((112u - static_cast<uint32_t>(e)) << 23) | ((mant & 0x3ffu) << 13));
}

// The value a float takes once stored in `d` (fp32: unchanged).
TLB_HD float round_to_dtype(float f, DType d) {
  switch (d) {
    case DType::fp16: return f16_bits_to_f32(f32_to_f16_bits(f));
    case DType::bf16: return bf16_bits_to_f32(f32_to_bf16_bits(f));
    default: return f;
  }
}

}  // namespace tlb
