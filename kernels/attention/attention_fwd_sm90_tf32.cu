// The warp-specialised sm_90a attention kernel (attention_fwd_sm90.cuh) in tf32: fp32 Q, K and
// V read by tf32 wgmma at head widths 32, 64, 96 and 128, each head on the width at or above it
// (sm90_tf32_width), the missing columns TMA's zero fill. wgmma takes the B operand of P V K-major only in
// tf32, so V is first transposed into the workspace (V^T, keys in tf32_v_position's order, which
// lets P's accumulators feed the MMA as they stand): one pass over V, a small fraction of the
// attention's time at any length. V is rounded to tf32 there; Q and K reach the tensor cores
// as fp32, which they truncate to tf32 (another pass to round them would cost what V's does).
#include "attention/attention_fwd_sm90.cuh"

namespace tlb::attn {
namespace {

constexpr int kTransposeTile = 32;  // keys and head dims per block: a warp's row of each
constexpr int kTransposeRows = 8;   // threads along y; each moves 4 rows of the tile

// v [bh][seq][head_dim] -> vt [bh][head_dim][tf32_v_keys(seq)], rounded to tf32 (to nearest, as
// the tensor cores would otherwise truncate), zeros for keys past seq. Blocks along z take every
// gridDim.z-th head (z stops at 65535).
__global__ void __launch_bounds__(kTransposeTile * kTransposeRows)
    transpose_v_tf32(const float* __restrict__ v, float* __restrict__ vt, int64_t bh_count, int64_t seq,
                     int64_t keys, int head_dim) {
  __shared__ float tile[kTransposeTile][kTransposeTile + 1];  // +1: the column reads hit 32 banks
  ptx::pdl_wait();  // PDL: V may be the previous kernel's output
  ptx::pdl_launch_dependents();
  const int64_t k0 = static_cast<int64_t>(blockIdx.x) * kTransposeTile;
  const int d0 = static_cast<int>(blockIdx.y) * kTransposeTile;
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  // This thread's key on the way out, and where V^T keeps it.
  const int64_t k_out = k0 + tx;
  const int64_t pos = (k_out & ~int64_t{7}) + tf32_v_position(static_cast<int>(k_out & 7));
  for (int64_t bh = blockIdx.z; bh < bh_count; bh += gridDim.z) {
    const float* src = v + bh * seq * head_dim;
#pragma unroll
    for (int r = ty; r < kTransposeTile; r += kTransposeRows) {
      const int64_t k = k0 + r;
      const int d = d0 + tx;
      tile[r][tx] = k < seq && d < head_dim ? src[k * head_dim + d] : 0.0f;
    }
    __syncthreads();
    float* dst = vt + bh * head_dim * keys;
#pragma unroll
    for (int r = ty; r < kTransposeTile; r += kTransposeRows) {
      const int d = d0 + r;
      if (d < head_dim && k_out < keys)
        dst[static_cast<int64_t>(d) * keys + pos] = __uint_as_float(ptx::to_tf32(__float_as_uint(tile[tx][r])));
    }
    __syncthreads();  // the tile is read before the next head overwrites it
  }
}

}  // namespace

void launch_flash_sm90_tf32(const FlashLaunch& l, cudaStream_t stream) {
  const FlashParams& p = l.p;
  if (l.dtype != DType::fp32) throw std::invalid_argument("flash attention sm90 tf32: fp32 only");
  if (!sm90_tf32_head_dim_ok(p.head_dim))
    throw std::invalid_argument("flash attention sm90 tf32: head_dim " + std::to_string(p.head_dim) +
                                " is not a multiple of 8 in 8..128");
  if (l.v_transposed == nullptr) throw std::logic_error("flash attention sm90 tf32: no workspace for V^T");
  if (!flash_sm90_image_present()) throw std::logic_error("flash attention sm90 tf32: this build carries no sm_90a image");
  const int64_t bh = p.batch * p.heads, keys = tf32_v_keys(p.seq);
  const dim3 grid(static_cast<unsigned>((keys + kTransposeTile - 1) / kTransposeTile),
                  static_cast<unsigned>((p.head_dim + kTransposeTile - 1) / kTransposeTile),
                  static_cast<unsigned>(std::min<int64_t>(bh, 65535)));
  launch_kernel(transpose_v_tf32, grid, dim3(kTransposeTile, kTransposeRows), 0, stream, 1,
                static_cast<const float*>(p.v), static_cast<float*>(l.v_transposed), bh, p.seq, keys, p.head_dim);
  TLB_LAUNCH_CHECK(stream);
  switch (sm90_tf32_width(p.head_dim)) {
    case 32: return sm90::launch_width_tf32<32>(l, stream);
    case 64: return sm90::launch_width_tf32<64>(l, stream);
    case 96: return sm90::launch_width_tf32<96>(l, stream);
    default: return sm90::launch_width_tf32<128>(l, stream);
  }
}

}  // namespace tlb::attn
