// Host side of the fused add + LayerNorm: what it supports, how a row is split over threads,
// the variant name recorded per point, and the default inverse square root.
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "layernorm/add_layernorm.hpp"
#include "layernorm/add_layernorm_plan.hpp"

namespace tlb {

namespace {

bool fail(std::string* why, std::string reason) {
  if (why) *why = std::move(reason);
  return false;
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

std::string_view to_string(RsqrtKind k) {
  return k == RsqrtKind::bit_trick ? "bit_trick" : "hardware";
}

bool parse_rsqrt_kind(std::string_view s, RsqrtKind& out) {
  if (s == "hardware") {
    out = RsqrtKind::hardware;
    return true;
  }
  if (s == "bit_trick") {
    out = RsqrtKind::bit_trick;
    return true;
  }
  return false;
}

bool add_layernorm_supported(const AddNormArgs& a, std::string* why) {
  if (a.dtype != DType::fp16 && a.dtype != DType::bf16 && a.dtype != DType::fp32)
    return fail(why, "add_layernorm: unknown dtype");
  if (a.rows < 0) return fail(why, "add_layernorm: rows " + std::to_string(a.rows) + " < 0");
  if (a.cols <= 0 || a.cols % 8 != 0)
    return fail(why, "add_layernorm: cols " + std::to_string(a.cols) +
                         " is not a positive multiple of 8 (rows are read in 16-byte vectors)");
  if (a.cols > kAddNormMaxCols)
    return fail(why, "add_layernorm: cols " + std::to_string(a.cols) + " > " +
                         std::to_string(kAddNormMaxCols) +
                         " (the row must fit in the registers of one block)");
  const bool write_resid = a.delta != nullptr || a.bias != nullptr;
  if (write_resid && a.resid_out == nullptr)
    return fail(why, "add_layernorm: resid_out is null but delta or bias is given");
  if (write_resid && a.resid_out == a.norm_out)
    return fail(why, "add_layernorm: resid_out and norm_out are the same buffer");
  struct Named {
    const char* name;
    const void* ptr;
    bool required;
  };
  const Named pointers[] = {{"x", a.x, true},
                            {"delta", a.delta, false},
                            {"bias", a.bias, false},
                            {"resid_out", a.resid_out, false},
                            {"norm_out", a.norm_out, true},
                            {"gamma", a.gamma, true},
                            {"beta", a.beta, true}};
  for (const Named& p : pointers) {
    if (p.ptr == nullptr) {
      if (p.required) return fail(why, std::string("add_layernorm: ") + p.name + " is null");
      continue;
    }
    if (!aligned16(p.ptr))
      return fail(why, std::string("add_layernorm: ") + p.name +
                           " is not 16-byte aligned (vector loads and stores need it)");
  }
  return true;
}

namespace detail {

AddNormPlan plan_add_layernorm(DType dtype, int64_t cols) {
  const int per_vec = 16 / dtype_bytes(dtype);
  const int max_vecs = kAddNormMaxValuesPerThread / per_vec;
  const int64_t vecs = cols / per_vec;
  AddNormPlan plan;
  if (vecs <= 32 * max_vecs) {
    // A warp per row: no block barrier; each lane holds the fewest power-of-two vectors.
    plan.threads_per_row = 32;
    plan.vecs_per_thread = 1;
    while (32 * plan.vecs_per_thread < vecs) plan.vecs_per_thread *= 2;
    return plan;
  }
  // A block per row: the smallest power-of-two team at full registers per thread.
  plan.vecs_per_thread = max_vecs;
  plan.threads_per_row = 64;
  while (static_cast<int64_t>(plan.threads_per_row) * max_vecs < vecs) plan.threads_per_row *= 2;
  return plan;
}

}  // namespace detail

std::string add_layernorm(const AddNormArgs& a, cudaStream_t stream) {
  std::string why;
  if (!add_layernorm_supported(a, &why)) throw std::invalid_argument(why);
  const detail::AddNormPlan plan = detail::plan_add_layernorm(a.dtype, a.cols);
  if (a.rows > 0) detail::launch_add_layernorm(a, plan, stream);
  std::string name = "add_ln.";
  name += plan.threads_per_row == 32 ? "warp" : "block" + std::to_string(plan.threads_per_row);
  name += ".v" + std::to_string(plan.vecs_per_thread) + ".";
  name += to_string(a.rsqrt);
  return name;
}

uint64_t add_layernorm_bytes(const AddNormArgs& a) {
  const uint64_t esz = static_cast<uint64_t>(dtype_bytes(a.dtype));
  const uint64_t tile = static_cast<uint64_t>(a.rows) * static_cast<uint64_t>(a.cols) * esz;
  const uint64_t param = static_cast<uint64_t>(a.cols) * esz;
  const bool write_resid = a.delta != nullptr || a.bias != nullptr;
  uint64_t bytes = 2 * tile + 2 * param;  // x read, norm written; gamma, beta
  if (a.delta) bytes += tile;
  if (write_resid) bytes += tile;
  if (a.bias) bytes += param;
  return bytes;
}

RsqrtKind default_rsqrt_kind() {
  // Hardware until the GPU benchmark (tlbench_kernel_bench norm, both kinds on case 13's
  // rows) shows the bit trick faster: both pass the accuracy tests, so speed decides.
  static const RsqrtKind kind = [] {
    const char* env = std::getenv("TLBENCH_RSQRT");
    if (env == nullptr || *env == '\0') return RsqrtKind::hardware;
    RsqrtKind k;
    if (!parse_rsqrt_kind(env, k))
      throw std::invalid_argument(std::string("TLBENCH_RSQRT=") + env +
                                  ": expected hardware or bit_trick");
    return k;
  }();
  return kind;
}

}  // namespace tlb
