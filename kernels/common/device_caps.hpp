// What the dispatchers need to know of the current device (multiprocessors, compute
// capability), asked of the runtime once per device and cached. No CUDA headers: .cu and .cpp
// files alike include it.
#pragma once

namespace tlb {

struct DeviceCaps {
  int sms = 0;
  int major = 0, minor = 0;
};

// The current device's; throws DeviceError where there is no usable device.
const DeviceCaps& device_caps();

}  // namespace tlb
