// `tlbench report DIR`: re-analyses a results folder from its points.jsonl (no GPU needed):
// matrices, heatmap and bar-chart data, effects and best configurations per dtype, the
// dispatch table of --policy auto and, where the folder holds PyTorch's peer_pytorch.jsonl, the
// auto rows against PyTorch's fastest mode, written to DIR/analysis (or --out) with a short
// summary on stdout.
#include <fmt/core.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "analysis.hpp"
#include "commands.hpp"
#include "config.hpp"
#include "dispatch_table.hpp"
#include "peer_compare.hpp"
#include "results_reader.hpp"

namespace {

struct ReportArgs {
  std::string dir;
  std::string out;
  bool json = false;
  bool quiet = false;
};

const bool kRegistered = tlb::cli::register_command(60, [](CLI::App& root, int& rc) {
  auto args = std::make_shared<ReportArgs>();
  CLI::App* cmd = root.add_subcommand(
      "report", "Re-analyse a results folder: matrices, heatmap and effects data per dtype, and "
             "its dispatch table");
  cmd->add_option("dir", args->dir, "results folder (holds points.jsonl and run.json)")
      ->required();
  cmd->add_option("--out", args->out, "where the analysis goes (default: DIR/analysis)");
  cmd->add_flag("--json", args->json, "print the summary as JSON instead of tables");
  cmd->add_flag("--quiet", args->quiet, "write the files, print nothing");
  cmd->callback([args, &rc]() {
    const tlb::results::Results results = tlb::results::read_results(args->dir);
    const std::optional<tlb::peer::PeerFile> peer = tlb::peer::read_peer_file(args->dir);
    const tlb::analysis::Analysis analysis = tlb::analysis::analyze(results);
    const std::string out =
        args->out.empty() ? (std::filesystem::path(args->dir) / "analysis").string() : args->out;
    // The dispatch table of these results, beside the analysis (`tlbench run --policy auto
    // --dispatch-table` takes it). Results it cannot be built from still get their analysis.
    std::vector<std::pair<std::string, std::string>> also;
    try {
      also.emplace_back("dispatch_table.json", tlb::dispatch_table_json(tlb::build_dispatch_table(results)));
    } catch (const tlb::ConfigError& e) {
      fmt::print(stderr, "tlbench: note: no dispatch table written: {}\n", e.what());
    }
    std::vector<tlb::peer::Comparison> against_pytorch;
    if (peer) {
      against_pytorch = tlb::peer::compare_auto(results, *peer);
      also.emplace_back("pytorch_comparison.csv", tlb::peer::comparison_csv(against_pytorch));
    }
    const auto files = tlb::analysis::write_analysis(analysis, out, also);
    if (args->json) {
      // The summary, with PyTorch beside auto where the folder has a peer file.
      nlohmann::json doc = nlohmann::json::parse(tlb::analysis::summary_json(analysis));
      if (peer) doc["pytorch"] = nlohmann::json::parse(tlb::peer::comparison_json(against_pytorch, *peer));
      fmt::print("{}\n", doc.dump());
    } else if (!args->quiet) {
      tlb::analysis::print_summary(analysis, stdout);
      if (peer) tlb::peer::print_comparison(against_pytorch, *peer, stdout);
      fmt::print("\n{} files written to {}; charts: python3 scripts/plot_results.py {}\n",
                 files.size(), out, out);
    }
    rc = tlb::cli::kOk;
  });
});

}  // namespace
