#include "safetensors.hpp"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <unistd.h>

#include "output_files.hpp"

namespace tlb::safetensors {

std::string_view name(Dtype d) {
  switch (d) {
    case Dtype::F16: return "F16";
    case Dtype::BF16: return "BF16";
    case Dtype::F32: return "F32";
    default: return "I32";
  }
}

int element_bytes(Dtype d) { return d == Dtype::F16 || d == Dtype::BF16 ? 2 : 4; }

Dtype from_dtype(DType d) {
  switch (d) {
    case DType::fp16: return Dtype::F16;
    case DType::bf16: return Dtype::BF16;
    default: return Dtype::F32;
  }
}

uint64_t TensorEntry::elements() const {
  uint64_t n = 1;
  for (int64_t s : shape) n *= static_cast<uint64_t>(s);
  return n;
}

std::string header_json(const std::vector<TensorEntry>& entries, const Metadata& metadata) {
  // Insertion order keeps the header readable: metadata first, then tensors in file order.
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    h["__metadata__"] = std::move(m);
  }
  uint64_t offset = 0;
  for (const TensorEntry& e : entries) {
    if (e.name.empty() || e.name == "__metadata__")
      throw std::invalid_argument("safetensors: bad tensor name '" + e.name + "'");
    if (h.contains(e.name)) throw std::invalid_argument("safetensors: duplicate tensor " + e.name);
    nlohmann::ordered_json t;
    t["dtype"] = std::string(name(e.dtype));
    t["shape"] = e.shape;
    t["data_offsets"] = {offset, offset + e.bytes()};
    h[e.name] = std::move(t);
    offset += e.bytes();
  }
  std::string text = h.dump();
  // The 8-byte length prefix plus the header ends on an 8-byte boundary, so the data (and
  // every tensor whose offset is a multiple of 8) is aligned for zero-copy loading.
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

Writer::Writer(std::string path, std::vector<TensorEntry> entries, const Metadata& metadata)
    : path_(std::move(path)), entries_(std::move(entries)) {
  check_output_target(path_);  // a symlink, FIFO, device or folder is never replaced
  const std::string header = header_json(entries_, metadata);
  temp_path_ = path_ + ".partial-" + std::to_string(::getpid());
  file_ = std::fopen(temp_path_.c_str(), "wb");
  if (!file_)
    throw std::runtime_error("cannot write " + path_ + ": " + std::strerror(errno));
  io_buffer_.resize(8u << 20);
  std::setvbuf(file_, io_buffer_.data(), _IOFBF, io_buffer_.size());
  unsigned char len[8];
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));  // little endian
  if (std::fwrite(len, 1, 8, file_) != 8 || std::fwrite(header.data(), 1, n, file_) != n) {
    // The destructor does not run for a throwing constructor: clean up here.
    const int err = errno;
    std::fclose(std::exchange(file_, nullptr));
    std::error_code ec;
    std::filesystem::remove(temp_path_, ec);
    fail("writing the header", err);
  }
  total_ = 8 + n;
  while (current_ < entries_.size() && entries_[current_].bytes() == 0) ++current_;
}

Writer::~Writer() {
  if (file_) {
    std::fclose(file_);
    std::error_code ec;
    std::filesystem::remove(temp_path_, ec);
  }
}

void Writer::fail(const std::string& what, int err) {
  throw std::runtime_error("cannot write " + path_ + " (" + what + "): " + std::strerror(err));
}

void Writer::append(const void* data, uint64_t bytes) {
  if (bytes == 0) return;
  if (current_ >= entries_.size())
    throw std::logic_error("safetensors: bytes appended after the last tensor of " + path_);
  const TensorEntry& e = entries_[current_];
  if (written_in_current_ + bytes > e.bytes())
    throw std::logic_error("safetensors: " + std::to_string(bytes) + " bytes overrun tensor " +
                           e.name + " of " + path_);
  if (std::fwrite(data, 1, bytes, file_) != bytes) fail("tensor " + e.name, errno);
  written_in_current_ += bytes;
  total_ += bytes;
  if (written_in_current_ == e.bytes()) {
    written_in_current_ = 0;
    ++current_;
    while (current_ < entries_.size() && entries_[current_].bytes() == 0) ++current_;
  }
}

uint64_t Writer::finish() {
  if (current_ != entries_.size())
    throw std::logic_error("safetensors: tensor " + entries_[current_].name + " of " + path_ +
                           " is incomplete");
  std::FILE* f = std::exchange(file_, nullptr);
  const bool flushed = std::fflush(f) == 0;
  const bool closed = std::fclose(f) == 0;
  if (!flushed || !closed) {
    const int err = errno;
    std::error_code ec;
    std::filesystem::remove(temp_path_, ec);
    fail("closing", err);
  }
  std::error_code ec;
  std::filesystem::rename(temp_path_, path_, ec);
  if (ec) {
    std::filesystem::remove(temp_path_, ec);
    throw std::runtime_error("cannot write " + path_ + ": " + ec.message());
  }
  return total_;
}

}  // namespace tlb::safetensors
