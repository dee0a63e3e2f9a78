#include "common/types.hpp"

namespace tlb {
namespace {
template <typename E, size_t N>
bool parse_from(std::string_view s, const std::string_view (&names)[N], E& out) {
  for (size_t i = 0; i < N; ++i)
    if (s == names[i]) {
      out = static_cast<E>(i);
      return true;
    }
  return false;
}
constexpr std::string_view kDTypeNames[] = {"fp16", "bf16", "fp32"};
constexpr std::string_view kMaskNames[] = {"none", "causal", "padding"};
constexpr std::string_view kActivationNames[] = {"gelu", "gelu_tanh", "relu"};
constexpr std::string_view kFp32MathNames[] = {"tf32", "ieee"};
constexpr std::string_view kStageNames[] = {"qkv", "attn", "ffn", "norm", "graph"};
}  // namespace

std::string_view to_string(DType d) { return kDTypeNames[static_cast<int>(d)]; }
std::string_view to_string(MaskKind m) { return kMaskNames[static_cast<int>(m)]; }
std::string_view to_string(Activation a) { return kActivationNames[static_cast<int>(a)]; }
std::string_view to_string(Fp32Math m) { return kFp32MathNames[static_cast<int>(m)]; }
std::string_view to_string(Stage s) { return kStageNames[static_cast<int>(s)]; }
bool parse_dtype(std::string_view s, DType& out) { return parse_from(s, kDTypeNames, out); }
bool parse_mask(std::string_view s, MaskKind& out) { return parse_from(s, kMaskNames, out); }
bool parse_activation(std::string_view s, Activation& out) {
  return parse_from(s, kActivationNames, out);
}
bool parse_fp32_math(std::string_view s, Fp32Math& out) {
  return parse_from(s, kFp32MathNames, out);
}
bool parse_stage(std::string_view s, Stage& out) { return parse_from(s, kStageNames, out); }

}  // namespace tlb
