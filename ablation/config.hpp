// Loading and validating cases.json and techniques.json. Every problem is one line naming
// the file, the JSON path and what is wrong (ConfigError::what()); the CLI prints it and
// exits 2 before anything is written.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "common/types.hpp"

namespace tlb {

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Technique {
  std::string name;         // one of the stage names: qkv, attn, ffn, norm, graph
  std::string description;  // one line
  Stage stage = Stage::qkv;
};

// The factors of the grid, in bit order (bit 1 = leftmost character of a config string).
struct TechniqueSet {
  std::string source;
  std::vector<Technique> items;
  int size() const { return static_cast<int>(items.size()); }
  uint32_t num_configs() const { return 1u << items.size(); }
  // Config index -> bit string, e.g. 0b11000 with 5 techniques -> "11000" (bit 1 is the MSB).
  std::string bits(uint32_t config) const;
  StageSwitch stages(uint32_t config) const;
  // "qkv+attn", or "reference" for 0.
  std::string names(uint32_t config) const;
};

// cases.json: {"cases": [{id, name, batch, seq, d_model, heads, d_ff, layers, mask,
// valid_lens?, activation?, eps?, policy?, dtypes?, seed?}, ...]}. Optional fields default to:
// activation "gelu", eps 1e-5, policy all 'F' (one letter per layer), dtypes [fp16, bf16,
// fp32], seed 0, which means "use the run's seed" (see data_seed). Unknown keys are errors.
struct CaseSet {
  std::string source;
  std::vector<CaseSpec> cases;
};

// The seed a case's data is generated from: its own, or the run's when it sets none (0).
inline uint64_t data_seed(const CaseSpec& c, uint64_t run_seed) {
  return c.seed != 0 ? c.seed : run_seed;
}

// The per-layer E/F string a case's layers run under: its own, or all 'F' where the case says
// "auto" (the dispatcher then picks the technique set for the whole stack: the auto point).
std::string layer_policy(const CaseSpec& c);

// Throw ConfigError("<source>: <json path>: <problem>").
CaseSet parse_cases(std::string_view text, const std::string& source);
TechniqueSet parse_techniques(std::string_view text, const std::string& source);
CaseSet load_cases(const std::string& path);
TechniqueSet load_techniques(const std::string& path);

// The default techniques file's content (the five techniques of docs/design.md §2 in bit
// order), used when --techniques is not given and configs/techniques.json is not found.
TechniqueSet default_techniques();

}  // namespace tlb
