// SPDX-License-Identifier: BSD-3-Clause
// The list of ccl's libraries of GPU kernels (one per CUDA source file), which the device
// layer loads into a device's context before the first of ccl's flag-waiting kernels can run
// there (collectives/exec/cuda/kernel_preload.h says why). Plain C++ and no CUDA call: every
// layer's kernel files register here, at static initialisation, and the one layer that opens
// devices reads the list.
#pragma once

#include <vector>

namespace ccl {

// Notes the library (the fatbin of one CUDA source file) that holds `kernel` (a __global__
// function's address).
void registerKernelLibrary(const void* kernel);

// One kernel of each registered library, in registration order.
std::vector<const void*> registeredKernelLibraries();

// The registration as one line of a file of kernels, at namespace scope:
//   const KernelLibrary kKernels(&someKernelOfThisFile);
struct KernelLibrary {
  template <class Kernel>
  explicit KernelLibrary(Kernel* kernel) {
    registerKernelLibrary(reinterpret_cast<const void*>(kernel));
  }
};

}  // namespace ccl
