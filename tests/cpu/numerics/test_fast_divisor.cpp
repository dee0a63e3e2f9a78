// FastDivisor (common/fast_divisor.hpp), the GEMM epilogue's division by a launch-fixed divisor,
// against `/` over the whole range it promises (n and d under 2^31): every small
// divisor, powers of two and their neighbours, divisors near 2^31, and for each the numerators
// at and around its multiples and the ends of the range.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include "common/fast_divisor.hpp"

using tlb::FastDivisor;

namespace {

// Numerators where a division is most likely wrong: 0, each side of several multiples of d
// (the first ones and the last under 2^31), and 2^31 - 1.
std::vector<uint32_t> edge_numerators(uint32_t d) {
  constexpr uint64_t kEnd = uint64_t{1} << 31;
  std::vector<uint64_t> n = {0, 1, kEnd - 1, kEnd - 2};
  const uint64_t last = (kEnd - 1) / d;
  for (uint64_t k : {uint64_t{1}, uint64_t{2}, uint64_t{3}, last / 2, last - 1, last}) {
    for (int delta = -1; delta <= 1; ++delta) n.push_back(k * d + static_cast<uint64_t>(static_cast<int64_t>(delta)));
  }
  std::vector<uint32_t> out;
  for (uint64_t v : n)
    if (v < kEnd) out.push_back(static_cast<uint32_t>(v));
  return out;
}

void check_divisor(uint32_t d, std::mt19937& rng) {
  const FastDivisor f(d);
  std::uniform_int_distribution<uint32_t> any(0, (1u << 31) - 1);
  std::vector<uint32_t> n = edge_numerators(d);
  for (int i = 0; i < 64; ++i) n.push_back(any(rng));
  for (uint32_t v : n) {
    if (f.div(v) != v / d) FAIL("FastDivisor(" << d << ").div(" << v << ") = " << f.div(v) << ", not " << v / d);
  }
}

}  // namespace

TEST_CASE("FastDivisor divides exactly for every divisor and numerator under 2^31", "[numerics][fast_divisor]") {
  std::mt19937 rng(20261206);
  for (uint32_t d = 1; d <= 4096; ++d) check_divisor(d, rng);
  for (int b = 1; b < 31; ++b) {
    const uint32_t p = 1u << b;
    for (uint32_t d : {p - 1, p, p + 1}) check_divisor(d, rng);
  }
  for (uint32_t d : {(1u << 31) - 1, (1u << 31) - 2, (1u << 30) + 3, 100000u, 1600u * 3, 4097u * 8})
    check_divisor(d, rng);
  std::uniform_int_distribution<uint32_t> any_divisor(1, (1u << 31) - 1);
  for (int i = 0; i < 2000; ++i) check_divisor(any_divisor(rng), rng);
  // Exhaustively over a divisor of an odd head split (d_model 1600 in heads of 64 is 25 heads;
  // case sizes such as seq 4097).
  for (uint32_t d : {25u * 64, 4097u}) {
    const FastDivisor f(d);
    uint32_t wrong = 0;
    for (uint32_t v = 0; v < (1u << 22); ++v) wrong += f.div(v) != v / d;
    CHECK(wrong == 0);
  }
}

TEST_CASE("FastDivisor refuses a divisor it cannot serve", "[numerics][fast_divisor]") {
  CHECK_THROWS_AS(FastDivisor(0), std::invalid_argument);
  CHECK_THROWS_AS(FastDivisor(1u << 31), std::invalid_argument);
  CHECK_NOTHROW(FastDivisor((1u << 31) - 1));
}
