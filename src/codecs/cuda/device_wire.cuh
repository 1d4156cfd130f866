// The wire format (codecs/wire.h) on the device: little-endian byte access at any
// alignment, the section layout and the header checks of readHeader. wire.h's versions are
// host-only (out of line, throwing); these return a status instead.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ccl/ccl.h"
#include "codecs/cuda/codec_kernels.h"
#include "codecs/wire.h"

namespace ccl::codec::cuda {

__host__ __device__ inline int devCodeBits(int codec) {
  return codec == cclCodecInt4                                 ? 4
         : codec == cclCodecInt2                               ? 2
         : (codec >= cclCodecFp8E4m3 && codec <= cclCodecInt8) ? 8
                                                               : 0;
}
__host__ __device__ inline bool devIsSparsifier(int codec) {
  return codec == cclCodecTopK || codec == cclCodecRandK || codec == cclCodecThreshold;
}
__host__ __device__ inline uint64_t devScaleBytes(int codec, uint8_t flags) {
  return codec == cclCodecMxfp8E4m3 ? 1 : (flags & kFlagFp16Scales) ? 2 : 4;
}
__host__ __device__ inline uint64_t devAlignUp(uint64_t v) {
  return (v + kSectionAlign - 1) & ~uint64_t{kSectionAlign - 1};
}

// Same sections as codec::layoutOf.
__host__ __device__ inline Layout devLayout(const Header& h) {
  Layout l;
  if (h.codec == cclCodecNone) {
    l.codes = kHeaderBytes;
    l.total = kHeaderBytes + h.count * 4;
  } else if (devCodeBits(h.codec) != 0) {
    const uint64_t blocks = (h.count + h.blockSize - 1) / h.blockSize;
    l.scales = kHeaderBytes;
    l.codes = devAlignUp(l.scales + blocks * devScaleBytes(h.codec, h.flags));
    l.raw = devAlignUp(l.codes + (h.count * devCodeBits(h.codec) + 7) / 8);
    l.total = l.raw + h.aux * (8 + uint64_t{h.blockSize} * 4);
  } else {
    const uint64_t valueBytes = (h.flags & kFlagFp16Values) ? 2 : 4;
    l.codes = kHeaderBytes + (h.codec == cclCodecRandK ? 8 : 0);
    l.raw = devAlignUp(l.codes + h.aux * valueBytes);
    l.total = l.raw + h.indexBytes;
  }
  return l;
}

__host__ __device__ inline uint32_t loadLe(const uint8_t* p, int bytes) {
  uint32_t v = 0;
  for (int k = 0; k < bytes; ++k) v |= static_cast<uint32_t>(p[k]) << (8 * k);
  return v;
}
__host__ __device__ inline void storeLe(uint8_t* p, uint64_t v, int bytes) {
  for (int k = 0; k < bytes; ++k) p[k] = static_cast<uint8_t>(v >> (8 * k));
}
__host__ __device__ inline uint64_t loadLe64(const uint8_t* p) {
  return loadLe(p, 4) | (static_cast<uint64_t>(loadLe(p + 4, 4)) << 32);
}

__host__ __device__ inline void writeHeaderBytes(const Header& h, uint8_t* out) {
  storeLe(out, h.magic, 4);
  out[4] = h.version, out[5] = h.codec, out[6] = h.flags, out[7] = h.reserved;
  storeLe(out + 8, h.blockSize, 4);
  storeLe(out + 12, h.indexBytes, 4);
  storeLe(out + 16, h.count, 8);
  storeLe(out + 24, h.aux, 8);
}

__host__ __device__ inline Header readHeaderBytes(const uint8_t* in) {
  Header h;
  h.magic = loadLe(in, 4);
  h.version = in[4], h.codec = in[5], h.flags = in[6], h.reserved = in[7];
  h.blockSize = loadLe(in + 8, 4);
  h.indexBytes = loadLe(in + 12, 4);
  h.count = loadLe64(in + 16);
  h.aux = loadLe64(in + 24);
  return h;
}

// readHeader's checks plus the receiver's expectations; true if the header is acceptable.
// The caller has checked inBytes >= kHeaderBytes.
__host__ __device__ inline bool headerValid(const Header& h, uint64_t inBytes, uint64_t count, int codec) {
  if (h.magic != kWireMagic || h.version != kWireVersion || h.reserved != 0) return false;
  if (h.codec != codec || h.count != count || h.count > kMaxCount) return false;
  if (devCodeBits(codec) != 0) {
    if (h.blockSize == 0 || h.blockSize % 8 != 0 || h.blockSize > kMaxBlockSize) return false;
    const bool intCodec = codec == cclCodecInt8 || codec == cclCodecInt4 || codec == cclCodecInt2;
    const uint8_t allowed = intCodec ? (kFlagFp16Scales | kFlagStochastic) : kFlagStochastic;
    if ((h.flags & ~allowed) || h.indexBytes != 0) return false;
    if (h.aux > (h.count + h.blockSize - 1) / h.blockSize) return false;
  } else if (devIsSparsifier(codec)) {
    if (h.blockSize != 0 || h.aux > h.count || h.count > 0xffffffffull) return false;
    const bool randk = codec == cclCodecRandK;
    const uint8_t allowed = randk ? kFlagFp16Values : (kFlagFp16Values | kFlagBitmap);
    if (h.flags & ~allowed) return false;
    if (randk && h.indexBytes != 0) return false;
    if ((h.flags & kFlagBitmap) && h.indexBytes != (h.count + 7) / 8) return false;
    if (!randk && !(h.flags & kFlagBitmap) && h.indexBytes > h.aux * 5) return false;
  } else if (h.flags || h.blockSize || h.indexBytes || h.aux) {
    return false;
  }
  return devLayout(h).total <= inBytes;
}

// What the decode kernels share, in the workspace: the checked header and the verdict.
struct DecodeState {
  Header h;
  uint32_t status;
  uint32_t pad;
  unsigned long long counter;  // quantisers: blocks whose scale is the raw marker
};

// Clears *st, then reads and checks the header on the GPU; later kernels run only while
// st->status stays 0.
void startDecode(const void* in, size_t inBytes, const Expect& expect, DecodeState* st, cudaStream_t stream);

// Copies st->status to the caller's word.
void finishDecode(DecodeState* st, uint32_t* status, cudaStream_t stream);

// Grid for a grid-stride loop over `items` with `threads` per block.
inline unsigned gridFor(uint64_t items, unsigned threads, unsigned cap = 4096) {
  const uint64_t g = (items + threads - 1) / threads;
  return static_cast<unsigned>(g == 0 ? 1 : g > cap ? cap : g);
}

}  // namespace ccl::codec::cuda
