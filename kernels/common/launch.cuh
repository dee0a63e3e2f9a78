// One launcher for our kernels (.cu files only): the PDL attribute where the device has it
// (see launch.hpp) and, for the GEMMs that run in clusters, a thread-block cluster along x;
// and how many such clusters the device runs at once.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "common/cuda_check.hpp"
#include "common/launch.hpp"

namespace tlb {

template <typename... KernelArgs>
void allow_dynamic_smem(void (*kernel)(KernelArgs...), int bytes) {
  allow_dynamic_smem(reinterpret_cast<const void*>(kernel), bytes);
}

// Launches `kernel` with the PDL attribute where `pdl` (never without pdl_enabled()), and a
// thread-block cluster of cluster_x CTAs along x where cluster_x > 1.
template <typename... KernelArgs, typename... Args>
void launch_kernel_with_pdl(bool pdl, void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem_bytes,
                            cudaStream_t stream, unsigned cluster_x, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem_bytes;
  cfg.stream = stream;
  cudaLaunchAttribute attrs[2]{};
  unsigned n = 0;
  if (pdl) {
    attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  if (cluster_x > 1) {
    attrs[n].id = cudaLaunchAttributeClusterDimension;
    attrs[n].val.clusterDim.x = cluster_x;
    attrs[n].val.clusterDim.y = 1;
    attrs[n].val.clusterDim.z = 1;
    ++n;
  }
  cfg.attrs = attrs;
  cfg.numAttrs = n;
  TLB_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

// How many clusters of cluster_x CTAs of `kernel` (blocks of `block`, `smem_bytes` of dynamic
// shared memory, which this allows it first) the current device runs at once. A cluster's CTAs
// share a GPC, so this can be well under SMs / cluster_x.
template <typename... KernelArgs>
int cluster_capacity(void (*kernel)(KernelArgs...), dim3 block, int smem_bytes, unsigned cluster_x) {
  allow_dynamic_smem(kernel, smem_bytes);
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(cluster_x);
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = static_cast<size_t>(smem_bytes);
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = cluster_x;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  int n = 0;
  TLB_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&n, kernel, &cfg));
  return n;
}

// The launch of our kernels: PDL where pdl_enabled().
template <typename... KernelArgs, typename... Args>
void launch_kernel(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem_bytes, cudaStream_t stream,
                   unsigned cluster_x, Args&&... args) {
  launch_kernel_with_pdl(pdl_enabled(), kernel, grid, block, smem_bytes, stream, cluster_x,
                         std::forward<Args>(args)...);
}

}  // namespace tlb
