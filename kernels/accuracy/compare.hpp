// Host entry of the output comparisons behind every accuracy check. The kernels reduce on the
// device and leave one partial per block, so a 400 MB output never crosses PCIe: the caller
// copies back at most kCompareMaxBlocks small structs and sums them in a fixed order
// (deterministic for a given n, on any GPU).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "common/types.hpp"

namespace tlb {

// Candidate vs a same-dtype reference, both [n] in `dtype`.
struct CompareBlockPartial {
  double max_abs = 0;                  // over elements where both values are finite
  double max_rel = 0;                  // |c - r| / max(|r|, atol), same elements
  unsigned long long violations = 0;   // not (|c - r| <= atol + rtol * |r|); NaN counts
  unsigned long long cand_nan = 0;
  unsigned long long cand_inf = 0;
  unsigned long long ref_nonfinite = 0;
};

// Candidate in `dtype` vs an fp32 golden: the two sums of a relative L2 error, in fp64.
struct GoldenBlockPartial {
  double err_sq = 0;     // sum (c - g)^2 (NaN when any c is NaN: a NaN output has no error norm)
  double golden_sq = 0;  // sum g^2
  unsigned long long cand_nan = 0;
  unsigned long long cand_inf = 0;
};

constexpr int kCompareMaxBlocks = 1024;
// Partials the launchers write for n elements (1..kCompareMaxBlocks; 0 for n == 0).
int compare_block_count(size_t n);

void launch_compare_to_reference(const void* cand, const void* ref, DType dtype, size_t n,
                                 double atol, double rtol, CompareBlockPartial* partials,
                                 cudaStream_t stream);
void launch_compare_to_golden(const void* cand, DType dtype, const float* golden, size_t n,
                              GoldenBlockPartial* partials, cudaStream_t stream);

}  // namespace tlb
