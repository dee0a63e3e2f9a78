// TLB_HD marks functions compiled for both the host and the device.
#pragma once
#if defined(__CUDACC__)
#define TLB_HD __host__ __device__ __forceinline__
#else
#define TLB_HD inline
#endif
