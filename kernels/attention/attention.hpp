// Fused (flash-style) attention: o = softmax(q k^T * scale + mask) v per (batch, head), with
// an online softmax over key tiles on tensor cores; no seq x seq buffer anywhere.
// Layouts: q, k, v are [batch, heads, seq, head_dim]; o is [batch, seq, heads*head_dim]
// (heads concatenated, the out-projection's input). Statistics in fp32.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/types.hpp"

namespace tlb {

struct AttentionArgs {
  DType dtype = DType::fp16;
  Fp32Math fp32_math = Fp32Math::tf32;
  int64_t batch = 1, heads = 1, seq = 1, head_dim = 64;
  MaskKind mask = MaskKind::none;
  const int* valid_lens = nullptr;  // device, [batch], padding only
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  float scale = 1.0f;               // 1/sqrt(head_dim)
  void* workspace = nullptr;        // flash_attention_workspace_bytes() bytes (split-KV partials)
};

// Whether the hand-written kernel covers this shape; `why` says why not (a visible fallback).
bool flash_attention_supported(const LayerShape& s, DType dtype, std::string* why);
// Scratch the chosen variant needs (0 when it needs none). Host-only, no device needed.
uint64_t flash_attention_workspace_bytes(const LayerShape& s, DType dtype);
// Launches the variant the dispatcher picks for the shape; returns its name for the results.
std::string flash_attention(const AttentionArgs& a, cudaStream_t stream);

}  // namespace tlb
