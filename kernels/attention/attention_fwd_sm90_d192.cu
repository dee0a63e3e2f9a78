// The warp-specialised sm_90a attention kernel at compiled width 192 (attention_fwd_sm90.cuh),
// fp16 and bf16; its own file so the widths compile in parallel.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "attention/attention_fwd_sm90.cuh"

namespace tlb::attn::sm90 {

void launch_width_192(const FlashLaunch& l, cudaStream_t stream) {
  if (l.dtype == DType::bf16) return launch_width<__nv_bfloat16, 192>(l, stream);
  return launch_width<__half, 192>(l, stream);
}

}  // namespace tlb::attn::sm90
