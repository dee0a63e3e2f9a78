// The reference attention (docs/design.md §2, "E"): materialised. scores = q · k^T for every
// (batch, head) by one strided-batched cuBLAS GEMM into a dense fp32 [batch, heads, seq, seq]
// buffer (fp32 output of the fp32-accumulating GEMM, as a careful engineer and PyTorch's fused
// attention keep them: rounding a score of 10 to fp16 moves its exp by 0.5 %), the masked
// softmax from it into P in the working dtype, then P · V by batched cuBLAS GEMMs that write
// each head's slice of o [batch, seq, heads*head_dim] directly (no transpose pass).
#pragma once

#include <cublas_v2.h>

#include <cstdint>
#include <vector>

#include "common/types.hpp"
#include "reference/linear_cublas.hpp"

namespace tlb::reference {

struct DenseAttentionArgs {
  DType dtype = DType::fp16;
  GemmPrecision precision = GemmPrecision::standard;
  int64_t batch = 1, heads = 1, seq = 1, head_dim = 64;
  MaskKind mask = MaskKind::none;
  const int* valid_lens = nullptr;  // device, [batch], padding only
  const void* q = nullptr;          // [batch, heads, seq, head_dim]
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;                // [batch, seq, heads*head_dim]
  float* scores = nullptr;          // [batch, heads, seq, seq], fp32
  void* probs = nullptr;            // [batch, heads, seq, seq] in dtype; may equal scores (fp32)
  float scale = 1.0f;
  // Device array of dense_attention_pointer_count() pointers, filled once from
  // dense_attention_pointer_table() (the P·V GEMM's per-head operands), or null: then P·V
  // runs as one strided-batched call per batch element (also when the table's entries would
  // not all be 16-byte aligned).
  void* const* pv_pointers = nullptr;
};

// The P·V GEMM's operand table: for each (batch, head), in order, the V pointers, then the P
// (probs) pointers, then the output pointers. Depends only on the buffers, never on data.
int64_t dense_attention_pointer_count(int64_t batch, int64_t heads);
std::vector<void*> dense_attention_pointer_table(const DenseAttentionArgs& a);

// Whether every entry of the table is 16-byte aligned (else the table is not used).
bool dense_attention_pointers_aligned(const DenseAttentionArgs& a);

// Runs on the handle's stream (configure_handle).
void attention_dense(cublasHandle_t handle, const DenseAttentionArgs& a);

}  // namespace tlb::reference
