// Host entry of the warp-specialised sm_90a attention kernel: the compiled width for the head
// (attention_fwd_sm90_d*.cu; the 128 one also says whether this build carries the sm_90a image).
#include <stdexcept>
#include <string>

#include "attention/attention_fwd_sm90.cuh"

namespace tlb::attn {
namespace sm90 {
void launch_width_32(const FlashLaunch& l, cudaStream_t stream);
void launch_width_64(const FlashLaunch& l, cudaStream_t stream);
void launch_width_80(const FlashLaunch& l, cudaStream_t stream);
void launch_width_96(const FlashLaunch& l, cudaStream_t stream);
void launch_width_128(const FlashLaunch& l, cudaStream_t stream);
void launch_width_192(const FlashLaunch& l, cudaStream_t stream);
void launch_width_256(const FlashLaunch& l, cudaStream_t stream);

}  // namespace sm90

void launch_flash_sm90(const FlashLaunch& l, cudaStream_t stream) {
  if (l.dtype != DType::fp16 && l.dtype != DType::bf16) throw std::invalid_argument("flash attention sm90: fp16/bf16 only");
  if (!sm90_head_dim_ok(l.p.head_dim))
    throw std::invalid_argument("flash attention sm90: head_dim " + std::to_string(l.p.head_dim) +
                                " is not a multiple of 8 in 8..256");
  switch (sm90_width(l.p.head_dim)) {
    case 32: return sm90::launch_width_32(l, stream);
    case 64: return sm90::launch_width_64(l, stream);
    case 80: return sm90::launch_width_80(l, stream);
    case 96: return sm90::launch_width_96(l, stream);
    case 128: return sm90::launch_width_128(l, stream);
    case 192: return sm90::launch_width_192(l, stream);
    default: return sm90::launch_width_256(l, stream);
  }
}

}  // namespace tlb::attn
