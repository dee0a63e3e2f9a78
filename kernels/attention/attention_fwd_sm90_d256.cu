// The warp-specialised sm_90a attention kernel at compiled width 256 (attention_fwd_sm90.cuh),
// fp16 and bf16; its own file so the widths compile in parallel.
#include "attention/attention_fwd_sm90.cuh"

namespace tlb::attn::sm90 {

void launch_width_256(const FlashLaunch& l, cudaStream_t stream) { launch_width_fp16_bf16<256>(l, stream); }

}  // namespace tlb::attn::sm90
