// `tlbench export`: one case's weights under torch.nn.TransformerEncoder's state_dict names,
// its input (and valid_lens), and the reference and golden outputs, as one safetensors file
// that PyTorch can load and run (scripts/check_pytorch.py). Weights and input are generated on
// the host by the shared generator, bit for bit what the GPU stack stores; the outputs come
// from the GPU stack itself.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/rng.hpp"
#include "common/types.hpp"
#include "grid.hpp"

namespace tlb {

struct ExportOptions {
  DType dtype = DType::fp16;
  uint64_t run_seed = kDefaultRunSeed;  // the case's data seed unless the case sets its own
  bool with_outputs = true;             // reference and golden outputs: needs a CUDA device
};

struct ExportSummary {
  std::string path;
  uint64_t file_bytes = 0;
  size_t tensors = 0;
  uint64_t seed = 0;                    // the data seed actually used
  std::string reference_source;         // how reference_output was computed; empty if absent
  std::string reference_omitted;        // why reference_output is absent (outputs asked for)
  double reference_vs_golden_rel_l2 = std::numeric_limits<double>::quiet_NaN();
};

// One parameter tensor of the file: its state_dict name, shape, and the generated tensor.
struct ExportWeight {
  std::string name;
  uint32_t layer = 0;
  TensorId tensor = TensorId::input;
  std::vector<int64_t> shape;
};
// In file order: layer by layer, each layer in state_dict order.
std::vector<ExportWeight> export_weights(const LayerShape& s);

// Writes `path`. Throws ConfigError on a case the stack cannot run, DeviceError when outputs
// are asked for and no CUDA device is usable (nothing is written then), std::runtime_error
// when the file cannot be written.
ExportSummary export_case(const CaseSpec& c, const ExportOptions& o, const std::string& path);

}  // namespace tlb
