// `tlbench info`: the device and library versions results depend on (the same record every
// run.json carries).
#include <fmt/core.h>

#include <memory>
#include <string>

#include "commands.hpp"
#include "provenance.hpp"
#include "text.hpp"

namespace {

const bool kRegistered = tlb::cli::register_command(40, [](CLI::App& root, int& rc) {
  auto as_json = std::make_shared<bool>(false);
  CLI::App* cmd = root.add_subcommand("info", "Device, clocks, memory and library versions");
  cmd->add_flag("--json", *as_json, "print a JSON document");
  cmd->callback([as_json, &rc]() {
    const nlohmann::json tool = tlb::tool_json();
    std::string why;
    if (!tlb::cuda_device_present(&why)) {
      if (*as_json) {
        fmt::print("{}\n", nlohmann::json{{"tool", tool}, {"device", nullptr}, {"error", why}}.dump(2));
      } else {
        fmt::print("tlbench {} (git {})\n", tool["version"].get<std::string>(),
                   tool["git_commit"].get<std::string>());
      }
      fmt::print(stderr, "{}\n", why);
      rc = tlb::cli::kDevice;
      return;
    }
    const tlb::DeviceInfo d = tlb::query_device(0);
    const nlohmann::json dj = tlb::to_json(d);
    const nlohmann::json host = tlb::host_json(0);
    if (*as_json) {
      fmt::print("{}\n", nlohmann::json{{"tool", tool}, {"device", dj}, {"host", host}}.dump(2));
      rc = tlb::cli::kOk;
      return;
    }
    fmt::print("tlbench            {} (git {})\n", tool["version"].get<std::string>(),
               tool["git_commit"].get<std::string>());
    fmt::print("device 0           {} ({})\n", d.name, d.uuid);
    fmt::print("compute capability {}.{}, {} SMs\n", d.cc_major, d.cc_minor, d.sm_count);
    fmt::print("memory             {:.1f} GiB total, {:.1f} GiB free, ECC {}\n",
               d.memory_total / tlb::kBytesPerGiB, d.memory_free / tlb::kBytesPerGiB, d.ecc ? "on" : "off");
    fmt::print("L2 cache           {:.1f} MiB\n", d.l2_bytes / (1024.0 * 1024.0));
    fmt::print("clocks (peak)      SM {:.0f} MHz, memory {:.0f} MHz x {}-bit ({:.0f} GB/s)\n",
               d.sm_clock_khz / 1000.0, d.memory_clock_khz / 1000.0, d.memory_bus_bits,
               dj["memory_bandwidth_peak_gb_s"].get<double>());
    fmt::print("driver / runtime   CUDA {} / CUDA {}\n", tlb::cuda_version_string(d.driver_version),
               tlb::cuda_version_string(d.runtime_version));
    fmt::print("cuBLAS             {}.{}.{}\n", d.cublas_major, d.cublas_minor, d.cublas_patch);
    const std::string pdl = d.pdl_mode == "all"       ? "on for every kernel (TLBENCH_PDL=all)"
                            : d.pdl_mode == "default" ? "on but for long persistent GEMMs (TLBENCH_PDL=all: "
                                                        "every kernel, 0: off)"
                                                      : "off";
    fmt::print("kernel launch      PDL {}, GEMM variants {}, GEMM epilogue stores {}\n", pdl, d.gemm_variant,
               d.gemm_store);
    auto text = [](const nlohmann::json& v) { return v.is_null() ? std::string("?") : v.dump(); };
    fmt::print("host               {}, {} CPUs ({} allowed), on CPU {} (NUMA node {}), GPU on NUMA node {}, "
               "load {}\n",
               host["cpu_model"].is_string() ? host["cpu_model"].get<std::string>() : std::string("?"),
               text(host["logical_cpus"]), text(host["cpus_allowed"]), text(host["on_cpu"]),
               text(host["cpu_numa_node"]), text(host["gpu_numa_node"]), text(host["load_average_1min"]));
    rc = tlb::cli::kOk;
  });
});

}  // namespace
