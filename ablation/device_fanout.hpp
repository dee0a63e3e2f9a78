// `tlbench run --devices 0,1,...|all`: the grid over every listed GPU of one host. The parent
// cuts the plan into one shard per device (run --shard i/n: whole (case, dtype) groups), runs
// one child `tlbench run` per shard with CUDA_VISIBLE_DEVICES set to its device, all at once,
// shows their progress on one line, and merges the shards into --out once every one is
// complete (tlbench merge). The shards live beside it in <out>-shards/shard<i> with their
// logs (shard<i>.log); a shard that fails leaves the others' points on disk, and
// `tlbench run --resume <out> --devices ...` continues the incomplete shards and merges.
#pragma once

#include <string>
#include <vector>

namespace tlb {

struct FanoutOptions {
  std::vector<int> devices;             // CUDA device ordinals; shard i runs on devices[(i-1) % size]
  std::string out_dir;                  // the merged folder (must not exist)
  std::vector<std::string> child_args;  // `tlbench run` arguments every shard takes
  bool resume = false;                  // continue the shards of <out>-shards
  std::string self;                     // this executable
  std::string command_line;             // for the merged run.json
};

// "0,2,3" (distinct non-negative ordinals below `available` when it is >= 0) or "all" (0 ..
// available-1). ConfigError naming --devices and the problem.
std::vector<int> parse_devices(const std::string& spec, int available);

// Where the shards of a fanned-out run live: "<out>-shards".
std::string shards_dir_of(const std::string& out_dir);

// Runs (or continues) the shards and merges them; returns the exit code: 0, 1 when a shard's
// points failed the golden criterion (the merge still happens), a failed shard's own code (the
// merge does not), 130 when interrupted. Bad input (an existing --out, a shards folder that
// is not what a resume expects) is ConfigError before anything starts.
int run_fanout(const FanoutOptions& opt);

}  // namespace tlb
