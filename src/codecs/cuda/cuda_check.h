// SPDX-License-Identifier: BSD-3-Clause
// Turning CUDA runtime errors into ccl::Error(cclUnhandledCudaError).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/error.h"

namespace ccl::codec::cuda {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw Error(cclUnhandledCudaError,
                std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

// Commands the codec kernels of this thread have enqueued (kernels, copies, memsets; a CUB
// device-wide scan or selection counts as the two kernels it launches): what a caller adds to
// its count of a call's commands (CountedStream).
inline thread_local uint64_t commandsEnqueued = 0;

// After a kernel launch: reports a bad launch configuration or an earlier asynchronous error.
inline void checkLaunch(const char* kernel) {
  ++commandsEnqueued;
  check(cudaGetLastError(), kernel);
}

// A call that enqueues `commands` commands (a copy, a memset, a CUB algorithm), checked.
inline void checkEnqueued(cudaError_t e, const char* what, unsigned commands) {
  commandsEnqueued += commands;
  check(e, what);
}

}  // namespace ccl::codec::cuda
