// SPDX-License-Identifier: BSD-3-Clause
// Where a sweep's buffers live (-M): host memory, or CUDA device memory with a CUDA stream
// per rank. The CUDA runtime is loaded at run time, so the harness builds and runs without
// CUDA; asking for device memory where no device exists is an error with a reason.
#pragma once

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>

#include "ccl/ccl.h"

namespace cclperf {

// No CUDA runtime or no device: a -M device run cannot start (its own exit status, so
// a test can tell it from a failure).
class NoDevice : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
inline constexpr int kNoDeviceExitCode = 77;

class Memory {
 public:
  virtual ~Memory() = default;
  virtual bool onDevice() const = 0;
  virtual const char* name() const = 0;
  // Devices of this process (host: 1, "the host").
  virtual int devices() const = 0;
  // Makes device `d` current on the calling thread (host: nothing).
  virtual void bind(int d) = 0;
  virtual void* allocZeroed(size_t bytes) = 0;
  virtual void release(void* p) = 0;
  // Host memory into a buffer, and back.
  virtual void upload(void* dst, const void* src, size_t bytes) = 0;
  virtual void download(void* dst, const void* src, size_t bytes) = 0;
  // The stream a rank's calls are ordered on (host: NULL), and waiting for it.
  virtual cclStream_t newStream() = 0;
  virtual void destroyStream(cclStream_t s) = 0;
  virtual void synchronize(cclStream_t s) = 0;
};

// The process's memory for -M host or -M device. Throws NoDevice for device memory where
// the CUDA runtime or a device is missing.
Memory& memoryFor(bool device);

// The device of thread rank `thread` of this process: the node-local rank (from the
// launcher's environment, else the process rank) times the threads, plus the thread,
// modulo the devices.
int deviceOfThread(const Memory& m, int processRank, int nthreads, int thread);

}  // namespace cclperf
