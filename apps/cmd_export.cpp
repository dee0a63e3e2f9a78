// `tlbench export`: one case as a safetensors file PyTorch can load (weights under
// torch.nn.TransformerEncoder's state_dict names, input, reference and golden outputs).
#include <fmt/core.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>

#include "commands.hpp"
#include "config.hpp"
#include "export.hpp"
#include "grid.hpp"
#include "output_files.hpp"

namespace {

struct ExportArgs {
  int case_id = 0;
  std::string dtype;
  std::string out;
  std::string config = "configs/cases.json";
  std::string seed = std::to_string(tlb::kDefaultRunSeed);
  bool no_outputs = false;
};

const tlb::CaseSpec& find_case(const tlb::CaseSet& set, int id) {
  std::string ids;
  for (const tlb::CaseSpec& c : set.cases) {
    if (c.id == id) return c;
    ids += (ids.empty() ? "" : ", ") + std::to_string(c.id);
  }
  throw tlb::ConfigError(fmt::format("{}: no case with id {} (ids: {})", set.source, id, ids));
}

const bool kRegistered = tlb::cli::register_command(30, [](CLI::App& root, int& rc) {
  auto args = std::make_shared<ExportArgs>();
  CLI::App* cmd = root.add_subcommand(
      "export",
      "Write one case as safetensors: weights under torch.nn.TransformerEncoder's state_dict "
      "names, input, reference and golden outputs (check with scripts/check_pytorch.py)");
  cmd->add_option("--case", args->case_id, "case id in the cases file")->required();
  cmd->add_option("--dtype", args->dtype, "fp16, bf16 or fp32")->required();
  cmd->add_option("-o,--out", args->out, "output file (.safetensors)")->required();
  cmd->add_option("--config", args->config, "cases file")->capture_default_str();
  cmd->add_option("--seed", args->seed, "run seed: seeds the data of a case that sets no seed")
      ->capture_default_str();
  cmd->add_flag("--no-outputs", args->no_outputs,
                "weights and input only (no GPU needed); no reference or golden output");
  cmd->callback([args, &rc]() {
    const uint64_t seed = tlb::cli::parse_seed(args->seed);
    tlb::DType dtype;
    if (!tlb::parse_dtype(args->dtype, dtype))
      throw tlb::ConfigError("--dtype: unknown dtype '" + args->dtype + "' (fp16, bf16 or fp32)");
    if (args->out == "-")
      throw tlb::ConfigError("-o -: export writes a .safetensors file, not standard output; name a file");
    tlb::check_output_target(args->out);  // before any work: a bad target costs nothing
    const tlb::CaseSet cases = tlb::load_cases(args->config);
    const tlb::CaseSpec& c = find_case(cases, args->case_id);
    tlb::ExportOptions opt;
    opt.dtype = dtype;
    opt.run_seed = seed;
    opt.with_outputs = !args->no_outputs;
    const tlb::ExportSummary s = tlb::export_case(c, opt, args->out);
    fmt::print("wrote {}: case {} ({}) {} seed {}, {} tensors, {:.1f} MB\n", s.path, c.id, c.name,
               tlb::to_string(dtype), s.seed, s.tensors, static_cast<double>(s.file_bytes) / 1e6);
    if (!args->no_outputs) {
      if (!s.reference_source.empty())
        fmt::print("reference_output: {}; rel-L2 vs golden {:.3e}\n", s.reference_source,
                   s.reference_vs_golden_rel_l2);
      else
        fmt::print("reference_output omitted: {}\n", s.reference_omitted);
    }
    rc = tlb::cli::kOk;
  });
});

}  // namespace
