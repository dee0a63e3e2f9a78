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
  std::vector<int> devices;             // device ordinals as this process sees them (its own
                                        // CUDA_VISIBLE_DEVICES applies: ordinal d is its d-th entry)
  std::string out_dir;                  // the merged folder (must not exist)
  std::vector<std::string> child_args;  // `tlbench run` arguments every shard takes
  bool resume = false;                  // continue the shards of <out>-shards
  // With resume: "--config", path and/or "--techniques", path as given, where the run's files
  // are now; passed on to every shard (resumed, or started afresh from fanout.json's arguments).
  std::vector<std::string> resume_files;
  // --time-limit: this invocation's wall time in seconds (0: none). Every shard's process is
  // given what is left of it when it starts (shards wait for a free device), none is started
  // with less than kFanoutMinShardSeconds left, and fanout.json does not keep it.
  double time_limit_s = 0;
  std::string self;                     // this executable
  std::string command_line;             // for the merged run.json
};

inline constexpr double kFanoutMinShardSeconds = 60;

// "0,2,3" (distinct non-negative ordinals below `available` when it is >= 0) or "all" (0 ..
// available-1). ConfigError naming --devices and the problem.
std::vector<int> parse_devices(const std::string& spec, int available);

// Where the shards of a fanned-out run live: "<out>-shards".
std::string shards_dir_of(const std::string& out_dir);

// What CUDA_VISIBLE_DEVICES a child on ordinal `d` gets: the d-th entry of `parent_visible`
// (this process's CUDA_VISIBLE_DEVICES, comma-separated ordinals, UUIDs or MIG names) where it
// is set, else d itself. ConfigError when d is past its end.
std::string child_visible_devices(int d, const char* parent_visible);

// Runs (or continues) the shards and merges them; returns the exit code: that of the merged
// points (0, 1 when a point failed the golden criterion, 3 when one could not run) once every
// shard is complete, else the first incomplete shard's (130 when interrupted). Bad input (an
// existing --out, a shards folder that is not what a resume expects, a device past the visible
// ones) is ConfigError before anything starts.
int run_fanout(const FanoutOptions& opt);

}  // namespace tlb
