// The full-factorial grid: 2^N technique configurations x cases x dtypes, narrowed by the
// CLI's selection (--cases 1-5,9  --configs 11000,1xxxx,auto  --dtypes fp16,bf16). Within each
// (case, dtype) the configurations come in a seeded shuffled order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config.hpp"

namespace tlb {

// The run's seed when --seed is not given: it orders the grid and seeds every case whose own
// `seed` is 0.
constexpr uint64_t kDefaultRunSeed = 1;

struct Selection {
  std::vector<int> case_ids;                 // empty: every case
  std::vector<std::string> config_patterns;  // '0', '1', 'x' per technique; empty: all
  std::vector<DType> dtypes;                 // empty: each case's own dtypes
  // The dispatcher's own point ("auto") in every (case, dtype) group: --policy auto, or "auto"
  // among the --configs items. Cases whose policy is "auto" get it regardless.
  bool auto_points = false;
  bool only_auto = false;  // --configs auto alone: no fixed configuration
  std::string narrowed;    // why the configurations were narrowed without --configs, if so
};

// Parses the three selection strings (empty string = no restriction). Throws ConfigError with
// a one-line message naming the option on a malformed value, an unknown case id, a pattern of
// the wrong length or letters, or an unknown dtype. `--configs` may name "auto".
Selection parse_selection(const std::string& cases, const std::string& configs,
                          const std::string& dtypes, const CaseSet& case_set,
                          const TechniqueSet& techniques);

// --policy: "case" (each case's own per-layer policy; the default) or "auto" (adds the
// dispatcher's point to every group). Throws ConfigError naming the option otherwise.
void apply_policy_option(Selection& sel, const std::string& policy);

// --quick without --configs: each technique alone and all of them together (N + 1 of the 2^N
// configurations), so the official sweep is a smoke run of about a minute. Leaves a selection
// that names configurations (or only auto) unchanged; sets `narrowed` when it narrows.
void narrow_for_quick(Selection& sel, const TechniqueSet& techniques);

// Fixed configurations per (case, dtype) group the selection keeps.
uint32_t selected_config_count(const Selection& sel, const TechniqueSet& techniques);

// True when config index `config` matches a pattern like "1x0xx" (bit 1 = leftmost).
bool config_matches(const std::string& pattern, uint32_t config, int num_techniques);

// A list of configuration patterns and "auto", as --configs takes it ("00000,auto").
struct ConfigPatterns {
  std::vector<std::string> patterns;
  bool auto_point = false;  // "auto" named: the dispatcher's point
  // A fixed configuration matches a pattern; the auto point matches where "auto" is named.
  bool matches(uint32_t config, bool automatic, int num_techniques) const;
};
// ConfigError naming `option` on an empty item, a pattern of the wrong length or letters.
ConfigPatterns parse_config_patterns(const std::string& text, const TechniqueSet& techniques, const char* option);

struct GridPoint {
  size_t case_index = 0;  // into CaseSet::cases
  int case_id = 0;
  DType dtype = DType::fp16;
  uint32_t config = 0;    // bit pattern over TechniqueSet (MSB = technique 1); unused if automatic
  bool automatic = false; // the dispatcher's point: its configuration is chosen at run time
};

// Whether a (case, dtype) group of `c` gets the dispatcher's point under `sel`.
bool wants_auto_point(const CaseSpec& c, const Selection& sel);

// Puts `configs` into the seeded order of one (case, dtype) group: Fisher-Yates over a
// splitmix64 stream keyed by (seed, case id, dtype), identical on every platform.
void shuffle_configs(std::vector<uint32_t>& configs, uint64_t seed, int case_id, DType dtype);

// Points grouped by case, then dtype; configurations shuffled within each group by `seed`, the
// auto point (where wanted) among them like any configuration.
std::vector<GridPoint> build_grid(const CaseSet& cases, const TechniqueSet& techniques,
                                  const Selection& sel, uint64_t seed);

}  // namespace tlb
