// SPDX-License-Identifier: BSD-3-Clause
// Every kernel of ccl (common/kernel_registry.h lists them) loaded into a device's context
// before the first of ccl's flag-waiting kernels can run there. Under CUDA's lazy loading (the
// default since CUDA 12.2) a kernel is loaded at its first launch, and loading may wait for
// the context to be idle: with two ranks on one GPU, one rank's first launch of a codec
// kernel waited for the other rank's flag kernel, which waited for the first rank's data.
// NCCL loads its kernels at init for the same reason.
#pragma once

#include <string>

namespace ccl::coll {

// What preloadKernels did on a device.
struct Preloaded {
  int libraries = 0;
  int kernels = 0;
  std::string failure;  // empty when every kernel of every library was loaded
};

// Loads every kernel of every library registered with registerKernelLibrary into the
// current device's context, once per device per process (later calls return the first
// call's result). Enumerates each
// library's kernels (cudaGetKernel, cuKernelGetLibrary, cudaLibraryEnumerateKernels) and
// loads each (cuKernelGetFunction, cuFuncLoad); where the driver lacks one of these, the
// registered kernels alone are loaded and `failure` says why.
Preloaded preloadKernels();

}  // namespace ccl::coll
