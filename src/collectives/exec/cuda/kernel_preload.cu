// SPDX-License-Identifier: BSD-3-Clause
#include <cuda.h>
#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <vector>

#include "collectives/exec/cuda/kernel_preload.h"
#include "common/kernel_registry.h"

namespace ccl::coll {
namespace {

// A driver function, found through the runtime (ccl does not link libcuda).
template <class F>
F* driverFunction(const char* name, std::string* failure) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(name, &p, CUDART_VERSION, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess || !p) {
    cudaGetLastError();
    if (failure->empty()) *failure = std::string("the driver has no ") + name;
    return nullptr;
  }
  return reinterpret_cast<F*>(p);
}

Preloaded load() {
  Preloaded r;
  auto* kernelGetLibrary = driverFunction<CUresult(CUlibrary*, CUkernel)>("cuKernelGetLibrary", &r.failure);
  auto* kernelGetFunction = driverFunction<CUresult(CUfunction*, CUkernel)>("cuKernelGetFunction", &r.failure);
  auto* funcLoad = driverFunction<CUresult(CUfunction)>("cuFuncLoad", &r.failure);
  for (const void* k : registeredKernelLibraries()) {
    // The registered kernel itself, whatever the driver offers.
    cudaFuncAttributes attributes{};
    if (cudaFuncGetAttributes(&attributes, k) != cudaSuccess) {
      cudaGetLastError();
      if (r.failure.empty()) r.failure = "cudaFuncGetAttributes failed on a registered kernel";
      continue;
    }
    ++r.libraries;
    if (!kernelGetLibrary || !kernelGetFunction || !funcLoad) continue;
    cudaKernel_t kernel = nullptr;
    CUlibrary library = nullptr;
    unsigned count = 0;
    if (cudaGetKernel(&kernel, k) != cudaSuccess || kernelGetLibrary(&library, kernel) != CUDA_SUCCESS ||
        cudaLibraryGetKernelCount(&count, library) != cudaSuccess) {
      cudaGetLastError();
      if (r.failure.empty()) r.failure = "a library of kernels could not be enumerated";
      continue;
    }
    std::vector<cudaKernel_t> kernels(count);
    if (count && cudaLibraryEnumerateKernels(kernels.data(), count, library) != cudaSuccess) {
      cudaGetLastError();
      if (r.failure.empty()) r.failure = "cudaLibraryEnumerateKernels failed";
      continue;
    }
    for (cudaKernel_t each : kernels) {
      CUfunction f = nullptr;
      if (kernelGetFunction(&f, each) == CUDA_SUCCESS && funcLoad(f) == CUDA_SUCCESS) {
        ++r.kernels;
      } else if (r.failure.empty()) {
        r.failure = "a kernel could not be loaded";
      }
    }
  }
  return r;
}

}  // namespace

Preloaded preloadKernels() {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  static std::map<int, Preloaded> done;
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return Preloaded{0, 0, "no current device"};
  }
  auto it = done.find(device);
  if (it == done.end()) it = done.emplace(device, load()).first;
  return it->second;
}

}  // namespace ccl::coll
