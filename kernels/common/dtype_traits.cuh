// The one dtype-traits header for device code: the storage type of each DType, conversions
// to and from float (round to nearest even, matching common/rounding.hpp on the host), a
// 16-byte packed vector so vectorised loads and stores are the easy path, and a run-time
// DType -> storage-type dispatcher for launchers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/types.hpp"

namespace tlb {

template <DType D>
struct DTypeStorage;
template <>
struct DTypeStorage<DType::fp16> { using type = __half; };
template <>
struct DTypeStorage<DType::bf16> { using type = __nv_bfloat16; };
template <>
struct DTypeStorage<DType::fp32> { using type = float; };
template <DType D>
using storage_t = typename DTypeStorage<D>::type;

// Storage type -> DType.
template <typename T>
struct TypeDType;
template <>
struct TypeDType<__half> { static constexpr DType value = DType::fp16; };
template <>
struct TypeDType<__nv_bfloat16> { static constexpr DType value = DType::bf16; };
template <>
struct TypeDType<float> { static constexpr DType value = DType::fp32; };
template <typename T>
inline constexpr DType dtype_of = TypeDType<T>::value;

__host__ __device__ __forceinline__ float to_float(float x) { return x; }
__host__ __device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__host__ __device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__host__ __device__ __forceinline__ T from_float(float x) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(x);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(x);
  } else {
    return x;
  }
}

// Two floats rounded to a 16-bit type and packed into one 32-bit word, low half first (the
// element order of memory and of mma fragments).
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  static_assert(sizeof(T) == 2, "pack2 packs 16-bit types");
  if constexpr (std::is_same_v<T, __half>) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  } else {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
}

// The inverse: a 32-bit word of two 16-bit values, low half first, widened to floats.
template <typename T>
__device__ __forceinline__ void unpack2(uint32_t word, float (&lo_hi)[2]) {
  static_assert(sizeof(T) == 2, "unpack2 unpacks 16-bit types");
  T pair[2];
  memcpy(pair, &word, sizeof pair);
  lo_hi[0] = to_float(pair[0]);
  lo_hi[1] = to_float(pair[1]);
}

// 16 bytes of T: 8 halves or 4 floats. Loads and stores through it compile to one 128-bit
// access; the pointer must be 16-byte aligned.
template <typename T>
struct alignas(16) Pack16 {
  static constexpr int kCount = 16 / static_cast<int>(sizeof(T));
  T v[kCount];

  __device__ __forceinline__ static Pack16 load(const T* p) {
    Pack16 r;
    *reinterpret_cast<uint4*>(&r) = *reinterpret_cast<const uint4*>(p);
    return r;
  }
  // Read-only path (ld.global.nc): for inputs nobody writes during the kernel.
  __device__ __forceinline__ static Pack16 load_nc(const T* p) {
    Pack16 r;
    *reinterpret_cast<uint4*>(&r) = __ldg(reinterpret_cast<const uint4*>(p));
    return r;
  }
  // A run loaded ahead as raw bits (a uint4 holds any dtype's run in four registers), and
  // the loads that give them.
  __device__ __forceinline__ static Pack16 from_bits(uint4 bits) {
    Pack16 r;
    *reinterpret_cast<uint4*>(&r) = bits;
    return r;
  }
  __device__ __forceinline__ static uint4 load_bits_nc(const T* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }
  __device__ __forceinline__ void store(T* p) const {
    *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(this);
  }
  __device__ __forceinline__ void to_floats(float (&f)[kCount]) const {
#pragma unroll
    for (int i = 0; i < kCount; ++i) f[i] = to_float(v[i]);
  }
  __device__ __forceinline__ static Pack16 from_floats(const float (&f)[kCount]) {
    Pack16 r;
#pragma unroll
    for (int i = 0; i < kCount; ++i) r.v[i] = from_float<T>(f[i]);
    return r;
  }
};

// Calls f(T{}) with T the storage type of `d`; launchers write
//   dispatch_dtype(d, [&](auto tag) { using T = decltype(tag); launch<T>(...); });
template <typename F>
__host__ __forceinline__ decltype(auto) dispatch_dtype(DType d, F&& f) {
  switch (d) {
    case DType::fp16: return f(__half{});
    case DType::bf16: return f(__nv_bfloat16{});
    default: return f(float{});
  }
}

}  // namespace tlb
