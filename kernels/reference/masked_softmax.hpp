// The reference attention's softmax (docs/design.md §2, "E"): from the dense fp32 scores
// [batch, heads, seq, seq] to the probabilities in the working dtype, scaled, masked, fp32 math.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/types.hpp"

namespace tlb::reference {

// Row (b, h, i) of probs becomes softmax_j(scale * scores[b, h, i, j]) over the keys it may
// see (causal: j <= i; padding: j < valid_lens[b]; none: all) and exactly 0 elsewhere, so the
// dense P·V that follows ignores masked keys. A row with no visible key (valid_len 0) is all
// zeros, never NaN. valid_lens is a device pointer, read only for the padding mask. probs may
// be the scores buffer itself when dtype is fp32 (each element is read before it is written,
// by the same thread); otherwise the two must not overlap.
void masked_softmax(DType dtype, const float* scores, void* probs, int64_t batch, int64_t heads,
                    int64_t seq, MaskKind mask, const int* valid_lens, float scale,
                    cudaStream_t stream);

}  // namespace tlb::reference
