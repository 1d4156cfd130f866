// SPDX-License-Identifier: BSD-3-Clause
// The CUDA runtime, loaded at run time so the library has no link-time dependency on it.
// Without CUDA (or without a device) every pointer is host memory.
#pragma once

#include <cstddef>

namespace ccl::cuda {

// True when libcudart loads and reports at least one device.
bool deviceAvailable();

// True when libcudart loads but the driver is older than it (cudaErrorInsufficientDriver: a
// CUDA 13 library on a driver before 580): no device is usable through this runtime, and
// device memory cannot be told from host memory. Said once, as a WARN, when first seen.
bool driverTooOld();

// True when `ptr` is device or managed memory; false for host memory or without CUDA.
bool isDevicePointer(const void* ptr);

// Copies `bytes` between any two pointers (cudaMemcpyDefault). Throws without CUDA.
void copy(void* dst, const void* src, size_t bytes);

// Device memory of the current device (cudaMalloc) and freeing it (cudaFree). Throw without a
// device, or when the runtime fails.
void* deviceAlloc(size_t bytes);
void deviceFree(void* ptr);

// The calling thread's current device, and setting it (both no-ops without a device).
int currentDevice();
void setDevice(int device);

}  // namespace ccl::cuda
