// Fused residual add + bias + LayerNorm: one pass over memory per row, resid = x + delta + bias
// and norm = LN(resid) written together. The row stays in registers (a warp per row up to 1024
// columns, a block of up to 512 threads beyond), so mean and variance are two exact passes over
// registers at one pass of memory traffic. Rows of any count; cols a multiple of 8.
#include <cuda_runtime.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "common/cuda_check.hpp"
#include "common/device_caps.hpp"
#include "common/dtype_traits.cuh"
#include "common/launch.cuh"
#include "common/ptx.cuh"
#include "layernorm/add_layernorm_plan.hpp"
#include "layernorm/rsqrt.hpp"

namespace tlb::detail {
namespace {

struct AddNormParams {
  int64_t rows;
  int cols;
  float eps;
  const void* x;
  const void* delta;
  const void* bias;
  void* resid_out;
  void* norm_out;
  const void* gamma;
  const void* beta;
};

template <int kThreadsPerRow>
constexpr int block_threads() {
  return kThreadsPerRow == 32 ? 32 * kAddNormWarpRowsPerBlock : kThreadsPerRow;
}

// Sum over the row's team, returned to every thread of it. A warp needs shuffles only; a block
// adds one barrier and reads the per-warp partials in a fixed order, so every thread gets the
// same bits. `partials` must not be reused before the next barrier (callers alternate arrays).
template <int kThreadsPerRow>
__device__ __forceinline__ float row_sum(float v, float* partials) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  if constexpr (kThreadsPerRow > 32) {
    constexpr int kWarps = kThreadsPerRow / 32;
    if (threadIdx.x % 32 == 0) partials[threadIdx.x / 32] = v;
    __syncthreads();
    v = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) v += partials[w];
  }
  return v;
}

template <RsqrtKind kRsqrt, typename T>
__device__ __forceinline__ float inverse_sqrt(float x) {
  if constexpr (kRsqrt == RsqrtKind::hardware) {
    return rsqrtf(x);
  } else {
    return rsqrt_bit_trick(x, bit_trick_newton_steps(dtype_of<T>));
  }
}

// Thread t of a row team owns the 16-byte vectors t, t + kThreadsPerRow, ...: consecutive
// threads touch consecutive 16 bytes, so each warp-wide access is fully coalesced. All loads of
// a row are issued before any arithmetic so a thread has the whole row in flight at once.
// resid_out may alias x (and either output delta): every element is read before it is
// written, by the thread that writes it.
template <typename T, int kThreadsPerRow, int kVecsPerThread, RsqrtKind kRsqrt>
__global__ void __launch_bounds__(block_threads<kThreadsPerRow>())
    add_layernorm_kernel(AddNormParams p) {
  using Vec = Pack16<T>;
  constexpr int kE = Vec::kCount;
  constexpr int kRowsPerBlock = kThreadsPerRow == 32 ? kAddNormWarpRowsPerBlock : 1;
  constexpr int kPartials = kThreadsPerRow > 32 ? kThreadsPerRow / 32 : 1;
  __shared__ float sum_partials[kPartials];
  __shared__ float square_partials[kPartials];

  const int t = static_cast<int>(threadIdx.x) % kThreadsPerRow;
  const int team = static_cast<int>(threadIdx.x) / kThreadsPerRow;
  const bool has_delta = p.delta != nullptr;
  const bool has_bias = p.bias != nullptr;
  const bool write_resid = has_delta || has_bias;

  bool valid[kVecsPerThread];
#pragma unroll
  for (int j = 0; j < kVecsPerThread; ++j) valid[j] = (j * kThreadsPerRow + t) * kE < p.cols;

  // A thread reads the same columns of gamma, beta and the bias in every row. They are weights,
  // which no kernel of the forward writes, so their lines come into L1 now, while the previous
  // kernel finishes (PDL); otherwise gamma and beta are L2 reads after the row's statistics,
  // on the critical path of a kernel over few rows. Holding them in registers instead would
  // spill the wide plans. Only the plans of up to two vectors prefetch: in the official sweep
  // of d3c2059, which prefetched up to four, the four-vector warp plans (rows of 768 and 1024
  // in fp16/bf16, over thousands of rows) ran the forwards with norm 3-11 % slower, while
  // case 1's two-vector plan gained; the fp32 eight-vector plans also lose 10-30 registers of
  // occupancy to the addresses.
  if constexpr (kVecsPerThread <= 2) {
#pragma unroll
    for (int j = 0; j < kVecsPerThread; ++j) {
      if (!valid[j]) continue;
      const int c = (j * kThreadsPerRow + t) * kE;
      ptx::prefetch_l1(static_cast<const T*>(p.gamma) + c);
      ptx::prefetch_l1(static_cast<const T*>(p.beta) + c);
      if (has_bias) ptx::prefetch_l1(static_cast<const T*>(p.bias) + c);
    }
  }
  ptx::pdl_wait();  // PDL: x and delta may be the previous kernel's output
  ptx::pdl_launch_dependents();

  // With one row per block the loop bound is block-uniform, so the barriers in row_sum are
  // reached by every thread.
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + team; row < p.rows;
       row += static_cast<int64_t>(gridDim.x) * kRowsPerBlock) {
    const int64_t base = row * p.cols;
    const T* x = static_cast<const T*>(p.x) + base;
    const T* delta = has_delta ? static_cast<const T*>(p.delta) + base : nullptr;

    // The row is held in the dtype (half the registers of floats for 16-bit types): after
    // the add it is exactly the rounded resid that is stored, and the statistics read it.
    Vec row_vec[kVecsPerThread], delta_vec[kVecsPerThread];
#pragma unroll
    for (int j = 0; j < kVecsPerThread; ++j) {
      const int c = (j * kThreadsPerRow + t) * kE;
      if (valid[j]) {
        row_vec[j] = Vec::load(x + c);
        if (has_delta) delta_vec[j] = Vec::load(delta + c);
      }
    }

    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kVecsPerThread; ++j) {
      if (!valid[j]) continue;
      const int c = (j * kThreadsPerRow + t) * kE;
      float r[kE];
      row_vec[j].to_floats(r);
      if (write_resid) {
        float add[kE];
        if (has_delta) {
          delta_vec[j].to_floats(add);
        } else {
#pragma unroll
          for (int i = 0; i < kE; ++i) add[i] = 0.0f;
        }
        if (has_bias) {
          // Every row reads the same bias: an L1 hit (prefetched above), not worth registers.
          float b[kE];
          Vec::load_nc(static_cast<const T*>(p.bias) + c).to_floats(b);
#pragma unroll
          for (int i = 0; i < kE; ++i) add[i] += b[i];
        }
#pragma unroll
        for (int i = 0; i < kE; ++i) r[i] += add[i];
        // Round once to the dtype; the statistics see exactly the values stored.
        row_vec[j] = Vec::from_floats(r);
        row_vec[j].store(static_cast<T*>(p.resid_out) + base + c);
        row_vec[j].to_floats(r);
      }
#pragma unroll
      for (int i = 0; i < kE; ++i) sum += r[i];
    }
    const float mean = row_sum<kThreadsPerRow>(sum, sum_partials) / static_cast<float>(p.cols);

    float squares = 0.0f;
#pragma unroll
    for (int j = 0; j < kVecsPerThread; ++j) {
      if (!valid[j]) continue;
      float r[kE];
      row_vec[j].to_floats(r);
#pragma unroll
      for (int i = 0; i < kE; ++i) {
        const float d = r[i] - mean;
        squares = fmaf(d, d, squares);
      }
    }
    const float var = row_sum<kThreadsPerRow>(squares, square_partials) / static_cast<float>(p.cols);
    const float rstd = inverse_sqrt<kRsqrt, T>(var + p.eps);

#pragma unroll
    for (int j = 0; j < kVecsPerThread; ++j) {
      if (!valid[j]) continue;
      const int c = (j * kThreadsPerRow + t) * kE;
      float r[kE], g[kE], b[kE], out[kE];
      row_vec[j].to_floats(r);
      Vec::load_nc(static_cast<const T*>(p.gamma) + c).to_floats(g);
      Vec::load_nc(static_cast<const T*>(p.beta) + c).to_floats(b);
#pragma unroll
      for (int i = 0; i < kE; ++i) out[i] = fmaf((r[i] - mean) * rstd, g[i], b[i]);
      Vec::from_floats(out).store(static_cast<T*>(p.norm_out) + base + c);
    }
  }
}

// Enough blocks to fill every SM at the kernel's occupancy, each looping over rows: the grid
// stays small for huge row counts, and a tiny row count gets one block per row team.
template <typename T, int kThreadsPerRow, int kVecsPerThread, RsqrtKind kRsqrt>
void launch(const AddNormParams& p, cudaStream_t stream) {
  constexpr int kThreads = block_threads<kThreadsPerRow>();
  constexpr int kRowsPerBlock = kThreadsPerRow == 32 ? kAddNormWarpRowsPerBlock : 1;
  auto* kernel = &add_layernorm_kernel<T, kThreadsPerRow, kVecsPerThread, kRsqrt>;
  static std::atomic<int> blocks_per_sm{0};
  if (blocks_per_sm.load(std::memory_order_relaxed) == 0) {
    int n = 0;
    TLB_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kThreads, 0));
    blocks_per_sm.store(n > 0 ? n : 1, std::memory_order_relaxed);
  }
  const int sms = device_caps().sms;
  const int64_t needed = (p.rows + kRowsPerBlock - 1) / kRowsPerBlock;
  const int64_t resident = static_cast<int64_t>(sms) * blocks_per_sm.load(std::memory_order_relaxed);
  const unsigned grid = static_cast<unsigned>(needed < resident ? needed : resident);
  launch_kernel(kernel, dim3(grid), dim3(kThreads), 0, stream, 1, p);
  TLB_LAUNCH_CHECK(stream);
}

template <typename T, RsqrtKind kRsqrt>
void launch_for_plan(const AddNormParams& p, const AddNormPlan& plan, cudaStream_t stream) {
  // 16-bit dtypes hold at most 4 vectors (32 values) per thread, fp32 at most 8.
  constexpr bool kWide = sizeof(T) == 4;
  constexpr int kMaxVecs = kWide ? 8 : 4;
  if (plan.threads_per_row == 32) {
    switch (plan.vecs_per_thread) {
      case 1: return launch<T, 32, 1, kRsqrt>(p, stream);
      case 2: return launch<T, 32, 2, kRsqrt>(p, stream);
      case 4: return launch<T, 32, 4, kRsqrt>(p, stream);
      default:
        if constexpr (kWide) return launch<T, 32, 8, kRsqrt>(p, stream);
        break;
    }
  } else if (plan.vecs_per_thread == kMaxVecs) {
    switch (plan.threads_per_row) {
      case 64: return launch<T, 64, kMaxVecs, kRsqrt>(p, stream);
      case 128: return launch<T, 128, kMaxVecs, kRsqrt>(p, stream);
      case 256: return launch<T, 256, kMaxVecs, kRsqrt>(p, stream);
      case 512: return launch<T, 512, kMaxVecs, kRsqrt>(p, stream);
      default: break;
    }
  }
  throw std::logic_error("add_layernorm: no kernel for threads_per_row " +
                         std::to_string(plan.threads_per_row) + ", vecs_per_thread " +
                         std::to_string(plan.vecs_per_thread));
}

}  // namespace

void launch_add_layernorm(const AddNormArgs& a, const AddNormPlan& plan, cudaStream_t stream) {
  AddNormParams p;
  p.rows = a.rows;
  p.cols = static_cast<int>(a.cols);
  p.eps = a.eps;
  p.x = a.x;
  p.delta = a.delta;
  p.bias = a.bias;
  p.resid_out = a.resid_out;
  p.norm_out = a.norm_out;
  p.gamma = a.gamma;
  p.beta = a.beta;
  dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (a.rsqrt == RsqrtKind::bit_trick) {
      launch_for_plan<T, RsqrtKind::bit_trick>(p, plan, stream);
    } else {
      launch_for_plan<T, RsqrtKind::hardware>(p, plan, stream);
    }
  });
}

}  // namespace tlb::detail
