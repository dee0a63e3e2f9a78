// How our kernels are launched on the current device: programmatic dependent launch (PDL,
// compute capability 9.0+) lets a kernel's CTAs start and set up while the kernel before it
// drains; the kernel waits (ptx::pdl_wait) before it touches memory that kernel wrote.
#pragma once

namespace tlb {

// True when our launches on the current device may carry the PDL attribute: compute
// capability 9.0 or later, running code built for sm_90 or later (the kernels' wait exists
// only there), and TLBENCH_PDL not "0" (the switch exists to measure what PDL buys). Every
// kernel then carries it but the persistent GEMM's long grids (its pdl_for_grid).
bool pdl_enabled();

// While one lives, pdl_enabled() is false on every device: the launches made (and the graphs
// captured) meanwhile run each kernel after its predecessor has drained. Stage timing needs
// that: an event between two stages ends their overlap anyway, so the forward it is set
// against must run without it too (`tlbench explain`). Not for concurrent use with launches
// that should keep PDL.
class PdlSuspension {
 public:
  PdlSuspension();
  ~PdlSuspension();
  PdlSuspension(const PdlSuspension&) = delete;
  PdlSuspension& operator=(const PdlSuspension&) = delete;
};

// TLBENCH_PDL=all: PDL for every kernel, the long grids of the persistent GEMM included, which
// by default launch after their predecessor drains (gemm_persistent_sm90.cu says why).
bool pdl_for_every_kernel();

// Throws std::invalid_argument naming TLBENCH_PDL where its value is none of 0, all, default
// (or empty); touches no device. The CLI calls it before any command runs.
void check_pdl_setting();

// TLBENCH_PDL as run.json and `tlbench info` report it: "off", "all", or "default".
const char* pdl_mode_name();

// Raises `kernel`'s dynamic shared-memory limit to `bytes` on the current device. The
// attribute belongs to the device's context, so it is set once per kernel and device (a
// second device, or a larger request, sets it again); launchers call this before each launch.
void allow_dynamic_smem(const void* kernel, int bytes);

}  // namespace tlb
