// The warp-specialised sm_90a attention kernel at compiled width 128 (attention_fwd_sm90.cuh),
// fp16 and bf16; its own file so the widths compile in parallel.
#include "attention/attention_fwd_sm90.cuh"

namespace tlb::attn::sm90 {

void launch_width_128(const FlashLaunch& l, cudaStream_t stream) { launch_width_fp16_bf16<128>(l, stream); }

}  // namespace tlb::attn::sm90

namespace tlb::attn {

bool flash_sm90_image_present() {
  // The kernel carries sm_90a machine code only if the build targeted it; any other image of it
  // is the trapping stub.
  cudaFuncAttributes attr{};
  TLB_CUDA_CHECK(cudaFuncGetAttributes(&attr, sm90::flash_fwd_sm90<__half, sm90::PlannedShape<128, false>, false>));
  return attr.ptxVersion >= 90 && attr.binaryVersion == 90;
}

}  // namespace tlb::attn
