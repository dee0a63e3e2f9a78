// PyTorch beside `auto`: a results folder's peer_pytorch.jsonl (scripts/pytorch_peer.py, run
// on the same GPU right after the sweep) read and set against the folder's auto rows, per
// (case, dtype, math) with fp32 TF32 against TF32 and IEEE against IEEE. `tlbench report`
// writes it to analysis/pytorch_comparison.csv and prints one line per dtype and math.
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "results_reader.hpp"

namespace tlb::peer {

constexpr const char* kPeerFile = "peer_pytorch.jsonl";

// One row of the peer file: a PyTorch mode on one (case, dtype, math).
struct PeerRow {
  int case_id = 0;
  std::string case_name;                  // as the peer file says ("" when it does not)
  std::string dtype, math, mode, status;  // math: "native" for fp16/bf16, "tf32" | "ieee" for fp32
  std::optional<double> median_ms;        // ok rows
  std::optional<bool> settled;            // how the mode was timed; none from a script before --settle-s
  std::string ffn_gelu;                   // fast-path rows of a gelu case: "tanh" | "exact", the GELU it computed
  std::string torch, cudnn, gpu;
  int line = 0;  // in the peer file
};

struct PeerFile {
  std::string path;
  std::vector<PeerRow> rows;
  // "torch 2.11.0+cu130, cuDNN 91900, on NVIDIA H200" for each distinct environment, "; "-joined.
  std::string versions() const;
  // True when the file has ok rows and none says whether it was settled: it was written before
  // the peer settled each mode, so PyTorch ran in bursts at a clock above the sweep's.
  bool timed_in_bursts() const;
};

// DIR/peer_pytorch.jsonl, or nullopt when the folder has none. ConfigError with one line
// "<file>[:<line>]: <problem>" when it is not a regular file, a line is not JSON, a required
// field (case_id, dtype, math, mode, status) is missing or of the wrong type, an ok row has
// no positive median_ms, "settled" is there and not a boolean, or "ffn_gelu" is there and not
// "tanh" or "exact".
std::optional<PeerFile> read_peer_file(const std::string& results_dir);

// One (case, dtype, math) that has an auto row.
struct Comparison {
  int case_id = 0;
  std::string case_name, dtype, math;  // math in the peer file's words
  std::string auto_choice;             // the configuration auto ran
  std::optional<double> auto_ms;       // the auto row's forward time (none: not measured)
  std::string peer_mode;               // PyTorch's fastest ok mode; "" when none ran
  std::optional<double> peer_ms;
  std::string peer_ffn_gelu;           // that mode's ffn_gelu ("tanh": not the exact GELU asked for)
  bool peer_oom = false;               // no ok mode, and PyTorch ran out of memory
  std::optional<double> ratio;         // auto_ms / peer_ms: below 1, auto is faster
};

// Per auto row of `r`, in case order then fp16, bf16, fp32 (tf32 before ieee). A peer row whose
// case name differs from the results' for its case id is ConfigError naming file and line: the
// peer file was measured on other cases.
std::vector<Comparison> compare_auto(const results::Results& r, const PeerFile& f);

// case_id,case_name,dtype,math,auto_choice,auto_ms,pytorch_mode,pytorch_ms,auto_over_pytorch,
// pytorch_ffn_gelu
std::string comparison_csv(const std::vector<Comparison>& c);

// The same as JSON, for `tlbench report --json`: {"file", "versions", "rows": [{case_id,
// case_name, dtype, math, auto_choice, auto_ms, pytorch_mode, pytorch_ms, pytorch_oom,
// auto_over_pytorch, pytorch_ffn_gelu}], "timed_in_bursts"}, null for what is not known.
std::string comparison_json(const std::vector<Comparison>& c, const PeerFile& f);

// Per dtype and math: the geometric mean of auto / PyTorch, the worst case, and the cases where
// PyTorch is faster; a note first where the file was timed in bursts, and one where PyTorch's
// fastest mode computed the tanh GELU on a case that asks for the exact one.
void print_comparison(const std::vector<Comparison>& c, const PeerFile& f, std::FILE* out);

}  // namespace tlb::peer
