// Host entry of the L2 flush used for cold measurements: the buffer must be at least twice the
// device's L2 size (cudaDevAttrL2CacheSize) so every line the previous run left is replaced.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace tlb {

// Writes `bytes` bytes (a multiple of 16) of `buffer` on `stream`; `value` varies per call so
// no store is ever a no-op a future hardware shortcut could skip.
void launch_l2_flush(void* buffer, size_t bytes, unsigned value, cudaStream_t stream);

}  // namespace tlb
