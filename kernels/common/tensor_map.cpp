// TMA tensor-map encoding without linking the driver library: the one driver function we
// need is looked up once through the runtime.
#include "common/tensor_map.hpp"

#include <cuda_runtime.h>

#include <mutex>
#include <string>

#include "common/cuda_check.hpp"

namespace tlb {
namespace {

using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                   const cuuint64_t*, const cuuint32_t*, const cuuint32_t*,
                                   CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                   CUtensorMapFloatOOBfill);

EncodeTiledFn encode_tiled_fn() {
  static EncodeTiledFn fn = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult status{};
    // ABI of cuTensorMapEncodeTiled as introduced in CUDA 12.0 (unchanged since).
    TLB_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &status));
    if (status == cudaDriverEntryPointSuccess) fn = reinterpret_cast<EncodeTiledFn>(p);
  });
  if (!fn) throw DeviceError("cuTensorMapEncodeTiled is not available from the driver", false);
  return fn;
}

// dims and box innermost first; strides[i] is the byte stride of dimension i + 1.
CUtensorMap encode_sw128(const void* base, DType dtype, cuuint32_t rank, const cuuint64_t* dims,
                         const cuuint64_t* strides, const cuuint32_t* box) {
  const CUtensorMapDataType type = dtype == DType::fp16   ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                   : dtype == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                          : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  CUtensorMap map{};
  const CUresult r = encode_tiled_fn()(&map, type, rank, const_cast<void*>(base), dims, strides, box,
                                       element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                       CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::string shape;
    for (cuuint32_t i = rank; i-- > 0;) shape += std::to_string(dims[i]) + (i > 0 ? " x " : "");
    throw DeviceError("cuTensorMapEncodeTiled failed (CUresult " + std::to_string(static_cast<int>(r)) +
                          ") for a " + shape + " tensor",
                      false);
  }
  return map;
}

}  // namespace

CUtensorMap make_tensor_map_2d_sw128(const void* base, DType dtype, uint64_t rows, uint64_t cols,
                                     uint32_t box_rows, uint32_t box_cols) {
  const cuuint64_t dims[2] = {cols, rows};
  const cuuint64_t strides[1] = {cols * static_cast<uint64_t>(dtype_bytes(dtype))};
  const cuuint32_t box[2] = {box_cols, box_rows};
  return encode_sw128(base, dtype, 2, dims, strides, box);
}

CUtensorMap make_tensor_map_3d_sw128(const void* base, DType dtype, uint64_t planes, uint64_t rows,
                                     uint64_t cols, uint32_t box_rows, uint32_t box_cols) {
  const uint64_t row_bytes = cols * static_cast<uint64_t>(dtype_bytes(dtype));
  const cuuint64_t dims[3] = {cols, rows, planes};
  const cuuint64_t strides[2] = {row_bytes, row_bytes * rows};
  const cuuint32_t box[3] = {box_cols, box_rows, 1};
  return encode_sw128(base, dtype, 3, dims, strides, box);
}

CUtensorMap make_tensor_map_4d_sw128(const void* base, DType dtype, uint64_t outer, uint64_t planes, uint64_t rows,
                                     uint64_t cols, uint32_t box_rows, uint32_t box_cols) {
  const uint64_t row_bytes = cols * static_cast<uint64_t>(dtype_bytes(dtype));
  const cuuint64_t dims[4] = {cols, rows, planes, outer};
  const cuuint64_t strides[3] = {row_bytes, row_bytes * rows, row_bytes * rows * planes};
  const cuuint32_t box[4] = {box_cols, box_rows, 1, 1};
  return encode_sw128(base, dtype, 4, dims, strides, box);
}

}  // namespace tlb
