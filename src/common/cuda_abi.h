// SPDX-License-Identifier: BSD-3-Clause
// The part of the CUDA runtime's ABI that ccl declares by hand instead of including
// cuda_runtime_api.h, so that every layer may probe for CUDA without building against it
// (cuda_probe.cc and the perf harness load the runtime at run time). tests/abi checks every value, size and offset
// here against the real headers where they exist.
//
// Sized for the largest runtime ccl accepts (libcudart.so.13): a struct the runtime fills is
// at least as large as that version writes, since a smaller one is a stack overwrite.
#pragma once

#include <cstddef>

namespace ccl::cuda::abi {

constexpr int kSuccess = 0;                   // cudaSuccess
constexpr int kErrorInsufficientDriver = 35;  // cudaErrorInsufficientDriver
constexpr int kMemcpyDefault = 4;             // cudaMemcpyDefault
constexpr int kMemoryTypeDevice = 2;          // cudaMemoryTypeDevice
constexpr int kMemoryTypeManaged = 3;         // cudaMemoryTypeManaged
constexpr unsigned kStreamNonBlocking = 1;    // cudaStreamNonBlocking
// cudaStreamLegacy: the legacy default stream named explicitly, as a handle that is not NULL.
constexpr unsigned long kStreamLegacy = 0x1;

// cudaPointerAttributes. CUDA 11 and 12 write the first four members (24 bytes); CUDA 13
// appended `long reserved[8]` (88 bytes) and writes all of it.
struct PointerAttributes {
  int type;
  int device;
  void* devicePointer;
  void* hostPointer;
  long reserved[8];
};
static_assert(sizeof(PointerAttributes) == 88, "cudaPointerAttributes as CUDA 13 lays it out");

// The runtime's shared objects, newest first: the versions whose ABI this file follows.
inline constexpr const char* kRuntimeNames[] = {"libcudart.so.13", "libcudart.so.12"};

}  // namespace ccl::cuda::abi
