// SPDX-License-Identifier: BSD-3-Clause
// Every collective and codec on device buffers against the same calls on host buffers, byte
// for byte: shared by the simulated-device test (api_device_test) and the GPU test
// (api_gpu_test), which differ only in how device memory and streams are made. Its inputs
// and codec parameters serve the host-stream tests too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ccl/ccl.h"

namespace ccltest {

class DeviceOps {
 public:
  virtual ~DeviceOps() = default;
  // Called on each rank's thread before its communicators are made.
  virtual void bindThread() {}
  virtual void* alloc(size_t bytes) = 0;
  virtual void release(void* p) = 0;
  virtual void upload(void* device, const void* host, size_t bytes) = 0;
  virtual void download(void* host, const void* device, size_t bytes) = 0;
  virtual cclStream_t newStream() = 0;
  virtual void destroyStream(cclStream_t s) = 0;
  virtual void synchronize(cclStream_t s) = 0;
};

// A codec with the tests' parameters (top-k and random-k keep 5 %, threshold 15).
cclCompression_t codecOf(cclCodec_t c);

// Deterministic test values of `rank`, different for each salt.
std::vector<float> inputOf(int rank, size_t n, uint32_t salt);

// On `nranks` ranks as threads, each with a host communicator and a device one issuing the
// same calls in the same order (so each call has the same sequence number, and the codecs
// the same seeds, on both): every collective with every codec (reduce, gather and scatter
// uncompressed), each device result against the host one. Throws (through the rank runner)
// naming the first difference. `misalign`: the device buffers start that many bytes past an
// aligned address (inside a float), the host ones aligned: the results must still match.
void expectDeviceMatchesHost(int nranks, DeviceOps& ops, size_t misalign = 0);

}  // namespace ccltest
