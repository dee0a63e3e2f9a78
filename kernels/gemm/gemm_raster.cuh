// The order in which every GEMM kernel walks its output tiles: groups of kRasterRows
// tile-rows, each walked column by column, so that the W tiles a group streams stay in L2
// while its A rows are reused. Linear tile i of a launch (its CTA index, or for the
// persistent kernels the i-th tile of the schedule) maps to one (tile row, tile column).
#pragma once

namespace tlb::gemm_detail {

constexpr int kRasterRows = 8;

struct TileCoord {
  int m, n;  // tile row and tile column
};

// `group_rows` tile-rows a group where the launch says (the persistent kernel's variants).
__device__ __forceinline__ TileCoord raster_tile(int linear, int tiles_m, int tiles_n, int group_rows = kRasterRows) {
  const int per_group = group_rows * tiles_n;
  const int group = linear / per_group, in_group = linear % per_group;
  const int first_m = group * group_rows;
  const int rows = min(tiles_m - first_m, group_rows);
  return {first_m + in_group % rows, in_group / rows};
}

}  // namespace tlb::gemm_detail
