// SPDX-License-Identifier: BSD-3-Clause
// A device the stream executor runs calls on (a CUDA GPU), as an interface: its memory, its
// streams and its kernels. The CUDA build registers a driver for CUDA devices when libccl
// loads; without one every buffer is host memory. Tests register a simulated device (host
// memory it hands out, host streams, host kernels), so the api's device path runs on the CPU
// as it runs on a GPU.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "collectives/exec/links/transport_link.h"
#include "collectives/exec/stream.h"
#include "collectives/exec/stream_executor.h"

namespace ccl::coll {

class Device {
 public:
  virtual ~Device() = default;
  virtual int ordinal() const = 0;
  // The caller's stream handle (a cudaStream_t; NULL: the legacy default stream) as a
  // Stream that does not own it. Throws cclInvalidUsage for a stream of another device.
  virtual std::unique_ptr<Stream> wrap(void* stream) = 0;
  // A stream of the device's own (the waves of a communicator).
  virtual std::unique_ptr<Stream> newStream() = 0;
  // A plan's compute steps on the device's memory.
  virtual std::unique_ptr<StreamKernels> newKernels() = 0;
  // Host memory a staged transport exchanges device bytes through (pinned on CUDA).
  virtual StagingMemory staging() = 0;
  // Device memory of `bytes`, zero-filled, ordered on `stream`: usable by work enqueued on it
  // after this call. Throws ccl::Error when the device is out of memory.
  virtual void* allocZeroed(size_t bytes, Stream& stream) = 0;
  // Frees `p` once the work enqueued on `stream` so far has run.
  virtual void free(void* p, Stream& stream) = 0;
  // Makes this the calling thread's current device (CUDA enqueues on the current device's
  // streams only); returns the one it replaces, for restore().
  virtual int makeCurrent() = 0;
  virtual void restore(int previous) = 0;
};

// This device current for a scope.
class CurrentDevice {
 public:
  explicit CurrentDevice(Device& d) : device_(d), previous_(d.makeCurrent()) {}
  ~CurrentDevice() { device_.restore(previous_); }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  Device& device_;
  int previous_;
};

class DeviceDriver {
 public:
  virtual ~DeviceDriver() = default;
  virtual const char* name() const = 0;
  // The calling thread's current device; -1 when there is none (no device, no driver).
  virtual int current() = 0;
  // The device whose memory `p` is (device or managed memory); -1 for host memory.
  virtual int deviceOf(const void* p) = 0;
  // What the driver knows of `p`, for an error message that has to say why a buffer was
  // taken for host memory ("" where there is nothing more to say).
  virtual std::string describe(const void* p) {
    (void)p;
    return "";
  }
  // True while `stream` (a cudaStream_t) is being captured into a CUDA graph: what is
  // enqueued then runs only when the graph is launched, once per launch.
  virtual bool capturing(void* stream) = 0;
  virtual std::unique_ptr<Device> open(int ordinal) = 0;
  // True when NVIDIA's NCCL can move this driver's device memory (CUDA's): what
  // CCL_DEVICE_TRANSPORT=auto asks before it makes an NCCL communicator.
  virtual bool runsNccl() const { return false; }
};

// The registered driver; nullptr: every buffer is host memory.
DeviceDriver* deviceDriver();
// Registers `driver` (not owned; it must outlive every communicator); nullptr unregisters.
void setDeviceDriver(DeviceDriver* driver);

}  // namespace ccl::coll
