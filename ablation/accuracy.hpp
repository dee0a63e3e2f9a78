// Accuracy of one measured point (docs/design.md §3). Two criteria:
//  - strict: every element of the candidate within atol + rtol·|r| of the same-dtype
//    reference output (the classic allclose), and no NaN/Inf;
//  - golden: relative L2 error against the fp32 IEEE golden no worse than 1.25x the
//    reference's own error, with the per-dtype numbers of kGoldenTolerances where that ratio
//    cannot be taken. NaN or Inf never passes either.
// The comparisons reduce on the device (kernels/accuracy/compare.cu); the rules are host
// functions of plain numbers so they are tested without a GPU.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/types.hpp"

namespace tlb {

struct Tolerance {
  double atol = 0.002;
  double rtol = 0.02;
};

struct StrictStats {
  uint64_t elements = 0;
  double max_abs = 0;            // over elements where both are finite
  double max_rel = 0;            // |c - r| / max(|r|, atol): tiny references do not dominate
  uint64_t violations = 0;       // elements outside atol + rtol·|r| (NaN included)
  uint64_t nan = 0;              // in the candidate
  uint64_t inf = 0;              // in the candidate
  uint64_t ref_nonfinite = 0;    // in the reference (a broken baseline, reported, never hidden)
};
bool strict_pass(const StrictStats& s);

struct GoldenError {
  double rel_l2 = 0;  // ||c - g|| / ||g||; NaN when the candidate has a NaN
  uint64_t nan = 0;
  uint64_t inf = 0;
};

// Golden criterion numbers per dtype and math mode, in one place.
//  floor:     the threshold where the reference cannot run (its dense scores do not fit), so
//             there is no reference error to compare with.
//  allowance: the threshold never goes below this. fp32 IEEE: reference and candidate errors
//             are both accumulation-order noise (~1e-7), and 1.25x of noise is noise. fp32
//             TF32: the candidate rounds GEMM inputs to a 10-bit mantissa on purpose, so it is
//             held to what TF32 can give, not to the IEEE reference.
struct GoldenTolerance {
  DType dtype;
  Fp32Math math;  // meaningful for fp32 only
  double floor;
  double allowance;
};
inline constexpr GoldenTolerance kGoldenTolerances[] = {
    {DType::fp16, Fp32Math::ieee, 5e-3, 0.0},
    {DType::bf16, Fp32Math::ieee, 4e-2, 0.0},
    {DType::fp32, Fp32Math::ieee, 1e-4, 1e-6},
    {DType::fp32, Fp32Math::tf32, 5e-3, 5e-3},
};
constexpr double kGoldenRatio = 1.25;
const GoldenTolerance& golden_tolerance(DType dtype, Fp32Math math);

struct GoldenVerdict {
  bool pass = false;
  double threshold = 0;
  std::string rule;  // how the threshold was set, e.g. "1.25 x reference 1.1e-03"
};
// `reference_rel_l2`: the same-dtype reference's error, absent where it cannot run.
// `math`: the candidate's fp32 math mode as it actually ran (ieee when no tensor-core stage
// ran); ignored for fp16/bf16.
GoldenVerdict golden_verdict(const GoldenError& cand, std::optional<double> reference_rel_l2,
                             DType dtype, Fp32Math math);

// Device comparisons of `n` elements (output buffers of StackPath); synchronise `stream`.
StrictStats compare_to_reference(const void* cand, const void* ref, DType dtype, size_t n,
                                 const Tolerance& tol, cudaStream_t stream);
GoldenError compare_to_golden(const void* cand, DType dtype, const float* golden, size_t n,
                              cudaStream_t stream);

// Host relative L2 error (per-layer traces: StackPath::layer_outputs_host).
double rel_l2(const std::vector<float>& out, const std::vector<float>& golden);
// One rel-L2 per layer; NaN for a layer whose sizes disagree.
std::vector<double> layer_rel_l2(const std::vector<std::vector<float>>& outs,
                                 const std::vector<std::vector<float>>& golden);

}  // namespace tlb
