// `tlbench dispatch --results DIR [--results DIR ...] -o FILE`: the dispatch table of one or
// more results folders (per dtype, math and shape, the fastest configuration that passes the
// golden check, with its kernel variants), for `tlbench run --policy auto --dispatch-table FILE`
// or as configs/dispatch.json, the table compiled into the binary. Several folders (the official
// sweep and a run of the other fp32 math beside it) make one table whose entries each name
// their folder. Needs no GPU.
#include <fmt/core.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "dispatch_table.hpp"
#include "results_reader.hpp"

namespace {

struct DispatchArgs {
  std::vector<std::string> results;
  std::string out;
  bool quiet = false;
};

void print_table(const tlb::DispatchTable& t, std::FILE* out) {
  fmt::print(out, "dispatch table from {}: {} entries\n", tlb::dispatch_provenance(t),
             t.entries.size());
  fmt::print(out, "  {:<5} {:<8} {:>4}  {:<20} {:<{}} {:<24} {:>8}  {}\n", "dtype", "math", "case",
             "name", "config", t.techniques.size() + 1, "techniques", "speedup", "strict");
  for (const tlb::DispatchEntry& e : t.entries)
    fmt::print(out, "  {:<5} {:<8} {:>4}  {:<20} {:<{}} {:<24} {:>7.3f}x  {}\n", e.dtype, e.math,
               e.case_id, e.case_name, e.config, t.techniques.size() + 1, e.config_names, e.speedup,
               e.strict_pass ? (*e.strict_pass ? "pass" : "fail") : "-");
  for (const std::string& n : t.notes) fmt::print(out, "  note: {}\n", n);
}

const bool kRegistered = tlb::cli::register_command(65, [](CLI::App& root, int& rc) {
  auto args = std::make_shared<DispatchArgs>();
  CLI::App* cmd = root.add_subcommand(
      "dispatch", "Build the dispatch table of --policy auto from a results folder");
  cmd->add_option("--results", args->results,
                  "results folder (holds points.jsonl and run.json); again for each further folder")
      ->required();
  cmd->add_option("-o,--out", args->out, "where the table goes (JSON; - for stdout)")->required();
  cmd->add_flag("--quiet", args->quiet, "write the table, print nothing");
  cmd->callback([args, &rc]() {
    std::vector<tlb::results::Results> folders;
    for (const std::string& dir : args->results) folders.push_back(tlb::results::read_results(dir));
    const tlb::DispatchTable table = tlb::build_dispatch_table(folders);
    if (args->out == "-") {
      fmt::print("{}", tlb::dispatch_table_json(table));
    } else {
      tlb::write_dispatch_table(table, args->out);
      if (!args->quiet) {
        for (const tlb::results::Results& r : folders)
          for (const std::string& w : r.warnings) fmt::print(stderr, "warning: {}\n", w);
        print_table(table, stdout);
        fmt::print("written to {}\n", args->out);
      }
    }
    rc = tlb::cli::kOk;
  });
});

}  // namespace
