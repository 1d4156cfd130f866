// SPDX-License-Identifier: BSD-3-Clause
// What the quantizer kernels that read a stream share (the decoders, the fused hop): a view
// of its checked header, its scales and codes, the validation that runs before anything is
// written, and the batch tables of decode requests with their header and validation kernels.
#pragma once

#include "codecs/cuda/cuda_check.h"
#include "codecs/cuda/device_elements.cuh"
#include "codecs/cuda/device_wire.cuh"
#include "codecs/quantizer_kinds.h"

namespace ccl::codec::cuda::detail {
namespace {

constexpr unsigned kViewThreads = 256;

struct View {
  Header h;
  Layout l;
  uint64_t blocks;
  int bits;
  int scaleBytes;
  bool fp16;
  bool fixedLength;
  float t;  // the stream's tensor scale; 1 where its codec has none
};

__device__ inline View viewOf(const DecodeState* st) {
  View v;
  v.h = st->h;
  v.l = layoutOf(v.h);
  v.blocks = (v.h.count + v.h.blockSize - 1) / v.h.blockSize;
  v.bits = codeBits(v.h.codec);
  v.scaleBytes = static_cast<int>(scaleBytes(v.h.codec, v.h.flags));
  v.fp16 = (v.h.flags & kFlagFp16Scales) != 0;
  v.fixedLength = (v.h.flags & kFlagFixedLength) != 0;
  v.t = tensorScaled(v.h.codec) ? tensorScaleOf(v.h) : 1.0f;
  return v;
}

__device__ inline uint32_t scaleAt(const uint8_t* in, const View& v, uint64_t b) {
  return loadLe(in + kHeaderBytes + b * v.scaleBytes, v.scaleBytes);
}

__device__ inline uint64_t entryBytes(const View& v) { return rawEntryBytes(v.h.blockSize); }

// Every scale and raw entry of the stream, the thread's share of them (the x dimension of
// the grid): raw markers counted, bad ones ORed into the status.
template <class K>
__device__ void validate(const uint8_t* in, DecodeState* st) {
  if (st->status) return;
  const View v = viewOf(st);
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  const uint64_t first = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  unsigned long long marked = 0;
  uint32_t bad = 0;
  for (uint64_t b = first; b < v.blocks; b += stride) {
    float s;
    const ScaleRead r = K::readScale(scaleAt(in, v, b), v.fp16, v.t, s);
    marked += r == ScaleRead::kRaw ? 1 : 0;
    bad |= r == ScaleRead::kInvalid ? kStatusBadScale : 0u;
  }
  for (uint64_t r = first; r < v.h.aux; r += stride) {
    const uint8_t* entry = in + v.l.raw + r * entryBytes(v);
    const uint32_t block = loadLe(entry, 4);
    const int64_t prev = r == 0 ? -1 : static_cast<int64_t>(loadLe(entry - entryBytes(v), 4));
    float s;
    const bool ok = static_cast<int64_t>(block) > prev && block < v.blocks && loadLe(entry + 4, 4) == 0 &&
                    K::readScale(scaleAt(in, v, block), v.fp16, v.t, s) == ScaleRead::kRaw;
    bad |= ok ? 0u : kStatusBadRawBlocks;
  }
  if (marked) atomicAdd(&st->counter, marked);
  if (bad) atomicOr(&st->status, bad);
}

// The status a validated stream ends with: the raw entries must be exactly the marked
// blocks (equal counts, given validate's checks); a fixed-length stream has no entries.
__device__ inline uint32_t finalStatus(const DecodeState* st) {
  if (st->status) return st->status;
  return !(st->h.flags & kFlagFixedLength) && st->counter != st->h.aux ? kStatusBadRawBlocks : 0u;
}

__device__ inline uint64_t loadCodes(const uint8_t* p, uint32_t bytes, int bits, bool vec) {
  if (vec && bytes == static_cast<uint32_t>(bits)) {
    if (bits == 8) return *reinterpret_cast<const uint64_t*>(p);
    if (bits == 4) return *reinterpret_cast<const uint32_t*>(p);
    return *reinterpret_cast<const uint16_t*>(p);
  }
  uint64_t w = 0;
  for (uint32_t k = 0; k < bytes; ++k) w |= static_cast<uint64_t>(p[k]) << (8 * k);
  return w;
}

// A batch of streams of one codec, decoded in three launches over a table in the kernels'
// parameters (blockIdx.y: the stream): every header, then every stream's validation, then
// every valid stream's elements (raw entries included) with its status ORed into the call's
// word. A stream is written only once all of it is known valid, as one stream alone.
constexpr unsigned kDecodeBatchStreams = 240;
struct DecodeItem {
  const uint8_t* in;
  uint64_t inBytes;
  uint64_t count;
  void* y;
  DecodeState* st;
  bool vecIn, vecY;  // 16-byte aligned: vector loads and stores
};
struct DecodeTable {
  DecodeItem d[kDecodeBatchStreams];
  uint32_t count;
  int codec;
  uint32_t* status;
  bool orInto;  // false: the first header thread clears *status first (a call's first decodes)
  // A fused hop batch's first table: where the first header thread keeps *status as it was
  // before the batch (0 where it clears it): what the hops' encodes read as
  // HopTable::before, untouched by the batch's own refusals. Null otherwise.
  uint32_t* before;
};
static_assert(sizeof(DecodeTable) <= 32000, "a decode table must fit a kernel's parameters");

__global__ void batchHeaders(const __grid_constant__ DecodeTable t) {
  const unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k == 0 && t.before) *t.before = t.orInto ? *t.status : 0u;
  if (k == 0 && !t.orInto) *t.status = 0;
  if (k < t.count) readHeaderInto(t.d[k].in, t.d[k].inBytes, t.d[k].count, t.codec, t.d[k].st);
}

template <class K>
__global__ void __launch_bounds__(kViewThreads) batchValidate(const __grid_constant__ DecodeTable t) {
  validate<K>(t.d[blockIdx.y].in, t.d[blockIdx.y].st);
}

}  // namespace
}  // namespace ccl::codec::cuda::detail
