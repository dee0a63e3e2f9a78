// The dispatch table behind `--policy auto`: per dtype (and fp32 math mode) and shape, the
// technique configuration that measured fastest while passing the golden check, with the kernel
// variants it ran. `tlbench dispatch` and `tlbench report` build it from a results folder; the
// binary carries one built from the official results (configs/dispatch.json) as its default.
//
// The runner asks choose() per case and dtype: an entry of exactly the case's shape wins; else
// the nearest entry of the same dtype and math, by distance in log space over tokens, sequence
// length, d_model and d_ff plus a penalty for another mask kind; with no entry for the dtype at
// all, every technique is switched on. The choice's reason goes into the result row's note.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/types.hpp"
#include "config.hpp"
#include "results_reader.hpp"

namespace tlb {

// The part of a case's shape the table keys on (valid_lens, activation and eps are left out:
// they do not change which kernels run).
struct DispatchShape {
  int64_t batch = 1, seq = 1, d_model = 8, heads = 1, d_ff = 8, layers = 1;
  MaskKind mask = MaskKind::none;
  bool operator==(const DispatchShape& o) const = default;
};
DispatchShape dispatch_shape(const LayerShape& s);

struct DispatchEntry {
  std::string dtype;         // fp16 | bf16 | fp32
  std::string math;          // "fp32-acc" for fp16/bf16; "tf32" | "ieee" for fp32
  DispatchShape shape;
  std::string config;        // bit string over the table's techniques
  std::string config_names;  // "attn+norm+graph", "reference"
  double speedup = 0;        // of that configuration against the row's baseline
  std::optional<double> cand_ms, golden_rel_l2;
  std::optional<bool> strict_pass;
  std::string dispatch;      // kernel variant per stage, as the measured row says
  int case_id = 0;           // the case of the results it came from
  std::string case_name;
  size_t source = 0;         // index into the table's sources: the folder it was measured in
};

// Where a table's measurements come from (the results folder's run.json).
struct DispatchSource {
  std::string results;     // the results folder, as given when the table was built
  std::string gpu;         // device name
  std::string git_commit;  // of the tool that measured
  std::string time;        // when the run ended (or was last updated)
  bool quick = false;      // measured with --quick
};

struct DispatchTable {
  std::string origin;                   // a file path, or kBuiltinDispatchOrigin
  std::vector<DispatchSource> sources;  // one per results folder the entries come from (>= 1)
  std::vector<std::string> techniques;  // bit order of the entries' configs
  std::vector<DispatchEntry> entries;   // by dtype, math, then case id
  std::vector<std::string> notes;       // (case, dtype) groups that gave no entry, and why
};

constexpr const char* kBuiltinDispatchOrigin = "built-in table";

// Per (case, dtype, math) of `results`: among the rows measured with status ok or fallback:*
// that pass the golden criterion (never an auto or A/A row), the fastest by forward time
// (cand_ms; by speedup where a row has no time). Rows within noise of it (times within their
// summed spreads; speedups each inside the other's interval) tie, and the tie goes to a row
// that also passes strict, then to the faster. Throws ConfigError when a chosen row's shape is
// neither in the row nor in run.json's cases.
DispatchTable build_dispatch_table(const results::Results& results);
// The same over several folders (for example the official sweep and a run of another fp32
// math mode beside it): each folder's entries, with its source. The folders must share one
// technique set, and no (dtype, math, shape) may come from two of them: ConfigError names
// both folders and the case.
DispatchTable build_dispatch_table(const std::vector<results::Results>& folders);

// JSON text of a table (ends with a newline) and back. Parsing throws ConfigError with one line
// "<origin>: <json path>: <problem>" on malformed JSON, unknown or missing keys, wrong types,
// impossible shapes, or a config that does not fit the techniques.
std::string dispatch_table_json(const DispatchTable& t);
DispatchTable parse_dispatch_table(std::string_view text, const std::string& origin);
DispatchTable load_dispatch_table(const std::string& path);
// Writes the table atomically to `path`.
void write_dispatch_table(const DispatchTable& t, const std::string& path);

// "the built-in table (NVIDIA H200, 91676dd55169, 2026-11-29T14:04:10Z, quick)": where a
// table's numbers come from, for notes and run.json; with several sources, each one's in turn
// ("...; NVIDIA H200, fa6f51a83ab2, ...").
std::string dispatch_provenance(const DispatchTable& t);

// configs/dispatch.json as compiled into the binary.
std::string_view builtin_dispatch_table_text();
const DispatchTable& builtin_dispatch_table();
// `path` when given, else the built-in table.
DispatchTable dispatch_table_for(const std::string& path);

// How far apart two shapes are for the purpose of sharing a configuration.
constexpr double kMaskPenalty = 1.0;  // a different mask kind counts like a factor e in one size
double shape_distance(const DispatchShape& a, const DispatchShape& b);

struct DispatchChoice {
  std::string config;                   // bit string over the table's techniques
  StageSwitch stages;                   // the techniques it switches on, as stages
  const DispatchEntry* entry = nullptr;  // null: no entry of this dtype and math
  bool exact = false;
  double distance = 0;
  std::string reason;                   // one line: "exact shape: case 6 gpt2-medium-1k fp16"
};
// The table's configuration for `shape` in `dtype`; `fp32_math` picks the fp32 entries.
DispatchChoice choose(const DispatchTable& t, const LayerShape& shape, DType dtype,
                      Fp32Math fp32_math);

// The auto point of one (case, dtype) as a configuration of a run's technique set: the chosen
// techniques the set has (one it lacks stays off, and the note says so).
struct AutoConfig {
  uint32_t config = 0;   // over the run's techniques
  DispatchChoice choice;
  std::string note;      // "auto chose 01011 (attn+norm+graph) from <provenance>: <reason>"
};
AutoConfig auto_config(const DispatchTable& t, const CaseSpec& c, DType dtype, Fp32Math fp32_math,
                       const TechniqueSet& techniques);

}  // namespace tlb
