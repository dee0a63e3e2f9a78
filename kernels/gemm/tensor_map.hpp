// TMA tensor maps for 2-D row-major tensors, encoded through the driver entry point that
// the runtime hands out (cudaGetDriverEntryPointByVersion), so nothing links libcuda.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "common/types.hpp"

namespace tlb {

// A [rows, cols] row-major tensor of `dtype` (cols contiguous, rows `cols` apart), read in
// boxes of box_rows x box_cols elements with 128-byte shared-memory swizzling (box_cols *
// element size must be 128 bytes or less). Out-of-range parts of a box read as zero.
// Throws DeviceError when the driver rejects the map.
CUtensorMap make_tensor_map_2d_sw128(const void* base, DType dtype, uint64_t rows, uint64_t cols,
                                     uint32_t box_rows, uint32_t box_cols);

}  // namespace tlb
