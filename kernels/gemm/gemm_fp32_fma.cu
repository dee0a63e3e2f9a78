// fp32 `ieee` GEMM, out = epilogue(A · W^T) with plain fp32 FMA (no tensor cores, no TF32):
// register-blocked outer products over shared-memory tiles, double-buffered through
// registers, fused epilogue on 16-byte output runs. Any M; N and K multiples of 8.
#include <cstdint>

#include "common/cuda_check.hpp"
#include "common/dtype_traits.cuh"
#include "common/launch.cuh"
#include "common/ptx.cuh"
#include "gemm/gemm_epilogue.cuh"
#include "gemm/gemm_internal.hpp"

namespace tlb::gemm_detail {
namespace {

// 256 threads as a 16x16 grid; each thread owns TM x TN outputs in float4 groups spread
// BM/(TM/4) rows apart (so a warp's shared-memory reads are broadcasts or contiguous).
// BK = 8 because K % 8 == 0: no K tail ever.
template <int BM_, int BN_, int TM_, int TN_>
struct FmaConfig {
  static constexpr int BM = BM_, BN = BN_, TM = TM_, TN = TN_;
  static constexpr int BK = 8;
  static constexpr int kThreads = 256;
  // Transposed tiles [k][m]; +4 floats keeps rows 16-byte aligned and makes the transposing
  // stores (16 rows x 2 k-quads per warp) hit 32 different banks.
  static constexpr int kPitchA = BM + 4, kPitchW = BN + 4;
  static constexpr int kGroupsM = TM / 4, kGroupsN = TN / 4;
  static constexpr int kGroupStrideM = BM / kGroupsM, kGroupStrideN = BN / kGroupsN;
  static constexpr int kALoads = (BM * 2 + kThreads - 1) / kThreads;  // float4 per thread
  static constexpr int kWLoads = (BN * 2 + kThreads - 1) / kThreads;
  static_assert((BM / TM) * (BN / TN) == kThreads, "one output block per thread");
  static_assert(kGroupStrideM == 16 * 4 && kGroupStrideN == 16 * 4, "16x16 threads, float4 each");
};

template <class C>
__global__ void __launch_bounds__(C::kThreads) gemm_fp32_fma_kernel(const GemmArgs p) {
  ptx::pdl_wait();  // PDL: the inputs may be the previous kernel's output
  ptx::pdl_launch_dependents();
  __shared__ __align__(16) float As[2][C::BK][C::kPitchA];
  __shared__ __align__(16) float Ws[2][C::BK][C::kPitchW];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int tiles_n = static_cast<int>((p.N + C::BN - 1) / C::BN);
  const int64_t m0 = static_cast<int64_t>(blockIdx.x / tiles_n) * C::BM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x % tiles_n) * C::BN;
  const float* A = static_cast<const float*>(p.A);
  const float* W = static_cast<const float*>(p.W);
  const int64_t K = p.K;

  // Load slot c: row c / 2, k-quad (c % 2) * 4 of the tile.
  float4 a_reg[C::kALoads], w_reg[C::kWLoads];
  auto load_global = [&](int64_t k0) {
#pragma unroll
    for (int i = 0; i < C::kALoads; ++i) {
      const int c = tid + i * C::kThreads;
      const int64_t m = m0 + c / 2;
      a_reg[i] = (c < C::BM * 2 && m < p.M)
                     ? __ldg(reinterpret_cast<const float4*>(A + m * K + k0 + (c % 2) * 4))
                     : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int i = 0; i < C::kWLoads; ++i) {
      const int c = tid + i * C::kThreads;
      const int64_t n = n0 + c / 2;
      w_reg[i] = (c < C::BN * 2 && n < p.N)
                     ? __ldg(reinterpret_cast<const float4*>(W + n * K + k0 + (c % 2) * 4))
                     : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  };
  auto store_shared = [&](int buf) {
#pragma unroll
    for (int i = 0; i < C::kALoads; ++i) {
      const int c = tid + i * C::kThreads;
      if (c < C::BM * 2) {
        const int r = c / 2, k = (c % 2) * 4;
        As[buf][k][r] = a_reg[i].x;
        As[buf][k + 1][r] = a_reg[i].y;
        As[buf][k + 2][r] = a_reg[i].z;
        As[buf][k + 3][r] = a_reg[i].w;
      }
    }
#pragma unroll
    for (int i = 0; i < C::kWLoads; ++i) {
      const int c = tid + i * C::kThreads;
      if (c < C::BN * 2) {
        const int r = c / 2, k = (c % 2) * 4;
        Ws[buf][k][r] = w_reg[i].x;
        Ws[buf][k + 1][r] = w_reg[i].y;
        Ws[buf][k + 2][r] = w_reg[i].z;
        Ws[buf][k + 3][r] = w_reg[i].w;
      }
    }
  };

  float acc[C::TM][C::TN];
#pragma unroll
  for (int i = 0; i < C::TM; ++i)
#pragma unroll
    for (int j = 0; j < C::TN; ++j) acc[i][j] = 0.0f;

  const int k_tiles = static_cast<int>(K / C::BK);
  load_global(0);
  store_shared(0);
  __syncthreads();
  for (int kt = 0; kt < k_tiles; ++kt) {
    const int buf = kt & 1;
    const bool more = kt + 1 < k_tiles;
    if (more) load_global(static_cast<int64_t>(kt + 1) * C::BK);  // in flight during the FMAs
#pragma unroll
    for (int k = 0; k < C::BK; ++k) {
      float a[C::TM], w[C::TN];
#pragma unroll
      for (int g = 0; g < C::kGroupsM; ++g) {
        const float4 v = *reinterpret_cast<const float4*>(&As[buf][k][g * C::kGroupStrideM + ty * 4]);
        a[g * 4] = v.x; a[g * 4 + 1] = v.y; a[g * 4 + 2] = v.z; a[g * 4 + 3] = v.w;
      }
#pragma unroll
      for (int g = 0; g < C::kGroupsN; ++g) {
        const float4 v = *reinterpret_cast<const float4*>(&Ws[buf][k][g * C::kGroupStrideN + tx * 4]);
        w[g * 4] = v.x; w[g * 4 + 1] = v.y; w[g * 4 + 2] = v.z; w[g * 4 + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < C::TM; ++i)
#pragma unroll
        for (int j = 0; j < C::TN; ++j) acc[i][j] = fmaf(a[i], w[j], acc[i][j]);
    }
    // The other buffer was last read in iteration kt - 1, which every thread has left.
    if (more) store_shared(buf ^ 1);
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < C::TM; ++i) {
    const int64_t m = m0 + (i / 4) * C::kGroupStrideM + ty * 4 + i % 4;
    if (m >= p.M) continue;
#pragma unroll
    for (int g = 0; g < C::kGroupsN; ++g) {
      const int64_t n = n0 + g * C::kGroupStrideN + tx * 4;
      if (n >= p.N) continue;
      float v[4] = {acc[i][g * 4], acc[i][g * 4 + 1], acc[i][g * 4 + 2], acc[i][g * 4 + 3]};
      epilogue_store<float>(p, m, n, v);
    }
  }
}

template <class C>
void launch_config(const GemmArgs& a, cudaStream_t stream) {
  const int64_t tiles = ((a.M + C::BM - 1) / C::BM) * ((a.N + C::BN - 1) / C::BN);
  launch_kernel(gemm_fp32_fma_kernel<C>, dim3(static_cast<unsigned>(tiles)), dim3(C::kThreads), 0, stream, 1, a);
  TLB_LAUNCH_CHECK(stream);
}

}  // namespace

std::string fma_tile_name(FmaTile t) {
  return t == FmaTile::m128n128 ? "fma_128x128x8_fp32" : "fma_64x64x8_fp32";
}

void launch_gemm_fp32_fma(const GemmArgs& a, FmaTile t, cudaStream_t stream) {
  // 128x128 (8x8 per thread): the throughput tile, 161 / 130 registers (sm_90a / sm_80),
  // 16.5 KiB static smem, one CTA per SM. 64x64 (4x4): small GEMMs that would leave most SMs
  // idle with 128x128 tiles, 64 / 55 registers, 8.5 KiB. No spills.
  if (t == FmaTile::m128n128) {
    launch_config<FmaConfig<128, 128, 8, 8>>(a, stream);
  } else {
    launch_config<FmaConfig<64, 64, 4, 4>>(a, stream);
  }
}

}  // namespace tlb::gemm_detail
