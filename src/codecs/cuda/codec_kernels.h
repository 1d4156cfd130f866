// SPDX-License-Identifier: BSD-3-Clause
// CUDA versions of the codecs of codecs/codec.h. They write the same bytes as the CPU encoder
// for the same input and parameters (so either side decodes the other's streams), and run
// stream-ordered: every call only enqueues work on `stream`, nothing waits for the GPU.
//
// All data pointers are device pointers. Results that depend on the data (the encoded size,
// whether a received stream is valid) are written by the GPU to a device word the caller
// passes; read it after synchronising the stream.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "codecs/codec.h"

namespace ccl::codec::cuda {

// Device scratch for the kernels (CUB temporaries, per-block flags, staged input, decode
// state). Grows on demand with stream-ordered allocation and is reused across calls; one
// workspace must not be used by two streams at once.
class Workspace {
 public:
  Workspace() = default;
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  // A device buffer of at least `bytes`, valid for work enqueued on `stream` after this call.
  void* get(size_t bytes, cudaStream_t stream);
  size_t capacity() const { return bytes_; }
  // How decodes made with this workspace report: false (the default) stores their status
  // word, true ORs it in (several decodes of one call share a word, checked once).
  bool orStatus = false;
  // The call's status word (decodeBatch's, device or host-mapped) while a stream executor
  // enqueues the encodes of a call that has decoded, else null: an encode made with this
  // workspace that finds it nonzero when it runs writes a failed sender's stream
  // (codec::failedSenderHeader) in place of its header, so the peers' decodes refuse what
  // the failed call would have sent.
  const uint32_t* poison = nullptr;

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Bits of the status word written by decode / decodeAccumulate; 0 means the stream was
// valid and has been decoded.
enum StatusBits : uint32_t {
  kStatusBadHeader = 1,  // header fields, expected codec/count, or inBytes too short
  kStatusBadScale = 2,   // a block scale the encoder never writes
  kStatusBadRawBlocks = 4,
  kStatusBadIndices = 8,     // sparsifier index section (or randk with nothing kept)
  kStatusFailedSender = 16,  // a failed sender's stream (codec::failedSenderHeader)
};

// Throws the error a non-zero status word describes: Error(cclRemoteError) when the only
// problem is a failed sender's stream (the failure is that rank's), else
// Error(cclInvalidUsage).
void throwIfInvalid(uint32_t status);

// As codec::encode: encodes n elements of x (`type` fp32, bf16 or fp16) into out
// (outBytes >= maxEncodedBytes(p, n)). With `residual` (n fp32) it encodes v = x + residual
// and leaves residual = v - decode(out): the error-feedback update, fused into the encoder.
// The stream's length is written to *encodedBytes (device or host-mapped memory; may be
// null). Throws Error(cclInvalidArgument) for bad parameters or buffers, before enqueuing.
void encode(const Params& p, const void* x, cclDataType_t type, size_t n, void* out, size_t outBytes, float* residual,
            uint64_t* encodedBytes, Workspace& ws, cudaStream_t stream);

// One stream of a batch of encodes (encodeBatch): its input, output and residual as
// encode takes them, and its own seed.
struct EncodeItem {
  const void* x;
  size_t n;
  void* out;
  size_t outBytes;
  float* residual;
  uint64_t seed;
};

// Every item encoded with `p` (and the item's seed) as encode would, byte for byte, without
// lengths (the caller knows them: fixed-length streams). Fixed-length quantizer streams take
// one launch per 160 streams (three with a tensor scale, nvfp4); any other codec goes item by
// item.
// Throws as encode does, for any item, before anything is enqueued.
void encodeBatch(const Params& p, cclDataType_t type, std::span<const EncodeItem> items, Workspace& ws,
                 cudaStream_t stream);

// One stream of a batch of decodes (decodeBatch): the stream as decode reads it (inBytes: the
// most it can span) and where its `count` elements go.
struct DecodeRequest {
  const void* in;
  size_t inBytes;
  uint64_t count;
  void* y;
};

// Every request decoded as decode would (accumulate: added into fp32 y as decodeAccumulate),
// each stream validated before anything of it is written, the status of all ORed into
// *status (stored by the first unless ws.orStatus). Quantizer streams take three launches per
// 240 streams; other codecs go stream by stream. Throws as decode does, before enqueuing.
void decodeBatch(std::span<const DecodeRequest> items, int codec, cclDataType_t type, bool accumulate, uint32_t* status,
                 Workspace& ws, cudaStream_t stream);

// One hop of a batch of fused hops (decodeAddEncodeBatch): the received stream as decode
// reads it, the n local elements, and the outgoing stream, residual and seed as encode takes
// them; `divide`: the sum is divided by the batch's divisor before it is encoded.
struct HopItem {
  const void* in;
  size_t inBytes;
  const void* local;
  uint64_t n;
  void* out;
  size_t outBytes;
  float* residual;
  uint64_t seed;
  bool divide;
};

// Whether decodeAddEncodeBatch takes hops of codec p: fixed-length quantizer streams without
// a tensor scale (what the device links carry); others go as a decode-accumulate into an
// fp32 sum and an encode of it.
bool fusesHops(const Params& p);

// Every hop as codec::decodeAddEncode does it (local of `type`), byte for byte, in one kernel
// that reads the received stream and the local elements once and writes the outgoing stream
// (three launches per 120 hops: the streams' headers and validation first). A received
// stream must be valid and fixed-length; a hop whose stream is not writes a failed sender's
// stream (codec::failedSenderHeader; its residual as it was), and its status goes into
// *status as decodeBatch's. With ws.orStatus and *status already set (the call failed before
// the batch), every hop writes a failed sender's stream.
// Throws Error(cclInvalidArgument) before enqueuing when !fusesHops(p) or an item is bad.
void decodeAddEncodeBatch(const Params& p, cclDataType_t type, float divisor, std::span<const HopItem> items,
                          uint32_t* status, Workspace& ws, cudaStream_t stream);

// As codec::decode, for a stream in device memory. expect.codec must name the codec (the
// kernels are chosen on the host). The stream is validated on the GPU first; y is written
// only if it is valid. *status (device or host-mapped) receives 0 or StatusBits; with
// ws.orStatus they are ORed into it (0 leaves it as it was).
void decode(const void* in, size_t inBytes, const Expect& expect, void* y, cclDataType_t type, uint32_t* status,
            Workspace& ws, cudaStream_t stream);

// As decode, but acc[i] += element i (fp32); acc is untouched if the stream is invalid.
void decodeAccumulate(const void* in, size_t inBytes, const Expect& expect, float* acc, uint32_t* status, Workspace& ws,
                      cudaStream_t stream);

}  // namespace ccl::codec::cuda
