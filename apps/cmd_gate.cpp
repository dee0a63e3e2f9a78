// `tlbench gate`: checks a results folder against a thresholds file (speedup floors, best
// configuration per case, regression against a baseline run, accuracy, allowed nonviable
// points), after checking that the folder holds its whole run once (gate_integrity.hpp). Exit 0
// when every rule holds, 1 with a table of violations otherwise, 2 when the thresholds or
// results cannot be read or the verdict cannot be written.
#include <fmt/core.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <system_error>
#include <optional>
#include <string>

#include "commands.hpp"
#include "config.hpp"
#include "gate.hpp"
#include "results_reader.hpp"

namespace {

struct GateArgs {
  std::string results;
  std::string thresholds;
  std::string baseline;
  bool json = false;
};

const bool kRegistered = tlb::cli::register_command(50, [](CLI::App& root, int& rc) {
  auto args = std::make_shared<GateArgs>();
  CLI::App* cmd = root.add_subcommand(
      "gate", "Check a results folder against thresholds; exit 1 listing every violation");
  cmd->add_option("--results", args->results, "results folder (holds points.jsonl)")->required();
  cmd->add_option("--thresholds", args->thresholds, "thresholds file, e.g. configs/gates.json")
      ->required();
  cmd->add_option("--baseline", args->baseline,
                  "an earlier results folder: speedups may not regress past max_regression_pct");
  cmd->add_flag("--json", args->json, "print the verdict and violations as JSON");
  cmd->callback([args, &rc]() {
    // The thresholds are read first: a broken file is a usage error whatever the results say.
    const tlb::gate::Thresholds thresholds = tlb::gate::load_thresholds(args->thresholds);
    const tlb::results::Results results = tlb::results::read_results(args->results);
    std::optional<tlb::results::Results> baseline;
    if (!args->baseline.empty()) baseline = tlb::results::read_results(args->baseline);
    const tlb::gate::GateReport report =
        tlb::gate::run_gate(thresholds, results, baseline ? &*baseline : nullptr);
    // A verdict nobody could read is no pass: a CI step must not go green on a full disk. A
    // long table fails inside the printing, a short one only when flushed.
    try {
      if (args->json)
        fmt::print("{}\n", tlb::gate::report_json(report));
      else
        tlb::gate::print_report(report, stdout);
      if (std::fflush(stdout) != 0 || std::ferror(stdout)) throw std::system_error(errno, std::generic_category());
    } catch (const std::system_error& e) {
      throw tlb::ConfigError("gate: cannot write the verdict to standard output: " + e.code().message());
    }
    rc = report.passed() ? tlb::cli::kOk : tlb::cli::kGateOrAccuracyFailure;
  });
});

}  // namespace
