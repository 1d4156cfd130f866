// SPDX-License-Identifier: BSD-3-Clause
#include <cuda_runtime.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include "collectives/exec/cuda/cuda_device.h"
#include "collectives/exec/cuda/cuda_stream.h"
#include "collectives/exec/cuda/device_kernels.h"
#include "collectives/exec/cuda/kernel_preload.h"
#include "common/activity.h"
#include "common/error.h"
#include "common/log.h"

namespace ccl::coll {
namespace {

void cudaOk(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(cclUnhandledCudaError, std::string(what) + " failed: " + cudaGetErrorString(e));
}

cudaStream_t nativeOf(Stream& s) {
  CCL_CHECK(dynamic_cast<CudaStream*>(&s.underlying()), cclInternalError,
            "a CUDA device given a stream that is not a CudaStream");
  return static_cast<cudaStream_t>(s.native());
}

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(int ordinal) : ordinal_(ordinal) {
    int n = 0;
    cudaOk(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
    CCL_CHECK(ordinal >= 0 && ordinal < n, cclInvalidUsage,
              "device " + std::to_string(ordinal) + " does not exist (" + std::to_string(n) + " devices)");
    // Before any of this device's streams can hold a flag-waiting kernel (kernel_preload.h).
    ActivityScope busy("loading ccl's kernels");
    const int previous = makeCurrent();
    const Preloaded p = preloadKernels();
    restore(previous);
    static std::once_flag said;
    std::call_once(said, [&] {
      if (p.failure.empty())
        CCL_INFO("device %d: %d kernels of %d libraries loaded", ordinal, p.kernels, p.libraries);
      else
        CCL_WARN(
            "device %d: %d kernels of %d libraries loaded, not all (%s); two ranks on one GPU may stall under "
            "lazy loading: set CUDA_MODULE_LOADING=EAGER",
            ordinal, p.kernels, p.libraries, p.failure.c_str());
      // One hardware queue (Megatron sets it) runs every stream's work in issue order: a
      // kernel waiting for another rank of this process on the same GPU holds that rank's
      // work behind it. One rank per process and GPU is unaffected.
      const char* connections = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
      if (connections && std::atoi(connections) == 1)
        CCL_WARN(
            "CUDA_DEVICE_MAX_CONNECTIONS=1: several ranks of one process on one GPU would wait for each other's "
            "work behind flag kernels in the one queue; run one rank per process and GPU");
    });
  }

  int ordinal() const override { return ordinal_; }

  std::unique_ptr<Stream> wrap(void* stream) override {
    auto s = static_cast<cudaStream_t>(stream);
    int device = -1;
    cudaOk(cudaStreamGetDevice(s, &device), "cudaStreamGetDevice");
    CCL_CHECK(device == ordinal_, cclInvalidUsage,
              "the stream belongs to device " + std::to_string(device) + ", but the communicator's device is " +
                  std::to_string(ordinal_) + " (cclCommCuDevice)");
    // A blocking stream (cudaStreamCreate's default) synchronises with the legacy stream:
    // another thread's cudaMemcpy then waits for this stream's flag kernels, which may wait
    // for that thread's rank. Said once; the call runs.
    unsigned flags = 0;
    if (cudaStreamGetFlags(s, &flags) != cudaSuccess) {
      cudaGetLastError();  // the flags only inform a warning
    } else if (!(flags & cudaStreamNonBlocking)) {
      static std::once_flag said;
      std::call_once(said, [] {
        CCL_WARN(
            "a call's stream is a blocking stream: with several ranks of one process on one GPU, a legacy-stream call "
            "(cudaMemcpy, cudaMemset) of one rank can wait for another's collective; create streams with "
            "cudaStreamNonBlocking");
      });
    }
    return std::make_unique<CudaStream>(CudaStream::Wrap{}, s);
  }

  std::unique_ptr<Stream> newStream() override { return std::make_unique<CudaStream>(); }
  std::unique_ptr<StreamKernels> newKernels() override { return std::make_unique<CudaKernels>(); }
  StagingMemory staging() override { return pinnedStaging(ordinal_); }

  void* allocZeroed(size_t bytes, Stream& stream) override {
    ActivityScope busy("cudaMallocAsync");
    void* p = nullptr;
    const cudaStream_t s = nativeOf(stream);
    const cudaError_t e = cudaMallocAsync(&p, bytes, s);
    if (e == cudaErrorMemoryAllocation)
      throw Error(cclSystemError, "out of device memory (" + std::to_string(bytes) + " bytes of scratch or feedback)");
    cudaOk(e, "cudaMallocAsync");
    cudaOk(cudaMemsetAsync(p, 0, bytes, s), "cudaMemsetAsync");
    return p;
  }

  void free(void* p, Stream& stream) override {
    ActivityScope busy("cudaFreeAsync");
    if (p) cudaOk(cudaFreeAsync(p, nativeOf(stream)), "cudaFreeAsync");
  }

  int makeCurrent() override {
    int previous = 0;
    cudaOk(cudaGetDevice(&previous), "cudaGetDevice");
    if (previous != ordinal_) cudaOk(cudaSetDevice(ordinal_), "cudaSetDevice");
    return previous;
  }

  void restore(int previous) override {
    if (previous != ordinal_) cudaSetDevice(previous);
  }

 private:
  int ordinal_;
};

// Devices in the process, asked once at the first use (not when the library loads: that
// would start CUDA in every process that links ccl).
int deviceCount() {
  static const int n = [] {
    int count = 0;
    if (cudaGetDeviceCount(&count) == cudaSuccess) return count;
    cudaGetLastError();  // no driver or no device: not an error of anyone's later call
    return 0;
  }();
  return n;
}

class CudaDriver final : public DeviceDriver {
 public:
  const char* name() const override { return "CUDA"; }
  bool runsNccl() const override { return true; }

  int current() override {
    int d = -1;
    if (deviceCount() == 0 || cudaGetDevice(&d) != cudaSuccess) return -1;
    return d;
  }

  int deviceOf(const void* p) override {
    if (!p || deviceCount() == 0) return -1;
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
      cudaGetLastError();
      return -1;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged ? a.device : -1;
  }

  std::string describe(const void* p) override {
    if (deviceCount() == 0) return "no CUDA device";
    cudaPointerAttributes a{};
    const cudaError_t e = cudaPointerGetAttributes(&a, p);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return std::string("cudaPointerGetAttributes: ") + cudaGetErrorString(e);
    }
    return "memory type " + std::to_string(static_cast<int>(a.type)) + ", device " + std::to_string(a.device);
  }

  bool capturing(void* stream) override {
    if (deviceCount() == 0) return false;
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    const cudaError_t e = cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &status);
    if (e == cudaSuccess) return status != cudaStreamCaptureStatusNone;
    cudaGetLastError();
    // The legacy stream asked while another stream captures in global mode: that capture is
    // what the call would join. Any other error is the stream's, reported where it is used.
    return e == cudaErrorStreamCaptureImplicit;
  }

  std::unique_ptr<Device> open(int ordinal) override { return std::make_unique<CudaDevice>(ordinal); }
};

}  // namespace

DeviceDriver* cudaDriver() {
  static CudaDriver* driver = new CudaDriver;  // outlives every communicator
  return driver;
}

}  // namespace ccl::coll
