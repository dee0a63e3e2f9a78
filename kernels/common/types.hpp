// Plain descriptions of a case, a dtype and a technique set, shared by the host machinery,
// the CPU oracle and the CUDA layer stack. No CUDA, fmt or JSON here: .cu files include it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tlb {

enum class DType : int { fp16 = 0, bf16 = 1, fp32 = 2 };
enum class MaskKind : int { none = 0, causal = 1, padding = 2 };
enum class Activation : int { gelu = 0, gelu_tanh = 1, relu = 2 };
// fp32 only: `ieee` keeps every product in plain fp32 FMA; `tf32` lets tensor cores round
// operands to TF32 (fp32 accumulate). The reference and the golden always run `ieee`.
enum class Fp32Math : int { tf32 = 0, ieee = 1 };

constexpr int kNumDTypes = 3;

std::string_view to_string(DType d);
std::string_view to_string(MaskKind m);
std::string_view to_string(Activation a);
std::string_view to_string(Fp32Math m);
// Parsers return false on an unknown name (callers own the error message).
bool parse_dtype(std::string_view s, DType& out);
bool parse_mask(std::string_view s, MaskKind& out);
bool parse_activation(std::string_view s, Activation& out);
bool parse_fp32_math(std::string_view s, Fp32Math& out);

inline int dtype_bytes(DType d) { return d == DType::fp32 ? 4 : 2; }

// The shape of one case: `layers` pre-LN encoder blocks over [batch, seq, d_model].
struct LayerShape {
  int64_t batch = 1;
  int64_t seq = 1;
  int64_t d_model = 8;
  int64_t heads = 1;
  int64_t d_ff = 8;
  int64_t layers = 1;
  MaskKind mask = MaskKind::none;
  Activation activation = Activation::gelu;
  float eps = 1e-5f;
  std::vector<int> valid_lens;  // one per batch element when mask == padding, else empty

  int64_t head_dim() const { return d_model / heads; }
  int64_t tokens() const { return batch * seq; }
  // Keys visible to batch element b (padding), or seq.
  int64_t valid_len(int64_t b) const {
    return mask == MaskKind::padding ? valid_lens[static_cast<size_t>(b)] : seq;
  }
};

// One official or user case, as loaded and validated from cases.json.
struct CaseSpec {
  int id = 0;
  std::string name;
  LayerShape shape;
  std::string policy;          // one 'E'/'F' per layer; "auto" lets the dispatcher choose
  std::vector<DType> dtypes;   // dtypes this case runs in (defaults to all three)
  uint64_t seed = 0;           // data seed (defaults to the run seed)
};

// The five stages a technique can switch to its hand-written implementation.
enum class Stage : int { qkv = 0, attn = 1, ffn = 2, norm = 3, graph = 4 };
constexpr int kNumStages = 5;
std::string_view to_string(Stage s);
bool parse_stage(std::string_view s, Stage& out);

struct StageSwitch {
  bool on[kNumStages] = {false, false, false, false, false};
  bool operator[](Stage s) const { return on[static_cast<int>(s)]; }
  bool& operator[](Stage s) { return on[static_cast<int>(s)]; }
  bool any_kernel() const { return on[0] || on[1] || on[2] || on[3]; }
  bool operator==(const StageSwitch& o) const {
    for (int i = 0; i < kNumStages; ++i)
      if (on[i] != o.on[i]) return false;
    return true;
  }
};

}  // namespace tlb
