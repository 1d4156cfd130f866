// SPDX-License-Identifier: BSD-3-Clause
// Host-side launchers of each codec family, called by the dispatch in codec_kernels.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "codecs/codec.h"
#include "codecs/cuda/codec_kernels.h"

namespace ccl::codec::cuda::detail {

// Splits one workspace allocation into 256-byte aligned parts: add() every part, then get().
class Carver {
 public:
  size_t add(size_t bytes) {
    const size_t at = used_;
    used_ += (bytes + 255) & ~size_t{255};
    return at;
  }
  size_t bytes() const { return used_ ? used_ : 256; }

 private:
  size_t used_ = 0;
};

template <class T>
T* at(void* base, size_t offset) {
  return reinterpret_cast<T*>(static_cast<char*>(base) + offset);
}

// Where decoded elements go: y as `type`, or added into an fp32 accumulator.
struct Target {
  void* y;
  cclDataType_t type;  // ignored when accumulating
  bool accumulate;
};

void quantizerEncode(const Params& p, const void* x, cclDataType_t type, size_t n, uint8_t* out, float* residual,
                     uint64_t* encodedBytes, Workspace& ws, cudaStream_t stream);
// A batch of fixed-length streams in one launch per 160 streams (three with a tensor scale:
// the absmax words, from `ws`, zeroed and filled first); false (nothing enqueued) for
// variable-length streams.
bool quantizerEncodeBatch(const Params& p, cclDataType_t type, std::span<const EncodeItem> items, Workspace& ws,
                          cudaStream_t stream);
// A batch of fused hops of fixed-length streams without a tensor scale (fusesHops(p)), three
// launches per 120: the received streams' headers, their validation, the hops.
void quantizerHopBatch(const Params& p, cclDataType_t type, float divisor, std::span<const HopItem> items,
                       uint32_t* status, bool orInto, Workspace& ws, cudaStream_t stream);
// A batch of quantizer streams of `codec`, three launches per 240 (checked by the caller).
void quantizerDecodeBatch(std::span<const DecodeRequest> items, int codec, Target target, uint32_t* status, bool orInto,
                          Workspace& ws, cudaStream_t stream);
void quantizerDecode(const uint8_t* in, size_t inBytes, const Expect& expect, Target target, uint32_t* status,
                     Workspace& ws, cudaStream_t stream);

void sparsifierEncode(const Params& p, const void* x, cclDataType_t type, size_t n, uint8_t* out, float* residual,
                      uint64_t* encodedBytes, Workspace& ws, cudaStream_t stream);
void sparsifierDecode(const uint8_t* in, size_t inBytes, const Expect& expect, Target target, uint32_t* status,
                      Workspace& ws, cudaStream_t stream);

}  // namespace ccl::codec::cuda::detail
