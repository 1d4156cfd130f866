// SPDX-License-Identifier: BSD-3-Clause
// libccl.so is made of the layer libraries; this file gives the target a source and, in a
// build with CUDA, registers CUDA devices, so that calls on device buffers take the device
// path (api/device_calls.h). The NCCL face's libraries compile it too.
#ifdef CCL_WITH_CUDA
#include "collectives/exec/cuda/cuda_device.h"

namespace {
const bool kCudaRegistered = [] {
  ccl::coll::setDeviceDriver(ccl::coll::cudaDriver());
  return true;
}();
}  // namespace
#endif
