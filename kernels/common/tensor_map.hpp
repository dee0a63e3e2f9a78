// TMA tensor maps for row-major tensors read in 128-byte-swizzled boxes, encoded through the
// driver entry point that the runtime hands out (cudaGetDriverEntryPointByVersion), so nothing
// links libcuda.
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

// A [planes, rows, cols] row-major tensor (cols contiguous, rows `cols` apart, planes
// `rows * cols` apart), read one plane at a time in boxes of box_rows x box_cols: a box that
// runs past `rows` or `cols` reads zeros there instead of the next plane's data. Same swizzle
// and errors as above.
CUtensorMap make_tensor_map_3d_sw128(const void* base, DType dtype, uint64_t planes, uint64_t rows,
                                     uint64_t cols, uint32_t box_rows, uint32_t box_cols);

// A [outer, planes, rows, cols] row-major tensor (the layout of q, k and v: [batch, heads,
// seq, head_dim]), in boxes of box_rows x box_cols of one plane. Written by TMA stores, whose
// coordinates may lie outside the tensor (negative ones too): only the box's part inside is
// written, which lets one store cover the rows of a tile that fall in one (outer, plane).
CUtensorMap make_tensor_map_4d_sw128(const void* base, DType dtype, uint64_t outer, uint64_t planes, uint64_t rows,
                                     uint64_t cols, uint32_t box_rows, uint32_t box_cols);

}  // namespace tlb
