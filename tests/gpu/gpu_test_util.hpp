// Helpers for GPU tests that run the layer stack (or a kernel that plugs into it) and compare
// with the CPU fp64 oracle: small cases, one poisoned run of a path, error statistics, and the
// per-dtype tolerances every such comparison uses.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/device_buffer.hpp"
#include "common/types.hpp"
#include "stack/layer_stack.hpp"
#include "writers.hpp"

namespace tlb::test {

// A stream owned by one test (the stack needs a real stream: graphs cannot capture stream 0).
class TestStream {
 public:
  TestStream();
  ~TestStream();
  TestStream(const TestStream&) = delete;
  TestStream& operator=(const TestStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// A small case. Tests pass distinct ids (and seeds) so each draws its own data.
CaseSpec small_case(int id, int64_t batch, int64_t seq, int64_t d_model, int64_t heads,
                    int64_t d_ff, int64_t layers, MaskKind mask = MaskKind::none,
                    Activation activation = Activation::gelu, std::vector<int> valid_lens = {},
                    uint64_t seed = 20261129);

// "11010" -> {qkv, attn, norm}; the first five characters are the stages in bit order.
StageSwitch stages_from_bits(const std::string& bits);
PathOptions options_from_bits(const std::string& bits, const std::string& policy = "",
                              Fp32Math fp32_math = Fp32Math::tf32);

struct PathResult {
  std::vector<float> output;
  std::vector<StageDispatch> dispatch;
  std::vector<std::vector<float>> layers;  // keep_layer_outputs only
};
// Builds the path, poisons its outputs, runs it once, synchronises and copies back.
PathResult run_path(const CaseData& data, const PathOptions& opt, cudaStream_t stream);

struct ErrorStats {
  size_t count = 0;
  int64_t nan = 0, inf = 0;
  double rel_l2 = 0.0;   // ||got - want|| / ||want||; NaN when got holds a NaN
  double max_abs = 0.0;
  size_t worst = 0;      // index of the largest absolute error
};
ErrorStats compare(const std::vector<float>& got, const std::vector<double>& want);
ErrorStats compare(const std::vector<float>& got, const std::vector<float>& want);
std::string describe(const ErrorStats& e);

// Finite-only comparison for single-kernel tests: NaN and Inf elements are counted in `nan` and
// `inf` and left out of rel_l2 and max_abs, so the kernel's accuracy and its unwritten or
// overflowed elements are reported (and checked) separately.
ErrorStats compare_finite(const std::vector<float>& got, const std::vector<double>& want);
ErrorStats compare_finite(const std::vector<float>& got, const std::vector<float>& want);

// One value's bits in `dt` (2 or 4 bytes at dst), and back.
void encode_value(float v, DType dt, uint8_t* dst);
float decode_value(const uint8_t* src, DType dt);
// Values (already rounded to `dt`) as a device tensor in an allocation of exactly its size, so
// that compute-sanitizer flags any read past it.
DeviceBuffer upload_values(const std::vector<float>& values, DType dt);
// NaN-fills device memory (0xff bytes are NaN in fp16, bf16 and fp32).
void poison(void* ptr, size_t bytes);

// An output with guard regions on both sides: guards hold a byte pattern, the output itself
// is NaN until the kernel writes it.
class GuardedOutput {
 public:
  static constexpr size_t kGuardBytes = 4096;
  static constexpr uint8_t kSentinel = 0xa5;

  GuardedOutput(size_t n, DType dt);
  void* ptr() const { return buf_.as<uint8_t>() + kGuardBytes; }
  void poison();
  // The output values; `guards_intact` says whether every guard byte kept its pattern.
  std::vector<float> read(bool* guards_intact) const;

 private:
  size_t n_;
  DType dt_;
  size_t esz_;
  DeviceBuffer buf_;
};
// True when the two vectors hold the same bits (NaNs included).
bool bit_identical(const std::vector<float>& a, const std::vector<float>& b);

// rel-L2 bound of a path in `dtype` against the fp64 oracle (why these values: the .cpp).
double oracle_tolerance(DType dtype);
// The same for the fused path's fp32 with TF32 tensor-core math.
double tf32_tolerance();

std::vector<double> oracle_output(const CaseSpec& c, DType dtype,
                                  std::vector<std::vector<double>>* per_layer = nullptr);

std::string label(const CaseSpec& c, DType dtype);

// A result row that was timed: status ok (or a visible fallback) against the reference,
// with a positive speedup inside its interval, at least three pairs and both forward times.
void check_timed_row(const PointRow& p);

}  // namespace tlb::test
