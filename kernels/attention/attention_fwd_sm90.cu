// Host entry of the warp-specialised sm_90a attention kernel: the compiled width for the head
// (attention_fwd_sm90_d*.cu; the 128 one also says whether this build carries the sm_90a image).
#include <iterator>
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

struct WidthLauncher {
  int width;
  void (*launch)(const FlashLaunch&, cudaStream_t);
};
constexpr WidthLauncher kLaunchers[] = {{32, launch_width_32},   {64, launch_width_64},   {80, launch_width_80},
                                        {96, launch_width_96},   {128, launch_width_128}, {192, launch_width_192},
                                        {256, launch_width_256}};

constexpr bool launchers_match_widths() {
  if (std::size(kLaunchers) != std::size(kSm90Widths)) return false;
  for (size_t i = 0; i < std::size(kLaunchers); ++i)
    if (kLaunchers[i].width != kSm90Widths[i]) return false;
  return true;
}
static_assert(launchers_match_widths(), "a launcher per compiled width, in kSm90Widths' order");

}  // namespace sm90

void launch_flash_sm90(const FlashLaunch& l, cudaStream_t stream) {
  if (l.dtype != DType::fp16 && l.dtype != DType::bf16) throw std::invalid_argument("flash attention sm90: fp16/bf16 only");
  if (!sm90_head_dim_ok(l.p.head_dim))
    throw std::invalid_argument("flash attention sm90: head_dim " + std::to_string(l.p.head_dim) +
                                " is not a multiple of 8 in 8..256");
  const int width = sm90_width(l.p.head_dim);
  for (const sm90::WidthLauncher& w : sm90::kLaunchers)
    if (w.width == width) return w.launch(l, stream);
  throw std::logic_error("flash attention sm90: no launcher for width " + std::to_string(width));
}

}  // namespace tlb::attn
