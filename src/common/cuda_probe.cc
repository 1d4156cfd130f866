// SPDX-License-Identifier: BSD-3-Clause
#include "common/cuda_probe.h"

#include <dlfcn.h>

#include <string>

#include "common/cuda_abi.h"
#include "common/error.h"
#include "common/log.h"

namespace ccl::cuda {
namespace {

using abi::kMemcpyDefault;
using abi::kMemoryTypeDevice;
using abi::kMemoryTypeManaged;
using abi::kSuccess;
using abi::PointerAttributes;

struct Runtime {
  void* handle = nullptr;
  int (*getDeviceCount)(int*) = nullptr;
  int (*pointerAttributes)(PointerAttributes*, const void*) = nullptr;
  int (*memcpy)(void*, const void*, size_t, int) = nullptr;
  int (*getDevice)(int*) = nullptr;
  int (*setDevice)(int) = nullptr;
  int (*malloc)(void**, size_t) = nullptr;  // optional: the NCCL face's ncclMemAlloc without NVIDIA's
  int (*free)(void*) = nullptr;
  int devices = 0;
  bool driverTooOld = false;
};

template <class F>
void bind(void* handle, const char* name, F** out) {
  *out = reinterpret_cast<F*>(dlsym(handle, name));
}

Runtime load() {
  Runtime rt;
  for (const char* name : abi::kRuntimeNames) {
    rt.handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (rt.handle) break;
  }
  if (!rt.handle) {
    CCL_INFO("no CUDA runtime found; every buffer is host memory");
    return rt;
  }
  bind(rt.handle, "cudaGetDeviceCount", &rt.getDeviceCount);
  bind(rt.handle, "cudaPointerGetAttributes", &rt.pointerAttributes);
  bind(rt.handle, "cudaMemcpy", &rt.memcpy);
  bind(rt.handle, "cudaGetDevice", &rt.getDevice);
  bind(rt.handle, "cudaSetDevice", &rt.setDevice);
  bind(rt.handle, "cudaMalloc", &rt.malloc);
  bind(rt.handle, "cudaFree", &rt.free);
  int n = 0;
  const bool complete = rt.getDeviceCount && rt.pointerAttributes && rt.memcpy && rt.getDevice && rt.setDevice;
  const int counted = complete ? rt.getDeviceCount(&n) : kSuccess;
  if (complete && counted == kSuccess) rt.devices = n;
  if (counted == abi::kErrorInsufficientDriver) {
    rt.driverTooOld = true;
    CCL_WARN(
        "the CUDA driver is older than the CUDA runtime ccl was built with (cudaErrorInsufficientDriver): ccl uses "
        "no device; the NCCL face sends every call to NVIDIA's NCCL, uncompressed");
  }
  CCL_INFO("CUDA runtime loaded, %d device(s)", rt.devices);
  return rt;
}

// The runtime stays loaded for the life of the process: CUDA does not support unloading.
const Runtime& runtime() {
  static const Runtime rt = load();
  return rt;
}

}  // namespace

bool deviceAvailable() { return runtime().devices > 0; }

bool driverTooOld() { return runtime().driverTooOld; }

bool isDevicePointer(const void* ptr) {
  if (!ptr || !deviceAvailable()) return false;
  PointerAttributes attr{};
  if (runtime().pointerAttributes(&attr, ptr) != kSuccess) return false;
  return attr.type == kMemoryTypeDevice || attr.type == kMemoryTypeManaged;
}

void copy(void* dst, const void* src, size_t bytes) {
  CCL_CHECK(deviceAvailable(), cclUnhandledCudaError, "no CUDA device to copy from");
  CCL_CHECK(runtime().memcpy(dst, src, bytes, kMemcpyDefault) == kSuccess, cclUnhandledCudaError, "cudaMemcpy failed");
}

void* deviceAlloc(size_t bytes) {
  CCL_CHECK(deviceAvailable() && runtime().malloc, cclUnhandledCudaError, "no CUDA device to allocate memory of");
  void* p = nullptr;
  const int e = runtime().malloc(&p, bytes);
  CCL_CHECK(e == kSuccess, cclUnhandledCudaError,
            "cudaMalloc of " + std::to_string(bytes) + " bytes failed (cudaError " + std::to_string(e) + ")");
  return p;
}

void deviceFree(void* ptr) {
  CCL_CHECK(deviceAvailable() && runtime().free, cclUnhandledCudaError, "no CUDA device to free memory of");
  const int e = runtime().free(ptr);
  CCL_CHECK(e == kSuccess, cclUnhandledCudaError, "cudaFree failed (cudaError " + std::to_string(e) + ")");
}

int currentDevice() {
  int d = 0;
  if (deviceAvailable() && runtime().getDevice(&d) == kSuccess) return d;
  return -1;
}

void setDevice(int device) {
  if (device >= 0 && deviceAvailable()) runtime().setDevice(device);
}

}  // namespace ccl::cuda
