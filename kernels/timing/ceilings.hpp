// What this GPU reaches at most, measured where the stages are measured (tlbench explain):
// the matrix rate of one large cuBLAS GEMM in a dtype and math (the rate its tensor-core
// stages can aim for; plain FMA in fp32 IEEE) and the bandwidth of a device-to-device copy
// (bytes read plus bytes written per second).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/types.hpp"
#include "stack/stage_costs.hpp"

namespace tlb {

struct MeasuredCeilings {
  Ceilings ceilings;
  int64_t gemm_n = 0;       // the square GEMM's side
  double gemm_ms = 0;       // its median time
  std::string gemm_math;    // "fp16", "bf16", "fp32-tf32" or "fp32-ieee"
  uint64_t copy_bytes = 0;  // one copy's size
  double copy_ms = 0;       // its median time
};

// The rate and bandwidth for `dtype` in `math` (fp32 only), each the median of timed runs
// after about half a second of the same work (clocks and power settle). Throws DeviceError.
MeasuredCeilings measure_ceilings(DType dtype, Fp32Math math, cudaStream_t stream);

// The math name a ceiling is cached under: the dtype, fp32 with its math.
std::string ceiling_math(DType dtype, Fp32Math math);

}  // namespace tlb
