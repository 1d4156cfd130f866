// SPDX-License-Identifier: BSD-3-Clause
// Turning CUDA runtime errors into ccl::Error(cclUnhandledCudaError).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "common/error.h"

namespace ccl::codec::cuda {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw Error(cclUnhandledCudaError,
                std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

// After a kernel launch: reports a bad launch configuration or an earlier asynchronous error.
inline void checkLaunch(const char* kernel) { check(cudaGetLastError(), kernel); }

}  // namespace ccl::codec::cuda
