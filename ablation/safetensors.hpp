// A streaming writer of the safetensors format (what PyTorch, JAX and the `safetensors`
// package load): 8-byte little-endian header length, a JSON header mapping each tensor name to
// {dtype, shape, data_offsets} plus a "__metadata__" map of strings, padded with spaces so the
// data starts 8-byte aligned, then every tensor's bytes back to back. Tensors are declared up
// front and their bytes streamed in order, so a 200 MB input never sits in memory whole.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/types.hpp"

namespace tlb::safetensors {

enum class Dtype { F16, BF16, F32, I32 };
std::string_view name(Dtype d);
int element_bytes(Dtype d);
Dtype from_dtype(DType d);

struct TensorEntry {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<int64_t> shape;
  uint64_t elements() const;
  uint64_t bytes() const { return elements() * static_cast<uint64_t>(element_bytes(dtype)); }
};

using Metadata = std::vector<std::pair<std::string, std::string>>;

// The header text for these entries (offsets assigned in order) and metadata, padded with
// spaces to a multiple of 8 bytes. Exposed for tests.
std::string header_json(const std::vector<TensorEntry>& entries, const Metadata& metadata);

// Writes `path` through a temporary file beside it that is renamed into place by finish(); a
// writer destroyed before finish() (an exception on the way) removes the temporary, so a
// half-written file never carries the final name. Errors throw std::runtime_error naming the
// path.
class Writer {
 public:
  Writer(std::string path, std::vector<TensorEntry> entries, const Metadata& metadata);
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // The next bytes of the current tensor (declaration order). A call may not run past the end
  // of the current tensor; a tensor may arrive in any number of calls.
  void append(const void* data, uint64_t bytes);
  // The tensor whose bytes append() expects next (entries().size() once all have arrived).
  size_t current() const { return current_; }
  const std::vector<TensorEntry>& entries() const { return entries_; }
  // Checks that every tensor is complete, flushes, closes and renames. Returns the file size.
  uint64_t finish();

 private:
  [[noreturn]] void fail(const std::string& what, int err);
  std::string path_, temp_path_;
  std::vector<TensorEntry> entries_;
  std::FILE* file_ = nullptr;
  size_t current_ = 0;
  uint64_t written_in_current_ = 0;
  uint64_t total_ = 0;
  std::vector<char> io_buffer_;
};

}  // namespace tlb::safetensors
