// `tlbench explain`: one case's forward, stage by stage, against each stage's floor at the
// ceilings measured on this GPU (ablation/explain.hpp). Options are checked against the cases
// file before a device is asked for.
#include <fmt/core.h>

#include <algorithm>
#include <memory>
#include <string>

#include "commands.hpp"
#include "explain.hpp"
#include "output_files.hpp"
#include "provenance.hpp"
#include "text.hpp"

namespace {

struct ExplainArgs {
  tlb::ExplainOptions opt;
  std::string dtype = "fp16", fp32_math = "tf32", configs, seed = std::to_string(tlb::kDefaultRunSeed), json_out;
  bool json = false;
};

const bool kRegistered = tlb::cli::register_command(35, [](CLI::App& root, int& rc) {
  auto a = std::make_shared<ExplainArgs>();
  CLI::App* cmd = root.add_subcommand(
      "explain", "Where one case's forward goes, stage by stage, beside each stage's floor on this GPU");
  cmd->add_option("--config", a->opt.cases_path, "cases file (cases.json)")->required();
  cmd->add_option("--case", a->opt.case_id, "the case's id")->required();
  cmd->add_option("--dtype", a->dtype, "fp16, bf16 or fp32")->capture_default_str();
  cmd->add_option("--configs", a->configs,
                  "configurations, comma-separated: bit strings of the five techniques (e.g. 11111) or auto")
      ->required();
  cmd->add_option("--fp32-math", a->fp32_math, "fp32's fused-path math: tf32 or ieee")->capture_default_str();
  cmd->add_option("--seed", a->seed, "seed of the data where the case sets none")->capture_default_str();
  cmd->add_option("--reps", a->opt.reps, "timed repetitions per figure (default: what fits in about 0.3 s, 5 to 50)");
  cmd->add_option("--ceilings", a->opt.ceilings_path,
                  "ceilings file of this device (read where it holds this device and math, else measured and "
                  "written; e.g. a results folder's ceilings.json)");
  cmd->add_option("--json-out", a->json_out, "also write the figures as JSON to this file");
  cmd->add_flag("--json", a->json, "print JSON instead of the table");
  cmd->callback([a, &rc]() {
    tlb::ExplainOptions& o = a->opt;
    if (!tlb::parse_dtype(a->dtype, o.dtype))
      throw tlb::ConfigError("--dtype " + a->dtype + ": expected fp16, bf16 or fp32");
    if (!tlb::parse_fp32_math(a->fp32_math, o.fp32_math))
      throw tlb::ConfigError("--fp32-math " + a->fp32_math + ": expected tf32 or ieee");
    if (o.reps < 0) throw tlb::ConfigError(fmt::format("--reps {}: expected a positive integer", o.reps));
    o.seed = tlb::cli::parse_seed(a->seed);
    o.configs.clear();
    for (size_t at = 0; at <= a->configs.size();) {
      const size_t comma = std::min(a->configs.find(',', at), a->configs.size());
      o.configs.push_back(a->configs.substr(at, comma - at));
      at = comma + 1;
    }
    if (!a->json_out.empty()) tlb::check_output_target(a->json_out);
    if (!o.ceilings_path.empty()) tlb::check_output_target(o.ceilings_path);
    tlb::check_explain_options(o);
    std::string why;
    if (!tlb::cuda_device_present(&why)) {
      fmt::print(stderr, "tlbench: explain needs a CUDA device: {}\n", why);
      rc = tlb::cli::kDevice;
      return;
    }
    const tlb::Explanation e = tlb::run_explain(o);
    const nlohmann::json doc = tlb::explanation_json(e);
    if (!a->json_out.empty()) tlb::write_file_atomic(a->json_out, doc.dump(2) + "\n");
    if (a->json)
      fmt::print("{}\n", doc.dump(2));
    else
      tlb::print_explanation(e, stdout);
    rc = tlb::cli::kOk;
  });
});

}  // namespace
