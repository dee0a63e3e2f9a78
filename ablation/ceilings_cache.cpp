#include "ceilings_cache.hpp"

#include <fmt/core.h>

#include <cmath>
#include <filesystem>

#include "common/cuda_check.hpp"
#include "json_fields.hpp"
#include "output_files.hpp"

namespace tlb {

using json = nlohmann::json;

namespace {

// A number of the file, ConfigError naming the file and its JSON path where it is something else.
double number_at(const json& parent, const std::string& key, const std::string& path, const std::string& at) {
  const auto it = parent.find(key);
  const std::string where = json_fields::key_path(at, key);
  if (it == parent.end()) json_fields::fail(path, where, "missing");
  if (!it->is_number()) json_fields::fail(path, where, "expected a number");
  return it->get<double>();
}

// The file's document, checked: an object whose "ceilings" maps each math to the figures of
// ceilings_json.
json read_checked(const std::string& path) {
  json doc = json_fields::parse_document(json_fields::read_input_file(path), path);
  if (!doc.is_object()) json_fields::fail(path, "$", "expected an object");
  if (!doc.contains("device_uuid") || !doc["device_uuid"].is_string())
    json_fields::fail(path, "$.device_uuid", "expected a string");
  if (!doc.contains("ceilings") || !doc["ceilings"].is_object())
    json_fields::fail(path, "$.ceilings", "expected an object");
  for (const auto& [math, c] : doc["ceilings"].items()) {
    const std::string at = json_fields::key_path("$.ceilings", math);
    if (!c.is_object()) json_fields::fail(path, at, "expected an object");
    for (const char* key : {"tensor_tflops", "bandwidth_gbs", "gemm_n", "gemm_ms", "copy_bytes", "copy_ms"})
      if (!(number_at(c, key, path, at) >= 0)) json_fields::fail(path, json_fields::key_path(at, key), "expected >= 0");
  }
  return doc;
}

}  // namespace

void check_ceilings_file(const std::string& path) {
  std::error_code ec;
  if (!path.empty() && std::filesystem::is_regular_file(path, ec)) read_checked(path);
}

std::optional<MeasuredCeilings> cached_ceilings(const std::string& path, const std::string& uuid,
                                                const std::string& math) {
  std::error_code ec;
  if (path.empty() || !std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  const json doc = read_checked(path);
  if (doc["device_uuid"].get<std::string>() != uuid || !doc["ceilings"].contains(math)) return std::nullopt;
  const json& c = doc["ceilings"][math];
  MeasuredCeilings m;
  m.gemm_math = math;
  m.ceilings.tensor_tflops = c["tensor_tflops"].get<double>();
  m.ceilings.bandwidth_gbs = c["bandwidth_gbs"].get<double>();
  m.gemm_n = static_cast<int64_t>(c["gemm_n"].get<double>());
  m.gemm_ms = c["gemm_ms"].get<double>();
  m.copy_bytes = static_cast<uint64_t>(c["copy_bytes"].get<double>());
  m.copy_ms = c["copy_ms"].get<double>();
  if (!(m.ceilings.tensor_tflops > 0 && m.ceilings.bandwidth_gbs > 0)) return std::nullopt;
  return m;
}

json ceilings_json(const MeasuredCeilings& m) {
  return {{"tensor_tflops", m.ceilings.tensor_tflops}, {"bandwidth_gbs", m.ceilings.bandwidth_gbs},
          {"gemm_n", m.gemm_n},  {"gemm_ms", m.gemm_ms},
          {"copy_bytes", m.copy_bytes}, {"copy_ms", m.copy_ms}};
}

// Adds this math's ceilings to the cache file (a file for another device is replaced).
void store_ceilings(const std::string& path, const DeviceInfo& dev, const MeasuredCeilings& m) {
  if (path.empty()) return;
  json doc = json::object();
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) {
    doc = read_checked(path);
    if (doc["device_uuid"].get<std::string>() != dev.uuid) doc = json::object();
  }
  doc["device"] = dev.name;
  doc["device_uuid"] = dev.uuid;
  doc["ceilings"][m.gemm_math] = ceilings_json(m);
  write_file_atomic(path, doc.dump(2) + "\n");
}

MeasuredCeilings ceilings_for(const std::string& path, const DeviceInfo& dev, DType dtype, Fp32Math math,
                              cudaStream_t stream, std::string& source) {
  if (std::optional<MeasuredCeilings> c = cached_ceilings(path, dev.uuid, ceiling_math(dtype, math))) {
    source = path;
    return *c;
  }
  MeasuredCeilings m = measure_ceilings(dtype, math, stream);
  // A rate that is not a positive number would make every floor meaningless, and the file
  // unreadable next time (JSON has no NaN): neither kept nor used.
  if (!(std::isfinite(m.ceilings.tensor_tflops) && m.ceilings.tensor_tflops > 0 &&
        std::isfinite(m.ceilings.bandwidth_gbs) && m.ceilings.bandwidth_gbs > 0))
    throw DeviceError(fmt::format("the {} ceilings measured {} TFLOP/s and {} GB/s", m.gemm_math,
                                  m.ceilings.tensor_tflops, m.ceilings.bandwidth_gbs),
                      false);
  source = "measured";
  store_ceilings(path, dev, m);
  return m;
}

}  // namespace tlb
