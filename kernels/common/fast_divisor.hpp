// Division by a divisor fixed for a whole launch: n / d as a multiply-high, an add and a
// shift, with a magic number worked out once on the host (Granlund and Montgomery's round-up
// method: shift = ceil(log2 d), magic = floor(2^32 (2^shift - d) / d) + 1, n / d =
// (umulhi(n, magic) + n) >> shift). A 32-bit division by a value known only at run time is
// about twenty instructions on the GPU, and a GEMM epilogue that maps each output index to a
// head-split layout does several per tile. Exact for n and d under 2^31, where the add cannot
// overflow; the tests check it against `/`.
#pragma once

#include <cstdint>
#include <stdexcept>

#include "common/host_device.hpp"

namespace tlb {

struct FastDivisor {
  uint32_t divisor = 1, magic = 1, shift = 0;

  FastDivisor() = default;
  explicit FastDivisor(uint32_t d) : divisor(d) {
    if (d == 0 || d >= (1u << 31)) throw std::invalid_argument("FastDivisor: the divisor must be in [1, 2^31)");
    while ((uint64_t{1} << shift) < d) ++shift;
    magic = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  }

  // n / divisor, for n < 2^31.
  TLB_HD uint32_t div(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t hi = __umulhi(n, magic);
#else
    const auto hi = static_cast<uint32_t>((static_cast<uint64_t>(n) * magic) >> 32);
#endif
    return (hi + n) >> shift;
  }
};

}  // namespace tlb
