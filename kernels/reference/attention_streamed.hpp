// The golden's attention (docs/design.md §3): fp32 throughout, streamed over keys with an
// online softmax, so no seq x seq buffer exists and every case, seq 100000 included, has a golden.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/types.hpp"

namespace tlb::reference {

struct StreamedAttentionArgs {
  int64_t batch = 1, heads = 1, seq = 1, head_dim = 64;
  MaskKind mask = MaskKind::none;
  const int* valid_lens = nullptr;  // device, [batch], padding only
  const float* q = nullptr;         // [batch, heads, seq, head_dim]
  const float* k = nullptr;
  const float* v = nullptr;
  float* o = nullptr;               // [batch, seq, heads*head_dim]
  float scale = 1.0f;
};

// o = softmax(scale * q k^T + mask) v with IEEE fp32 arithmetic (accurate expf, no fast-math).
// Any head_dim; returns the variant name.
std::string attention_streamed_fp32(const StreamedAttentionArgs& a, cudaStream_t stream);

}  // namespace tlb::reference
