// Device memory that belongs to one (device, stream) pair and one use, zero-filled when made,
// made on first use and kept for the life of the process: graphs captured from the stream hold
// its address, so it is never moved or freed (the CUDA context reclaims it at exit). Launches
// on one stream run in order, so kernels of that stream may share it across launches as long as
// each launch leaves it as it must find it (a counter set back to zero, a flag cleared). Work
// that may overlap must not share it: a graph captured from the stream replayed on another
// while the stream runs too, or two replays of one graph at once.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace tlb {

enum class ScratchUse {
  gemm_stream_k,       // the persistent GEMM's partial tiles and ready flags
  attention_schedule,  // the persistent attention grid's item counter
};

// `bytes` must not change between calls of one use.
void* stream_scratch(cudaStream_t stream, ScratchUse use, size_t bytes);

}  // namespace tlb
