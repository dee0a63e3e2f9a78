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

// Variants are chosen by shape: the short-sequence kernel (seq <= 128: every key in one tile,
// no rescaling loop), the standard kernel (one block per query tile and batch*head, online
// softmax over key tiles), and split-KV (few blocks, long sequences: key ranges in parallel,
// fp32 partials in the workspace, then a combine step). A variant spec forces a choice; it is a
// comma-separated list of "auto", "standard", "short", "splitkv", "splitkv:N" (N key ranges)
// and, for fp16/bf16, a tile shape "q128w8", "q128w4" or "q64w4" (query rows x warps per
// block) and an engine: "tma" (the warp-specialised sm_90a kernel, its tile chosen by head_dim,
// mask and, for short sequences, seq; the automatic choice on an sm_90 GPU), "wgmma" (the first
// sm_90a kernel, on the 128-row tile) or "mma" (mma.sync); for "tma", "persistent" or "tiles"
// (its grid), "longtile" (its long-sequence tile whatever seq), and "fmaexp" (which asks for
// "tma") or "mufuexp" (at head_dim up to 64, a share of the softmax's exponentials on the FMA
// pipe, named "_fmaexpN" for every N-th 8-key column, or all on the special-function unit).
// Grids and the long tile forced onto another kernel are refused. The environment variable
// TLBENCH_ATTN_VARIANT applies a spec to every call of the process (A/B runs); there, parts
// that cannot run a shape (short on a long sequence) are ignored for it. The returned variant
// name always says what ran.
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
  // A variant spec that overrides the dispatcher for this call (tests). Unlike the environment
  // variable it is strict: a spec that cannot run the shape throws std::invalid_argument. Size
  // the workspace with flash_attention_workspace_bytes(args).
  const char* force = nullptr;
};

// Whether the hand-written kernel covers this shape; `why` says why not (a visible fallback).
// Multiples of 8 up to 128 run everywhere (head_dim 64 and 128 on their own widths, narrower
// heads on those with zero-filled columns); fp16/bf16 ones up to 256 run on the sm_90a kernel,
// so for those the answer asks the current device.
bool flash_attention_supported(const LayerShape& s, DType dtype, std::string* why);
// Scratch the chosen variant needs (0 when it needs none). Host-only, no device needed: a pure
// function of the shape (and of TLBENCH_ATTN_VARIANT), linear in seq.
uint64_t flash_attention_workspace_bytes(const LayerShape& s, DType dtype);
// The same for the variant `a` asks for (a forced variant included).
uint64_t flash_attention_workspace_bytes(const AttentionArgs& a);
// The name of the variant flash_attention(a) would launch, without launching it.
std::string flash_attention_variant(const AttentionArgs& a);
// Whether the current device runs the sm_90a kernels (an sm_90 GPU, a build with sm_90a code).
bool flash_attention_has_sm90a();
// Launches the variant the dispatcher picks for the shape; returns its name for the results.
// Throws std::invalid_argument for a shape flash_attention_supported() rejects.
std::string flash_attention(const AttentionArgs& a, cudaStream_t stream);

}  // namespace tlb
