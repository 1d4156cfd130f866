// SPDX-License-Identifier: BSD-3-Clause
#include "harness/memory.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "common/cuda_abi.h"

namespace cclperf {
namespace {

class HostMemory final : public Memory {
 public:
  bool onDevice() const override { return false; }
  const char* name() const override { return "host"; }
  int devices() const override { return 1; }
  void bind(int) override {}
  void* allocZeroed(size_t bytes) override {
    constexpr size_t kAlign = 4096;
    const size_t rounded = std::max<size_t>(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
    void* p = std::aligned_alloc(kAlign, rounded);
    if (!p) throw std::runtime_error("out of host memory allocating " + std::to_string(rounded) + " bytes");
    std::memset(p, 0, rounded);  // touch every page before timing
    return p;
  }
  void release(void* p) override { std::free(p); }
  void upload(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  cclStream_t newStream() override { return nullptr; }
  void destroyStream(cclStream_t) override {}
  void synchronize(cclStream_t) override {}
};

// The CUDA runtime's ABI as far as used here: ccl's one table of it (checked against the
// real headers by tests/abi).
using ccl::cuda::abi::kMemcpyDefault;
using ccl::cuda::abi::kStreamNonBlocking;
using ccl::cuda::abi::kSuccess;

class CudaMemory final : public Memory {
 public:
  CudaMemory() {
    for (const char* name : ccl::cuda::abi::kRuntimeNames) {
      handle_ = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (handle_) break;
    }
    if (!handle_) throw NoDevice("-M device: no CUDA runtime (libcudart) could be loaded");
    bind("cudaGetDeviceCount", &getDeviceCount_);
    bind("cudaSetDevice", &setDevice_);
    bind("cudaMalloc", &malloc_);
    bind("cudaFree", &free_);
    bind("cudaMemset", &memset_);
    bind("cudaMemcpy", &memcpy_);
    bind("cudaStreamCreateWithFlags", &streamCreate_);
    bind("cudaStreamDestroy", &streamDestroy_);
    bind("cudaStreamSynchronize", &streamSynchronize_);
    bind("cudaGetErrorString", &errorString_);
    if (getDeviceCount_(&devices_) != kSuccess || devices_ == 0)
      throw NoDevice("-M device: the CUDA runtime reports no device");
  }

  bool onDevice() const override { return true; }
  const char* name() const override { return "cuda"; }
  int devices() const override { return devices_; }
  void bind(int d) override { check(setDevice_(d), "cudaSetDevice"); }
  void* allocZeroed(size_t bytes) override {
    void* p = nullptr;
    check(malloc_(&p, std::max<size_t>(bytes, 1)), "cudaMalloc");
    check(memset_(p, 0, std::max<size_t>(bytes, 1)), "cudaMemset");
    settle();
    return p;
  }
  void release(void* p) override {
    if (p) free_(p);
  }
  void upload(void* dst, const void* src, size_t bytes) override {
    check(memcpy_(dst, src, bytes, kMemcpyDefault), "cudaMemcpy");
    settle();
  }
  void download(void* dst, const void* src, size_t bytes) override {
    check(memcpy_(dst, src, bytes, kMemcpyDefault), "cudaMemcpy");
  }
  cclStream_t newStream() override {
    void* s = nullptr;
    check(streamCreate_(&s, kStreamNonBlocking), "cudaStreamCreateWithFlags");
    return static_cast<cclStream_t>(s);
  }
  void destroyStream(cclStream_t s) override {
    if (s) streamDestroy_(s);
  }
  void synchronize(cclStream_t s) override { check(streamSynchronize_(s), "cudaStreamSynchronize"); }

 private:
  template <class F>
  void bind(const char* name, F** out) {
    *out = reinterpret_cast<F*>(dlsym(handle_, name));
    if (!*out) throw NoDevice(std::string("-M device: the CUDA runtime lacks ") + name);
  }
  // cudaMemset on device memory, and cudaMemcpy from pageable host memory to the device,
  // may return before the device memory is written (CUDA's "API synchronization behavior"):
  // they are ordered only before later work of the legacy stream, and the calls run on
  // non-blocking streams. On an H100 a 64 MiB call read inputs the upload had not written
  // yet and reported 97 % of its elements out of bounds. Waiting for the legacy stream (0)
  // waits for them, and not for any rank's non-blocking streams.
  void settle() { check(streamSynchronize_(nullptr), "cudaStreamSynchronize (legacy stream)"); }
  void check(int e, const char* what) const {
    if (e != kSuccess) throw std::runtime_error(std::string(what) + " failed: " + errorString_(e));
  }

  void* handle_ = nullptr;  // never closed: CUDA does not support unloading
  int devices_ = 0;
  int (*getDeviceCount_)(int*) = nullptr;
  int (*setDevice_)(int) = nullptr;
  int (*malloc_)(void**, size_t) = nullptr;
  int (*free_)(void*) = nullptr;
  int (*memset_)(void*, int, size_t) = nullptr;
  int (*memcpy_)(void*, const void*, size_t, int) = nullptr;
  int (*streamCreate_)(void**, unsigned) = nullptr;
  int (*streamDestroy_)(void*) = nullptr;
  int (*streamSynchronize_)(void*) = nullptr;
  const char* (*errorString_)(int) = nullptr;
};

int envInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

}  // namespace

Memory& memoryFor(bool device) {
  static HostMemory host;
  if (!device) return host;
  static CudaMemory* cuda = new CudaMemory;  // first use; throws NoDevice without one
  return *cuda;
}

int deviceOfThread(const Memory& m, int processRank, int nthreads, int thread) {
  const int local = envInt("OMPI_COMM_WORLD_LOCAL_RANK", envInt("LOCAL_RANK", processRank));
  return (local * nthreads + thread) % m.devices();
}

}  // namespace cclperf
