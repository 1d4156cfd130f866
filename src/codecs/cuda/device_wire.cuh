// SPDX-License-Identifier: BSD-3-Clause
// What the decode kernels share about a stream: its checked header and a status word. The
// layout, byte order and header checks themselves are wire.h's, written once for both sides.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ccl/ccl.h"
#include "codecs/cuda/codec_kernels.h"
#include "codecs/wire.h"

namespace ccl::codec::cuda {

// The header checks of wire.h plus the receiver's expectations; true if acceptable.
// The caller has checked inBytes >= kHeaderBytes.
__host__ __device__ inline bool headerValid(const Header& h, uint64_t inBytes, uint64_t count, int codec) {
  return h.codec == codec && h.count == count && headerProblem(h, inBytes) == nullptr;
}

// What the decode kernels share, in the workspace: the checked header and the verdict.
struct DecodeState {
  Header h;
  uint32_t status;
  uint32_t pad;
  unsigned long long counter;  // quantizers: blocks whose scale is the raw marker
};

// On the device: clears *st, then reads and checks the header (one thread).
__device__ inline void readHeaderInto(const uint8_t* in, uint64_t inBytes, uint64_t count, int codec, DecodeState* st) {
  st->status = 0;
  st->pad = 0;
  st->counter = 0;
  st->h = Header{};
  if (inBytes < kHeaderBytes) {
    st->status = kStatusBadHeader;
    return;
  }
  st->h = loadHeader(in);
  if (!headerValid(st->h, inBytes, count, codec))
    st->status = failedSender(st->h) ? kStatusFailedSender : kStatusBadHeader;
}

// Whether the call an encode belongs to has failed before it (Workspace::poison, read when
// the encode writes its header): it then writes a failed sender's stream.
__device__ inline bool callFailed(const uint32_t* poison) {
  return poison != nullptr && *const_cast<const volatile uint32_t*>(poison) != 0;
}

// Clears *st, then reads and checks the header on the GPU; later kernels run only while
// st->status stays 0.
void startDecode(const void* in, size_t inBytes, const Expect& expect, DecodeState* st, cudaStream_t stream);

// Copies st->status to the caller's word (orInto: ORs it in, a nonzero status only).
void finishDecode(DecodeState* st, uint32_t* status, bool orInto, cudaStream_t stream);

// Grid for a grid-stride loop over `items` with `threads` per block.
inline unsigned gridFor(uint64_t items, unsigned threads, unsigned cap = 4096) {
  const uint64_t g = (items + threads - 1) / threads;
  return static_cast<unsigned>(g == 0 ? 1 : g > cap ? cap : g);
}

}  // namespace ccl::codec::cuda
