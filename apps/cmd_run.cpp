// `tlbench run`: parses the options and hands them to the runner (ablation/runner.hpp).
// Exit codes (docs/design.md §7): 0 ok, 1 a measured point failed the golden accuracy
// criterion, 2 usage/config error (nothing written), 3 device failure, 130 interrupted, 75
// stopped by --time-limit (resume it).
#include <fmt/core.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include <algorithm>
#include <filesystem>

#include "commands.hpp"
#include "common/cuda_check.hpp"
#include "config.hpp"
#include "device_fanout.hpp"
#include "grid.hpp"
#include "runner.hpp"
#include "shard.hpp"
#include "time_limit.hpp"
#include "writers.hpp"

namespace {

// The options as given, as arguments (CLI11 keeps no argv per subcommand), leaving out those
// named in `skip`.
std::vector<std::string> typed_args(const CLI::App& cmd, const std::vector<std::string>& skip = {}) {
  std::vector<std::string> typed;
  for (const CLI::Option* opt : cmd.get_options()) {
    if (opt->count() == 0 || opt->get_name() == "--help") continue;
    if (std::find(skip.begin(), skip.end(), opt->get_name()) != skip.end()) continue;
    if (opt->get_type_size() == 0) {
      typed.push_back(opt->get_name());
      continue;
    }
    for (const std::string& v : opt->results()) {
      typed.push_back(opt->get_name());
      typed.push_back(v);
    }
  }
  return typed;
}

std::string join_command_line(const std::vector<std::string>& args) {
  std::string s = "tlbench run";
  for (const std::string& a : args) {
    const bool plain = !a.empty() && a.find_first_of(" \t\"'\\$`") == std::string::npos;
    s += ' ';
    if (plain) {
      s += a;
    } else {
      s += '\'';
      for (char c : a) s += c == '\'' ? std::string("'\\''") : std::string(1, c);
      s += '\'';
    }
  }
  return s;
}

// The options as given, for run.json and resume notes.
std::string typed_command_line(const CLI::App& cmd) { return join_command_line(typed_args(cmd)); }

// This executable, for the children of --devices.
std::string self_executable() {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw tlb::ConfigError("--devices: cannot tell where this tlbench binary is (/proc/self/exe: " + ec.message() + ")");
  return p.string();
}

// How many devices this process sees; none is a device failure, with CUDA's reason.
int visible_devices() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess)
    throw tlb::DeviceError(fmt::format("--devices all: no CUDA device: {} ({})", cudaGetErrorString(e),
                                       cudaGetErrorName(e)), false);
  if (n == 0) throw tlb::DeviceError("--devices all: no CUDA device is visible here", false);
  return n;
}

// A resume takes the run's own options from `record` (its run.json): every other option given (but those
// in `taken`, --json and --config / --techniques, which say where the run's files are now) is
// named as ignored.
void note_ignored_on_resume(const CLI::App& cmd, const std::string& record, const std::vector<const CLI::Option*>& taken) {
  for (const CLI::Option* opt : cmd.get_options()) {
    const std::string name = opt->get_name();
    if (opt->count() == 0 || std::find(taken.begin(), taken.end(), opt) != taken.end()) continue;
    if (name == "--json" || name == "--help" || name == "--config" || name == "--techniques") continue;
    fmt::print(stderr, "tlbench: note: --resume takes every option from {}; ignoring {}\n", record, name);
  }
}

struct RunArgs {
  tlb::RunOptions opt;
  std::string out, resume, fp32_math = "tf32", seed, shard, devices, time_limit;
};

// What resolve_defaults cannot see: a count or budget given as 0 or below (it reads 0 as "the
// mode's default"), and a seed that is not a 64-bit unsigned integer (parsed, not wrapped).
void check_numeric_options(const CLI::App& cmd, RunArgs& a) {
  tlb::RunOptions& o = a.opt;
  tlb::cli::check_timing_options(cmd, o);
  if (cmd.get_option("--seed")->count() > 0) o.seed = tlb::cli::parse_seed(a.seed);
}

const bool kRegistered = tlb::cli::register_command(20, [](CLI::App& root, int& rc) {
  auto a = std::make_shared<RunArgs>();
  tlb::RunOptions& o = a->opt;
  CLI::App* cmd = root.add_subcommand(
      "run", "Measure the grid: every configuration against the reference, paired (ABBA), with "
             "accuracy checks; results written point by point");
  CLI::Option* config = cmd->add_option("--config", o.cases_path, "cases file (cases.json)");
  cmd->add_option("--techniques", o.techniques_path,
                  "techniques file (default: techniques.json beside --config, else the built-in five)");
  cmd->add_option("--dtypes", o.dtypes_sel, "fp16,bf16,fp32 (default: each case's own)");
  cmd->add_option("--cases", o.cases_sel, "case ids and ranges, e.g. 1-5,9 (default: all)");
  cmd->add_option("--configs", o.configs_sel,
                  "configuration patterns over 0/1/x, one character per technique, e.g. 11000,1xxxx; "
                  "auto for the dispatcher's point");
  CLI::Option* out = cmd->add_option("--out", a->out, "output folder; must not exist (default: runs/<UTC time>)");
  CLI::Option* resume = cmd->add_option(
      "--resume", a->resume,
      "continue the run in this folder with its recorded options (with --config / --techniques: "
      "where its files are now, when the folder has moved)");
  cmd->add_flag("--quick", o.quick,
                "smoke run in about a minute: a 25 ms budget per point and, without --configs, "
                "each technique alone and all together");
  cmd->add_option("--policy", o.policy,
                  "case (each case's own E/F policy) or auto (adds a point per case and dtype "
                  "whose configuration the dispatch table chooses: the \"auto\" row)")
      ->capture_default_str();
  cmd->add_option("--dispatch-table", o.dispatch_table,
                  "dispatch table for auto points (tlbench dispatch; default: the built-in one)");
  cmd->add_option("--seed", a->seed, "seed of the configuration order and of the data (0 .. 2^64-1)")
      ->default_str(std::to_string(tlb::kDefaultRunSeed));
  cmd->add_option("--fp32-math", a->fp32_math, "fp32 math of the fused path: tf32 or ieee")
      ->capture_default_str();
  cmd->add_flag("--l2-flush", o.l2_flush, "flush the L2 cache before every timed run (cold)");
  cmd->add_flag("--aa", o.aa, "A/A: time the reference against itself per case and dtype (noise floor)");
  cmd->add_flag("--layer-trace", o.layer_trace, "record each layer's rel-L2 error against the golden");
  cmd->add_flag("--stage-times", o.stage_times,
                "record each point's per-stage times and each stage's floor at this GPU's ceilings "
                "(measured once per dtype and math, kept in <out>/ceilings.json)");
  CLI::Option* stage_configs_opt = cmd->add_option(
      "--stage-times-configs", o.stage_times_configs,
      "--stage-times for these points only: configuration patterns and auto (00000,auto: the reference and "
      "the dispatcher's point, what the stage breakdown chart shows); implies --stage-times");
  cmd->add_option("--atol", o.tol.atol, "strict criterion: absolute tolerance")->capture_default_str();
  cmd->add_option("--rtol", o.tol.rtol, "strict criterion: relative tolerance")->capture_default_str();
  tlb::cli::add_timing_options(*cmd, o);
  cmd->add_option("--mem-reserve-mib", o.memory_margin_mib,
                  "device memory left unused under the free memory at start (shared GPUs)")
      ->capture_default_str();
  cmd->add_flag("--json", o.json, "print a summary JSON document on stdout at the end");
  CLI::Option* shard_opt = cmd->add_option("--shard", a->shard,
                  "measure shard i of n (1-based; whole case/dtype groups, balanced by the plan's "
                  "time model); default: from Slurm array, Kubernetes Indexed Job "
                  "(TLBENCH_SHARD_COUNT) or torchrun variables, else the whole grid");
  CLI::Option* time_limit_opt = cmd->add_option(
      "--time-limit", a->time_limit,
      "wall time this process may take (540, 9m, 1.5h): groups that would not fit are left for "
      "--resume, and at the limit the group being measured is abandoned; exit 75 when it stopped the run");
  CLI::Option* devices_opt = cmd->add_option(
      "--devices", a->devices,
      "run on these GPUs of this host at once (0,1,... or all): one shard each, in <out>-shards, merged "
      "into --out; with --resume, continue such a run");

  cmd->callback([a, cmd, config, out, resume, shard_opt, devices_opt, time_limit_opt, stage_configs_opt, &rc]() {
    tlb::RunOptions& o = a->opt;
    if (stage_configs_opt->count() > 0) o.stage_times = true;  // an empty value is refused with every option's
    std::optional<tlb::ShardSpec> shard;
    o.command_line = typed_command_line(*cmd);
    if (time_limit_opt->count() > 0) o.time_limit_s = tlb::parse_duration_seconds(a->time_limit, "--time-limit");
    if (devices_opt->count() > 0) {
      if (shard_opt->count() > 0)
        throw tlb::ConfigError("--devices and --shard exclude each other: --devices cuts the grid into one shard "
                               "per device");
      if (o.json)
        throw tlb::ConfigError("--devices and --json exclude each other: each shard's summary is in its log; "
                               "tlbench report reads the merged folder");
      tlb::FanoutOptions f;
      f.devices = tlb::parse_devices(a->devices, a->devices == "all" ? visible_devices() : -1);
      f.self = self_executable();
      f.command_line = o.command_line;
      f.time_limit_s = o.time_limit_s;
      if (resume->count() > 0) {
        if (out->count() > 0)
          throw tlb::ConfigError("--out and --resume exclude each other: --resume continues the folder it names");
        f.out_dir = a->resume;
        f.resume = true;
        // As for any resume: --config and --techniques say where the run's files are now.
        note_ignored_on_resume(*cmd, tlb::shards_dir_of(a->resume) + "/fanout.json",
                               {resume, devices_opt, time_limit_opt});
        for (const char* name : {"--config", "--techniques"})
          if (const CLI::Option* opt = cmd->get_option(name); opt->count() > 0)
            f.resume_files.insert(f.resume_files.end(), {name, opt->results().front()});
      } else {
        check_numeric_options(*cmd, *a);
        if (config->count() == 0) throw tlb::ConfigError("run: --config is required (or --resume DIR to continue a run)");
        if (!tlb::parse_fp32_math(a->fp32_math, o.fp32_math))
          throw tlb::ConfigError(fmt::format("--fp32-math \"{}\": expected tf32 or ieee", a->fp32_math));
        // The shards' inputs are checked here, once, before any child or file exists.
        tlb::load_run_inputs(o);
        f.out_dir = out->count() > 0 ? a->out : "runs/" + tlb::utc_now("%Y%m%d-%H%M%S");
        f.child_args = typed_args(*cmd, {"--devices", "--out", "--shard", "--json", "--time-limit"});
      }
      rc = tlb::run_fanout(f);
      return;
    }
    if (resume->count() > 0) {
      if (out->count() > 0)
        throw tlb::ConfigError("--out and --resume exclude each other: --resume continues the "
                               "folder it names");
      // --config and --techniques name where the run's files are now (checked by fingerprint).
      note_ignored_on_resume(*cmd, a->resume + "/run.json", {resume, time_limit_opt});
      o.out_dir = a->resume;
      o.resume = true;
    } else {
      check_numeric_options(*cmd, *a);
      if (config->count() == 0)
        throw tlb::ConfigError("run: --config is required (or --resume DIR to continue a run)");
      o.out_dir = a->out;
      if (!tlb::parse_fp32_math(a->fp32_math, o.fp32_math))
        throw tlb::ConfigError(
            fmt::format("--fp32-math \"{}\": expected tf32 or ieee", a->fp32_math));
      // Before any device work: a malformed --shard or scheduler variable is exit 2.
      shard = tlb::resolve_shard(shard_opt->count() > 0 ? std::optional<std::string>(a->shard) : std::nullopt,
                                 [](const char* name) { return std::getenv(name); });
    }
    rc = tlb::run_command(o, shard);
  });
});

}  // namespace
