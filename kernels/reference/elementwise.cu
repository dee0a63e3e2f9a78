// Reference elementwise kernels: bias add, residual add, activation, and bias + head split.
// Nothing is fused on purpose (this is the baseline every technique is measured against);
// each kernel takes any shape, with a 16-byte vector path when shape and pointers allow. The
// bias kernels read the GEMMs' fp32 products, so a Linear rounds once, as PyTorch's does.
#include "reference/elementwise.hpp"

#include "common/cuda_check.hpp"
#include "common/dtype_traits.cuh"
#include "reference/reference_device.cuh"

namespace tlb::reference {
namespace {

// Row-wise kernels use a 2D block: x runs along a row's vectors, y over rows, so short rows
// (d_model 64) still fill a block and long rows (d_ff 16384) are strided by x.
struct RowLaunch {
  dim3 grid, block;
};
RowLaunch row_launch(int64_t rows, int64_t cvec) {
  const int tx = row_threads(cvec, 256);
  const int ty = 256 / tx;
  return {dim3(grid_for(rows, ty)), dim3(tx, ty)};
}

// `in` is a GEMM's fp32 product: the bias is added in fp32 and the sum rounded once, as a
// Linear with its bias fused in the GEMM does. No __restrict__: out aliases in for fp32.
template <typename T, int V>
__global__ void bias_add_kernel(T* out, const float* in, const T* __restrict__ bias, int64_t rows,
                                int64_t cvec) {
  using VT = Vec<T, V>;
  using VF = Vec<float, V>;
  const VT* b = reinterpret_cast<const VT*>(bias);
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y; r < rows;
       r += static_cast<int64_t>(gridDim.x) * blockDim.y) {
    const VF* src = reinterpret_cast<const VF*>(in) + r * cvec;
    VT* dst = reinterpret_cast<VT*>(out) + r * cvec;
    for (int64_t c = threadIdx.x; c < cvec; c += blockDim.x) {
      const VF a = src[c];
      const VT bb = b[c];
      VT z;
#pragma unroll
      for (int i = 0; i < V; ++i) z.v[i] = from_float<T>(a.v[i] + to_float(bb.v[i]));
      dst[c] = z;
    }
  }
}

// No __restrict__: out may alias a or b (each element is read before it is written).
template <typename T, int V>
__global__ void residual_add_kernel(T* out, const T* a, const T* b, int64_t nvec) {
  using VT = Vec<T, V>;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < nvec;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const VT x = reinterpret_cast<const VT*>(a)[i];
    const VT y = reinterpret_cast<const VT*>(b)[i];
    VT z;
#pragma unroll
    for (int j = 0; j < V; ++j) z.v[j] = from_float<T>(to_float(x.v[j]) + to_float(y.v[j]));
    reinterpret_cast<VT*>(out)[i] = z;
  }
}

template <typename T, int V>
__global__ void activation_kernel(T* x, Activation act, int64_t nvec) {
  using VT = Vec<T, V>;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < nvec;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    VT z = reinterpret_cast<VT*>(x)[i];
#pragma unroll
    for (int j = 0; j < V; ++j) z.v[j] = from_float<T>(activate(act, to_float(z.v[j])));
    reinterpret_cast<VT*>(x)[i] = z;
  }
}

// One row per token: reads the packed row coalesced, writes each head's slice contiguously.
// A vector never straddles a head because V divides head_dim on the vector path.
template <typename T, int V>
__global__ void bias_split_heads_kernel(const float* __restrict__ packed,
                                        const T* __restrict__ bias, T* __restrict__ q,
                                        T* __restrict__ k, T* __restrict__ v, int64_t tokens,
                                        int64_t seq, int heads, int head_dim) {
  using VT = Vec<T, V>;
  using VF = Vec<float, V>;
  const int d = heads * head_dim;
  const int cvec = 3 * d / V;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y; r < tokens;
       r += static_cast<int64_t>(gridDim.x) * blockDim.y) {
    const int64_t b = r / seq, i = r - b * seq;
    const VF* src = reinterpret_cast<const VF*>(packed + r * 3 * d);
    for (int c = threadIdx.x; c < cvec; c += blockDim.x) {
      const int col = c * V;
      const int which = col / d;
      const int rem = col - which * d;
      const int h = rem / head_dim;
      const int e = rem - h * head_dim;
      const VF in = src[c];
      const VT bb = reinterpret_cast<const VT*>(bias)[c];
      VT val;
#pragma unroll
      for (int j = 0; j < V; ++j) val.v[j] = from_float<T>(in.v[j] + to_float(bb.v[j]));
      T* dst = which == 0 ? q : (which == 1 ? k : v);
      *reinterpret_cast<VT*>(dst + ((b * heads + h) * seq + i) * head_dim + e) = val;
    }
  }
}

constexpr int kFlatThreads = 256;

// The fp32 side of a vector is V floats: 16 bytes for fp32, 32 for fp16/bf16.
bool aligned_f32_vec(const float* p, int v) {
  return (reinterpret_cast<uintptr_t>(p) % (sizeof(float) * static_cast<size_t>(v))) == 0;
}

}  // namespace

void bias_add(DType dtype, void* out, const float* in, const void* bias, int64_t rows,
              int64_t cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int W = kVecWidth<T>;
    if (cols % W == 0 && aligned16(out) && aligned_f32_vec(in, W) && aligned16(bias)) {
      const RowLaunch l = row_launch(rows, cols / W);
      bias_add_kernel<T, W><<<l.grid, l.block, 0, stream>>>(
          static_cast<T*>(out), in, static_cast<const T*>(bias), rows, cols / W);
    } else {
      const RowLaunch l = row_launch(rows, cols);
      bias_add_kernel<T, 1><<<l.grid, l.block, 0, stream>>>(
          static_cast<T*>(out), in, static_cast<const T*>(bias), rows, cols);
    }
    TLB_LAUNCH_CHECK(stream);
  });
}

void residual_add(DType dtype, void* out, const void* a, const void* b, int64_t n,
                  cudaStream_t stream) {
  if (n <= 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int W = kVecWidth<T>;
    if (n % W == 0 && aligned16(out) && aligned16(a) && aligned16(b)) {
      residual_add_kernel<T, W><<<grid_for(n / W, kFlatThreads), kFlatThreads, 0, stream>>>(
          static_cast<T*>(out), static_cast<const T*>(a), static_cast<const T*>(b), n / W);
    } else {
      residual_add_kernel<T, 1><<<grid_for(n, kFlatThreads), kFlatThreads, 0, stream>>>(
          static_cast<T*>(out), static_cast<const T*>(a), static_cast<const T*>(b), n);
    }
    TLB_LAUNCH_CHECK(stream);
  });
}

void activation_inplace(DType dtype, Activation act, void* x, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int W = kVecWidth<T>;
    if (n % W == 0 && aligned16(x)) {
      activation_kernel<T, W><<<grid_for(n / W, kFlatThreads), kFlatThreads, 0, stream>>>(
          static_cast<T*>(x), act, n / W);
    } else {
      activation_kernel<T, 1><<<grid_for(n, kFlatThreads), kFlatThreads, 0, stream>>>(
          static_cast<T*>(x), act, n);
    }
    TLB_LAUNCH_CHECK(stream);
  });
}

void bias_split_heads(DType dtype, const float* packed, const void* bias, void* q, void* k,
                      void* v, int64_t batch, int64_t seq, int64_t heads, int64_t head_dim,
                      cudaStream_t stream) {
  const int64_t tokens = batch * seq;
  if (tokens <= 0 || heads <= 0 || head_dim <= 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int W = kVecWidth<T>;
    const int h = static_cast<int>(heads), dh = static_cast<int>(head_dim);
    const bool vec = head_dim % W == 0 && aligned_f32_vec(packed, W) && aligned16(bias) &&
                     aligned16(q) && aligned16(k) && aligned16(v);
    if (vec) {
      const RowLaunch l = row_launch(tokens, 3 * heads * head_dim / W);
      bias_split_heads_kernel<T, W><<<l.grid, l.block, 0, stream>>>(
          packed, static_cast<const T*>(bias), static_cast<T*>(q),
          static_cast<T*>(k), static_cast<T*>(v), tokens, seq, h, dh);
    } else {
      const RowLaunch l = row_launch(tokens, 3 * heads * head_dim);
      bias_split_heads_kernel<T, 1><<<l.grid, l.block, 0, stream>>>(
          packed, static_cast<const T*>(bias), static_cast<T*>(q),
          static_cast<T*>(k), static_cast<T*>(v), tokens, seq, h, dh);
    }
    TLB_LAUNCH_CHECK(stream);
  });
}

}  // namespace tlb::reference
