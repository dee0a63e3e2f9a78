// `tlbench merge SHARD_DIR... --out DIR`: the folders of `tlbench run --shard i/n` into one
// results folder, as if one run had measured it (ablation/merge.hpp). Needs no GPU. Exit 2,
// nothing written, where the shards are not the whole of one plan.
#include <fmt/core.h>

#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "merge.hpp"

namespace {

std::string merge_command_line(const tlb::MergeOptions& o) {
  std::string s = "tlbench merge";
  for (const std::string& d : o.shard_dirs) s += " " + d;
  s += " --out " + o.out_dir;
  if (o.allow_mixed_gpus) s += " --allow-mixed-gpus";
  return s;
}

const bool kRegistered = tlb::cli::register_command(25, [](CLI::App& root, int& rc) {
  auto o = std::make_shared<tlb::MergeOptions>();
  CLI::App* cmd = root.add_subcommand(
      "merge", "Merge the folders of run --shard i/n into one results folder (no GPU needed)");
  cmd->add_option("shards", o->shard_dirs, "the shards' results folders, every shard of the plan once")
      ->required();
  cmd->add_option("--out", o->out_dir, "merged results folder; must not exist")->required();
  cmd->add_flag("--allow-mixed-gpus", o->allow_mixed_gpus,
                "merge shards measured on different GPU models (recorded in run.json)");
  cmd->callback([o, &rc]() {
    o->command_line = merge_command_line(*o);
    const tlb::MergeOutcome m = tlb::merge_shards(*o);
    fmt::print(stderr, "tlbench merge: {} shards, {} points of {} (case, dtype) groups into {}{}\n", m.shards,
               m.points, m.groups, o->out_dir, m.mixed_gpus ? " (mixed GPUs)" : "");
    rc = tlb::cli::kOk;
  });
});

}  // namespace
