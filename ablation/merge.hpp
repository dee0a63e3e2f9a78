// `tlbench merge`: the folders of a sweep's shards (run --shard i/n) into one results folder, as
// if one run had measured it, so gate, report and dispatch read it unchanged. Refused (one line,
// ConfigError, nothing written) unless the shards come from one plan (the same tool commit and
// version, cases and techniques files by fingerprint, techniques, cases, options, seed, mode,
// dispatch table and shard count), every shard 1..n is given once and is complete with its
// planned points on disk, the shards' groups are disjoint, every row lies in its shard's
// groups and no point appears twice, and the GPUs agree in name (unless allow_mixed_gpus).
//
// The merged folder holds what a run leaves: points.jsonl (each shard's lines byte for byte,
// in the plan's order: groups by the case's place in the cases file, then fp16, bf16, fp32,
// each group's rows in its shard's file order, which is the run's seeded order), points.csv
// and the matrices rebuilt from those rows, and run.json: shard 1's record made whole (state
// complete, the whole grid, every group, the point counts) with each shard's device, clocks,
// memory budget and time span in $.shards, its segments in $.segments and the merge in $.merge.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace tlb {

struct MergeOptions {
  std::vector<std::string> shard_dirs;
  std::string out_dir;  // must not exist
  bool allow_mixed_gpus = false;
  std::string command_line;  // for run.json
};

struct MergeOutcome {
  size_t shards = 0, points = 0, groups = 0;
  bool mixed_gpus = false;
};

MergeOutcome merge_shards(const MergeOptions& opt);

}  // namespace tlb
