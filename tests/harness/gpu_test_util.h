// SPDX-License-Identifier: BSD-3-Clause
// Helpers of the GPU codec tests: device buffers, the skip rule, typed inputs, and running
// one codec on both sides.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "codecs/codec.h"
#include "codecs/cuda/codec_kernels.h"

namespace ccl::codec::gputest {

// Empty when a CUDA device is usable; else why not (for GTEST_SKIP).
std::string noDeviceReason();

#define CCL_SKIP_WITHOUT_CUDA_DEVICE()                                      \
  do {                                                                      \
    const std::string why = ::ccl::codec::gputest::noDeviceReason();        \
    if (!why.empty()) GTEST_SKIP() << "no CUDA device is present: " << why; \
  } while (0)

void cudaOk(cudaError_t e, const char* what);

class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  void upload(const void* src, size_t bytes);
  std::vector<uint8_t> download(size_t bytes) const;

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// fp32 values, then stored as `type` (fp32, bf16 or fp16 bytes).
std::vector<uint8_t> asType(const std::vector<float>& x, cclDataType_t type);
size_t typeBytes(cclDataType_t type);

enum class Input { kNormal, kMixedScales, kSpecials, kTies };
std::vector<float> makeInput(Input kind, size_t n, uint32_t seed, uint32_t blockSize);

std::vector<uint8_t> bytesOf(const std::vector<float>& v);

// A stream encoded on the CPU, and the same input encoded on the GPU.
struct EncodePair {
  std::vector<uint8_t> cpu, gpu;
  uint64_t gpuBytes = 0;
  std::vector<float> cpuResidual, gpuResidual;  // empty without error feedback
};
EncodePair encodeBoth(const Params& p, const std::vector<float>& x, cclDataType_t type,
                      const std::vector<float>* residual);

// GPU decode of `stream` into `type` (y pre-filled with a marker); returns y's bytes and
// sets status.
std::vector<uint8_t> gpuDecode(const std::vector<uint8_t>& stream, const Expect& e, size_t n, cclDataType_t type,
                               uint32_t& status);
std::vector<float> gpuAccumulate(const std::vector<uint8_t>& stream, const Expect& e, const std::vector<float>& acc,
                                 uint32_t& status);

}  // namespace ccl::codec::gputest
