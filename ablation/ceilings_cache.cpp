#include "ceilings_cache.hpp"

#include <filesystem>

#include "json_fields.hpp"
#include "output_files.hpp"

namespace tlb {

using json = nlohmann::json;

// The cached ceilings for this device and math, where the file holds them.
std::optional<MeasuredCeilings> cached_ceilings(const std::string& path, const std::string& uuid,
                                                const std::string& math) {
  std::error_code ec;
  if (path.empty() || !std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  const json doc = json_fields::parse_document(json_fields::read_input_file(path), path);
  if (!doc.is_object() || doc.value("device_uuid", "") != uuid || !doc.contains("ceilings")) return std::nullopt;
  const json& all = doc["ceilings"];
  if (!all.is_object() || !all.contains(math)) return std::nullopt;
  const json& c = all[math];
  MeasuredCeilings m;
  m.gemm_math = math;
  m.ceilings.tensor_tflops = c.value("tensor_tflops", 0.0);
  m.ceilings.bandwidth_gbs = c.value("bandwidth_gbs", 0.0);
  m.gemm_n = c.value("gemm_n", int64_t{0});
  m.gemm_ms = c.value("gemm_ms", 0.0);
  m.copy_bytes = c.value("copy_bytes", uint64_t{0});
  m.copy_ms = c.value("copy_ms", 0.0);
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
    doc = json_fields::parse_document(json_fields::read_input_file(path), path);
    if (!doc.is_object() || doc.value("device_uuid", "") != dev.uuid) doc = json::object();
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
  source = "measured";
  store_ceilings(path, dev, m);
  return m;
}

}  // namespace tlb
