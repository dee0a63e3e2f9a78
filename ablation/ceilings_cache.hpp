// Ceilings (timing/ceilings.hpp) kept per device in a JSON file, so a results folder or an
// explain session measures them once: {"device", "device_uuid", "ceilings": {MATH: {...}}},
// MATH as ceiling_math names it. A file for another device is not used, and is replaced when
// ceilings are stored.
#pragma once

#include <cuda_runtime.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "provenance.hpp"
#include "timing/ceilings.hpp"

namespace tlb {

// ConfigError naming the file and the JSON path where an existing file is not a ceilings file
// (nothing where there is none yet).
void check_ceilings_file(const std::string& path);
// The file's ceilings for this device and math, where it holds usable ones (a missing file or
// entry is nothing; a malformed file is ConfigError naming it).
std::optional<MeasuredCeilings> cached_ceilings(const std::string& path, const std::string& uuid,
                                                const std::string& math);
// Adds this math's ceilings to the file (written atomically).
void store_ceilings(const std::string& path, const DeviceInfo& dev, const MeasuredCeilings& m);
// The file's ceilings for the math, else measured now and stored (an empty path: measured,
// not stored). `source` says which: the path or "measured".
MeasuredCeilings ceilings_for(const std::string& path, const DeviceInfo& dev, DType dtype, Fp32Math math,
                              cudaStream_t stream, std::string& source);
nlohmann::json ceilings_json(const MeasuredCeilings& m);

}  // namespace tlb
