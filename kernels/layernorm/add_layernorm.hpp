// Fused residual add + bias + LayerNorm in one pass per row:
//   resid_out = x + (delta + bias)   (fp32 sum, rounded once to the dtype; written when delta or
//                                     bias is given, otherwise resid = x and nothing is written)
//   norm_out  = (resid - mean) * rstd * gamma + beta, statistics in fp32 over the stored
//               (dtype-rounded) resid, so norm_out is exactly the LayerNorm of resid_out.
// 16-byte vector accesses; rows of any count, cols a multiple of 8 up to kAddNormMaxCols.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "common/types.hpp"

namespace tlb {

// How 1/sqrt(var + eps) is computed: the hardware instruction, or the bit trick
// (seed 0x5F3759DF refined by Newton-Raphson steps; see layernorm/rsqrt.hpp).
enum class RsqrtKind : int { hardware = 0, bit_trick = 1 };
std::string_view to_string(RsqrtKind k);
bool parse_rsqrt_kind(std::string_view s, RsqrtKind& out);  // "hardware" | "bit_trick"

// The whole row lives in registers of one warp (cols <= 1024) or one block (up to 512
// threads x 32 values): longer rows fall back.
constexpr int64_t kAddNormMaxCols = 16384;

struct AddNormArgs {
  DType dtype = DType::fp16;
  int64_t rows = 0, cols = 0;
  const void* x = nullptr;      // [rows, cols]
  const void* delta = nullptr;  // [rows, cols] or null
  const void* bias = nullptr;   // [cols] or null
  void* resid_out = nullptr;    // [rows, cols], required with delta or bias; may alias x or delta
  void* norm_out = nullptr;     // [rows, cols]; may alias x or delta, not resid_out
  const void* gamma = nullptr;  // [cols]
  const void* beta = nullptr;   // [cols]
  float eps = 1e-5f;
  RsqrtKind rsqrt = RsqrtKind::hardware;
};

// False (and the reason in *why) when the fused kernel cannot take these arguments: cols not
// a multiple of 8 or above kAddNormMaxCols, a pointer that is null or not 16-byte aligned,
// resid_out missing or equal to norm_out. The caller then runs the reference path.
bool add_layernorm_supported(const AddNormArgs& a, std::string* why);

// Enqueues the kernel on `stream` and returns the variant that ran (e.g.
// "add_ln.warp.v4.hardware"), for the dispatch record. Throws std::invalid_argument with the
// reason when add_layernorm_supported() is false; rows == 0 launches nothing.
std::string add_layernorm(const AddNormArgs& a, cudaStream_t stream);

// Device-memory bytes one call moves: x (and delta) read, resid (when written) and norm
// written, plus gamma, beta (and bias) read once. Bandwidth = bytes / time.
uint64_t add_layernorm_bytes(const AddNormArgs& a);

// The default inverse square root of the fused kernel: the faster one that passes the accuracy
// tests. TLBENCH_RSQRT=hardware|bit_trick in the environment overrides it (an unknown value
// throws std::invalid_argument).
RsqrtKind default_rsqrt_kind();

}  // namespace tlb
