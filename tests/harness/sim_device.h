// SPDX-License-Identifier: BSD-3-Clause
// A simulated device for the api's device path on a machine without a GPU: "device memory"
// is host memory this driver hands out (so deviceOf tells it apart from any other pointer),
// kernels are the host kernels, and the current device is per thread. Registered with
// coll::setDeviceDriver, it makes the api run what it runs on a CUDA device: the same
// dispatch, plans, wave schedules, staged transport, scratch and residual handling.
//
// Its streams behave as CUDA's do where it matters for deadlocks: every stream's host
// functions (Stream::enqueue) run on one thread of the process, as CUDA runs them on its one
// callback thread, while device work (kernels, copies) runs on a device thread and waits
// (events, flags) hold no thread at all. A host function that blocked on another rank's
// progress deadlocks here as it would on a GPU.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "ccl/ccl.h"
#include "collectives/exec/device.h"
#include "common/cuda_abi.h"

namespace ccltest {

class SimDriver final : public ccl::coll::DeviceDriver {
 public:
  static constexpr int kDevices = 2;

  const char* name() const override { return "simulated"; }
  int current() override { return currentDevice; }
  int deviceOf(const void* p) override;
  bool capturing(void* stream) override;
  bool runsNccl() const override { return pretendNccl; }
  // Whether the driver says NVIDIA's NCCL could move its memory (CCL_DEVICE_TRANSPORT=auto's
  // question), for the tests of that choice; no by default, as the simulated device.
  bool pretendNccl = false;
  // Test hook: the next batch of compute steps enqueued on device `failComputeOn` fails (its
  // kernel throws); the failure disarms it. -1: none.
  std::atomic<int> failComputeOn{-1};
  // Test hook: the next batch of decodes (plain, accumulating or fused hops) on device
  // `refuseDecodeOn` finds its received streams' magic flipped, so the codec refuses them as
  // a corrupted stream; disarmed by it. -1: none.
  std::atomic<int> refuseDecodeOn{-1};
  std::unique_ptr<ccl::coll::Device> open(int ordinal) override;
  // Marks `s` as being captured into a graph (as cudaStreamBeginCapture) or not.
  void setCapturing(cclStream_t s, bool on);

  // Memory of `device`, zero-filled; release() frees it.
  void* alloc(size_t bytes, int device);
  void release(void* p);
  // A stream of `device`, as a cclStream_t handle.
  cclStream_t newStream(int device);
  void destroyStream(cclStream_t s);
  ccl::coll::Stream& streamOf(cclStream_t s);
  // CUDA's explicit handle of the legacy default stream (cudaStreamLegacy): streamOf and
  // deviceOfStream read it as the calling thread's current device's.
  static cclStream_t legacyStream() { return reinterpret_cast<cclStream_t>(ccl::cuda::abi::kStreamLegacy); }
  int deviceOfStream(cclStream_t s);

  // The calling thread's current device (CUDA's cudaSetDevice).
  static thread_local int currentDevice;

  // What the calling thread has enqueued on the device's streams so far, by kind, as CUDA
  // counts commands in a stream's queue: host functions (cudaLaunchHostFunc), device work
  // (a kernel, a copy, a flag store), waits (for an event or a flag) and events recorded.
  // A call's enqueue path is its own thread's, so a difference of two readings is what one
  // call enqueued.
  struct Commands {
    long hostFunctions = 0;
    long device = 0;
    long waits = 0;
    long records = 0;
    long total() const { return hostFunctions + device + waits + records; }
    // Not commands: calls of this thread that wait for the device (a stream or event
    // synchronised, a synchronous staging allocation or free).
    long blocking = 0;
  };
  static Commands threadCommands();

  // Allocations made so far, of device memory (alloc) and of staging memory (what the staged
  // link takes from Device::staging(): pinned host memory on CUDA), and the staging memory's
  // most blocks alive at once: what the steady path must not grow.
  struct Counts {
    long deviceAllocs = 0;
    long stagingAllocs = 0;
    long stagingLive = 0;
    long stagingPeak = 0;
    // Synchronous staging allocations and frees: on CUDA they wait for the whole device
    // (cudaHostAlloc, cudaFreeHost), where another rank's work may wait for this rank.
    long stagingSyncCalls = 0;
    // Calls of any thread that wait for the device (Commands::blocking, all threads).
    long blockingCalls = 0;
    // Bytes of staging memory alive, and the most alive at once.
    size_t stagingLiveBytes = 0;
    size_t stagingPeakBytes = 0;
  };
  Counts counts();
  void resetStagingPeak();
  // Notes a call of the calling thread that waits for the device.
  void noteBlocking();
  // Staging memory, synchronous (the link's flags) or stream-ordered (its blocks).
  void* allocStaging(size_t bytes, bool ordered = false);
  void freeStaging(void* p, bool ordered = false);
  // Called with each pointer release() frees, before it is freed (set it while no stream runs).
  std::function<void(void*)> releaseHook;

 private:
  struct Block {
    size_t bytes;
    int device;
  };
  struct StreamEntry {
    std::unique_ptr<ccl::coll::Stream> stream;
    int device;
  };
  std::mutex mutex_;
  std::map<uintptr_t, Block> memory_;
  std::map<const void*, StreamEntry> streams_;
  StreamEntry legacy_[kDevices];        // each device's legacy default stream, made at its first use
  StreamEntry& entryOf(cclStream_t s);  // under mutex_
  std::map<const void*, bool> capturing_;
  std::map<const void*, size_t> staging_;  // staging memory alive, by address
  Counts counts_;
  std::vector<std::unique_ptr<ccl::coll::Stream>> retired_;
};

// The driver every test of the binary shares (registered by the test main).
SimDriver& simDriver();

// Device memory as a test holds it.
struct SimBuffer {
  SimBuffer(size_t bytes, int device) : p(simDriver().alloc(bytes, device)) {}
  ~SimBuffer() { simDriver().release(p); }
  SimBuffer(const SimBuffer&) = delete;
  SimBuffer& operator=(const SimBuffer&) = delete;
  template <class T>
  T* as() const {
    return static_cast<T*>(p);
  }
  void* p;
};

struct SimStream {
  explicit SimStream(int device) : s(simDriver().newStream(device)) {}
  ~SimStream() { simDriver().destroyStream(s); }
  SimStream(const SimStream&) = delete;
  SimStream& operator=(const SimStream&) = delete;
  void synchronize() { simDriver().streamOf(s).synchronize(); }
  cclStream_t s;
};

}  // namespace ccltest
