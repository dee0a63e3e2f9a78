// A stream held at the GPU while the host enqueues work behind it. Events recorded around work
// launched one call after another time the host's launches as well as the GPU's execution:
// the GPU idles from the first event until the first kernel arrives, and between kernels the
// host is slower to launch than the GPU to run. A replayed CUDA graph, and events inside one,
// see none of that. With a hold, the work queues up behind a waiting kernel and runs back to
// back once the host releases it, so the events see the GPU's time alone:
//
//   hold.hold(stream);  record(a);  work();  record(b);  hold.release();  sync(b);
//
// which is EventTimer::ms(work, &hold).
// The waiting kernel gives up after a second (a host that synchronises on the held stream
// would otherwise wait forever); timed_out() then says the events hold that wait too. With
// synchronised launch checks (TLBENCH_SYNC_LAUNCHES) every launch behind a hold waits it out:
// callers time without one there.
#pragma once

#include <cuda_runtime.h>

namespace tlb {

class LaunchHold {
 public:
  LaunchHold();
  ~LaunchHold();
  LaunchHold(const LaunchHold&) = delete;
  LaunchHold& operator=(const LaunchHold&) = delete;

  // Enqueues the waiting kernel on `stream`; everything enqueued after it waits for release().
  // One hold at a time: the host waits past a released hold (an event after it) before the
  // next, and the stream outlives the object.
  void hold(cudaStream_t stream);
  // Lets the waiting kernel finish.
  void release();
  // Whether the last hold's kernel stopped waiting before release() (read once the stream has
  // passed it).
  bool timed_out() const;
  // Whether a hold can hold `stream` here: not where launch checks synchronise
  // (TLBENCH_SYNC_LAUNCHES), nor where the driver blocks on each launch (a profiler's
  // serialised kernels, CUDA_LAUNCH_BLOCKING: the waiting kernel has then run out its second
  // before hold() returns). Tries one hold, released at once.
  bool works(cudaStream_t stream);

 private:
  // Host-mapped words: [0] the release flag the kernel polls, [1] set by the kernel on timeout.
  volatile int* words_ = nullptr;
  int* device_words_ = nullptr;
  cudaStream_t stream_ = nullptr;  // the last held stream: the destructor waits for it
};

}  // namespace tlb
