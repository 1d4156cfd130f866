// SPDX-License-Identifier: BSD-3-Clause
// CUDA devices as collectives/exec/device.h sees them: memory types from cudaPointerGetAttributes,
// CudaStream and CudaKernels, pinned staging memory, stream-ordered allocation
// (cudaMallocAsync), so that enqueuing a call allocates nothing once its scratch and
// residuals exist.
#pragma once

#include "collectives/exec/device.h"

namespace ccl::coll {

// The process's CUDA driver (never destroyed). Without a CUDA device every pointer is host
// memory and current() is -1.
DeviceDriver* cudaDriver();

}  // namespace ccl::coll
