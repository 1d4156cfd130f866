// SPDX-License-Identifier: BSD-3-Clause
// The byte stream every codec writes: a 32-byte little-endian header, then the codec's
// sections, each starting on a 16-byte boundary.
//
//   none        fp32 values
//   quantizers  scales[nblocks] | codes (packed) | raw blocks[aux]: {u32 block, u32 0, fp32 x[blockSize]}
//               (a partial last block is zero-padded in its raw entry)
//   topk, threshold  values[aux] (fp32 or fp16) | indices (indexBytes: LEB128 gaps or bitmap)
//   randk       u64 seed | values[aux]  (positions are regenerated from the seed)
//   powersgd    P[rows x r] fp32 (orthonormal columns) | Q[cols x r] fp32; the header's
//               blockSize is r and aux is cols, rows = ceil(count / cols); y = (P Q^T)[0, count)
//
// A scale equal to the raw marker (fp32/fp16 NaN, e8m0 0xff) means the block's elements
// are in the raw section instead, exactly as given (non-finite input, or a scale out of range).
// A fixed-length quantizer stream (kFlagFixedLength) has no raw section, so its length is a
// function of its codec, count and block size alone: what a link that cannot tell its peer a
// length (NCCL) needs to post a stream smaller than the data. There the marker means the
// block held a NaN or an infinity, and every element of it decodes as NaN. A sparsified
// stream cannot drop a non-finite value unseen (a sample or a threshold would lose it): an
// input holding one sets kFlagNonFinite, and the whole stream decodes as NaN, its block.
//
// Everything here is written once for the CPU codecs and the CUDA kernels: the layout, the
// header's byte order and its checks (headerProblem). The host's readHeader (wire.cc) turns
// a problem into an exception; the kernels into a status word.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ccl/ccl.h"
#include "codecs/codec_table.h"
#include "common/floatconv.h"

namespace ccl::codec {

constexpr uint32_t kWireMagic = 0x5a4c4343u;  // "CCLZ"
constexpr uint8_t kWireVersion = 1;
constexpr size_t kHeaderBytes = 32;
constexpr size_t kSectionAlign = 16;
// Element counts beyond this are refused (keeps every size computation far from overflow).
constexpr uint64_t kMaxCount = 1ull << 40;
constexpr uint32_t kMaxBlockSize = 65536;
// Sparse streams index their elements with 32 bits.
constexpr uint64_t kMaxSparseCount = 0xffffffffull;
// Bytes of one LEB128 gap at most (a 32-bit index).
constexpr uint64_t kMaxGapBytes = 5;
// Largest rank of a low-rank stream.
constexpr uint32_t kMaxLowRank = 4096;

enum WireFlags : uint8_t {
  kFlagFp16Scales = 1,    // int codecs: fp16 scales
  kFlagFp16Values = 2,    // sparsifiers: fp16 values
  kFlagBitmap = 4,        // sparsifiers: bitmap indices instead of LEB128 gaps
  kFlagStochastic = 8,    // informational: stochastic rounding was used
  kFlagFixedLength = 16,  // quantizers: no raw section (aux 0, fp32 or e8m0 scales)
  kFlagNonFinite = 32,    // sparsifiers: the input held a NaN or an infinity; every element decodes as NaN
};

struct Header {
  uint32_t magic = kWireMagic;
  uint8_t version = kWireVersion;
  uint8_t codec = 0;
  uint8_t flags = 0;
  uint8_t reserved = 0;
  uint32_t blockSize = 0;   // quantizers; low-rank: the rank r; 0 otherwise
  uint32_t indexBytes = 0;  // topk/threshold: bytes of the index section; nvfp4: tensorScaleOf
  uint64_t count = 0;       // elements encoded
  uint64_t aux = 0;         // quantizers: raw blocks; sparsifiers: kept elements; low-rank: cols
};
static_assert(sizeof(Header) == kHeaderBytes);

// Byte offsets of a stream's sections, derived from its header alone.
struct Layout {
  size_t scales = 0;  // quantizers
  size_t codes = 0;   // quantizers (element codes); sparsifiers: values; low-rank: P
  size_t raw = 0;     // quantizers: raw section; sparsifiers: index section; low-rank: Q
  size_t total = 0;   // bytes of the whole stream
};

// Rows of a low-rank stream's matrix: count elements in rows of `cols`.
CCL_HD constexpr uint64_t lowRankRows(uint64_t count, uint64_t cols) { return cols ? (count + cols - 1) / cols : 0; }

CCL_HD constexpr uint64_t alignUp(uint64_t v) { return (v + kSectionAlign - 1) & ~uint64_t{kSectionAlign - 1}; }

CCL_HD constexpr uint64_t rawEntryBytes(uint32_t blockSize) { return 8 + uint64_t{blockSize} * 4; }

CCL_HD constexpr uint64_t blocksOf(uint64_t count, uint32_t blockSize) { return (count + blockSize - 1) / blockSize; }

// Bytes of one stored block scale of a quantizer.
CCL_HD constexpr uint64_t scaleBytes(int codec, uint8_t flags) {
  const ScaleFormat f = codecInfo(codec).scale;
  return f == ScaleFormat::kE8m0 || f == ScaleFormat::kE4m3Tensor ? 1 : (flags & kFlagFp16Scales) ? 2 : 4;
}

// A stream of a codec with a tensor scale (nvfp4) keeps it, as fp32 bits, in the header's
// index-bytes word, which no other quantizer uses: the sections and the stream's length
// stay a function of codec, count and block size.
CCL_HD float tensorScaleOf(const Header& h) { return fp::bitsFloat(h.indexBytes); }
CCL_HD void setTensorScale(Header& h, float t) { h.indexBytes = fp::floatBits(t); }
// What every element of a marked block (a fixed-length quantizer stream's non-finite block,
// a sparsified stream with kFlagNonFinite) decodes to, on the CPU and the GPU alike: fp32's
// quiet NaN.
CCL_HD float markedBlockValue() { return fp::bitsFloat(0x7fc00000u); }

// Where storeHeader puts Header::flags.
constexpr size_t kFlagsByte = 6;
// A random-k allreduce that sums its streams' values over the ranks (a ring of them) does not
// sum their headers, so a rank's kFlagNonFinite would stay on that rank. It travels as one
// more fp32 in the sum instead: nonFiniteNews, 0 or NaN where the flag is set, so that the
// sum is NaN when any rank's flag was set; takeNonFiniteNews then sets the flag of the
// stream whose values it was summed with. Once for the CPU and the GPU (codec::runStage).
CCL_HD float nonFiniteNews(const uint8_t* stream) {
  return (stream[kFlagsByte] & kFlagNonFinite) ? markedBlockValue() : 0.0f;
}
CCL_HD void takeNonFiniteNews(float news, uint8_t* stream) {
  if (!(news == 0.0f)) stream[kFlagsByte] = static_cast<uint8_t>(stream[kFlagsByte] | kFlagNonFinite);
}

// What a rank writes in place of a stream once its call has failed (a decode refused, a
// step failed): a header whose reserved byte holds this mark and nothing after it. Every
// decoder refuses it (headerProblem's first check), so a peer's call fails with the news
// instead of decoding what the failed call left in its buffers. The stream executors write
// it (coll::HostKernels, the CUDA encoders through Workspace::poison).
constexpr uint8_t kFailedSenderMark = 0xfa;
CCL_HD constexpr Header failedSenderHeader() {
  Header h;
  h.reserved = kFailedSenderMark;
  return h;
}
CCL_HD constexpr bool failedSender(const Header& h) {
  return h.magic == kWireMagic && h.version == kWireVersion && h.reserved == kFailedSenderMark;
}

// fp32 bits of math::kNvfp4MinTensorScale (2^-117), for headerProblem's constant evaluation.
constexpr uint32_t kMinTensorScaleBits = 10u << 23;

// Flags a stream of `codec` may carry.
CCL_HD constexpr uint8_t allowedFlags(int codec) {
  const CodecInfo c = codecInfo(codec);
  if (c.family == Family::kQuantizer) return kFlagStochastic | kFlagFixedLength | (c.fp16Scales ? kFlagFp16Scales : 0);
  if (c.family == Family::kSparsifier)
    return kFlagFp16Values | kFlagNonFinite | (c.selection != Selection::kRandom ? kFlagBitmap : 0);
  return 0;
}

// Layout for a header whose fields are range-checked (headerProblem returned null).
CCL_HD constexpr Layout layoutOf(const Header& h) {
  Layout l;
  const Family family = codecInfo(h.codec).family;
  if (family == Family::kQuantizer) {
    l.scales = kHeaderBytes;
    l.codes = alignUp(l.scales + blocksOf(h.count, h.blockSize) * scaleBytes(h.codec, h.flags));
    l.raw = alignUp(l.codes + (h.count * codeBits(h.codec) + 7) / 8);
    l.total = l.raw + h.aux * rawEntryBytes(h.blockSize);
  } else if (family == Family::kSparsifier) {
    const uint64_t valueBytes = (h.flags & kFlagFp16Values) ? 2 : 4;
    l.codes = kHeaderBytes + (codecInfo(h.codec).selection == Selection::kRandom ? 8 : 0);
    l.raw = alignUp(l.codes + h.aux * valueBytes);
    l.total = l.raw + h.indexBytes;
  } else if (family == Family::kLowRank) {
    l.codes = kHeaderBytes;
    l.raw = alignUp(l.codes + lowRankRows(h.count, h.aux) * h.blockSize * 4);
    l.total = l.raw + h.aux * h.blockSize * 4;
  } else {
    l.codes = kHeaderBytes;
    l.total = kHeaderBytes + h.count * 4;
  }
  return l;
}

// Why the header cannot start a valid stream of inBytes bytes, or null when it can. Checks
// everything the header alone decides (the sections' contents are the decoders' to check).
CCL_HD constexpr const char* headerProblem(const Header& h, uint64_t inBytes) {
  if (failedSender(h)) return "sent by a rank whose call had already failed";
  if (h.magic != kWireMagic) return "bad magic";
  if (h.version != kWireVersion) return "unsupported version";
  if (!validCodec(h.codec)) return "unknown codec";
  if (h.reserved != 0) return "reserved byte set";
  if (h.count > kMaxCount) return "element count too large";
  if (h.flags & ~allowedFlags(h.codec)) return "flags not valid for this codec";
  const CodecInfo c = codecInfo(h.codec);
  if (c.family == Family::kQuantizer) {
    if (h.blockSize == 0 || h.blockSize % 8 != 0 || h.blockSize > kMaxBlockSize) return "bad block size";
    if (h.aux > blocksOf(h.count, h.blockSize)) return "more raw blocks than blocks";
    if ((h.flags & kFlagFixedLength) && h.aux != 0) return "raw blocks in a fixed-length stream";
    if ((h.flags & kFlagFixedLength) && (h.flags & kFlagFp16Scales)) return "fp16 scales in a fixed-length stream";
    if (tensorScaled(h.codec)) {
      // What nvfp4TensorScale writes: finite, and at least its smallest.
      if (!(h.indexBytes >= kMinTensorScaleBits && h.indexBytes < 0x7f800000u)) return "bad tensor scale";
    } else if (h.indexBytes != 0) {
      return "index bytes set for a quantizer";
    }
  } else if (c.family == Family::kSparsifier) {
    if (h.blockSize != 0) return "block size set for a sparsifier";
    if (h.count > kMaxSparseCount) return "sparse stream over 2^32 elements";
    if (h.aux > h.count) return "more kept elements than elements";
    if (c.selection == Selection::kRandom) {
      if (h.indexBytes != 0) return "index bytes set for randk";
    } else if (h.flags & kFlagBitmap) {
      if (h.indexBytes != (h.count + 7) / 8) return "bitmap size does not match the count";
    } else if (h.indexBytes > h.aux * kMaxGapBytes) {
      return "index section too long";
    }
  } else if (c.family == Family::kLowRank) {
    if (h.indexBytes != 0) return "index bytes set for a low-rank stream";
    if (h.count == 0) {
      if (h.blockSize != 0 || h.aux != 0) return "rank or shape set for an empty low-rank stream";
    } else {
      if (h.aux == 0 || h.aux > h.count) return "low-rank columns out of range";
      const uint64_t rows = lowRankRows(h.count, h.aux);
      if (h.blockSize == 0 || h.blockSize > kMaxLowRank || h.blockSize > rows || h.blockSize > h.aux)
        return "low-rank rank out of range";
    }
  } else if (h.flags || h.blockSize || h.indexBytes || h.aux) {
    return "fields set for codec none";
  }
  if (layoutOf(h).total > inBytes) return "truncated";
  return nullptr;
}

// Little-endian access at any alignment.
CCL_HD constexpr uint64_t loadLe(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int k = 0; k < bytes; ++k) v |= static_cast<uint64_t>(p[k]) << (8 * k);
  return v;
}
CCL_HD constexpr void storeLe(uint8_t* p, uint64_t v, int bytes) {
  for (int k = 0; k < bytes; ++k) p[k] = static_cast<uint8_t>(v >> (8 * k));
}

CCL_HD constexpr void storeHeader(const Header& h, uint8_t* out) {
  storeLe(out, h.magic, 4);
  out[4] = h.version, out[5] = h.codec, out[kFlagsByte] = h.flags, out[7] = h.reserved;
  storeLe(out + 8, h.blockSize, 4);
  storeLe(out + 12, h.indexBytes, 4);
  storeLe(out + 16, h.count, 8);
  storeLe(out + 24, h.aux, 8);
}

CCL_HD constexpr Header loadHeader(const uint8_t* in) {
  Header h;
  h.magic = static_cast<uint32_t>(loadLe(in, 4));
  h.version = in[4], h.codec = in[5], h.flags = in[kFlagsByte], h.reserved = in[7];
  h.blockSize = static_cast<uint32_t>(loadLe(in + 8, 4));
  h.indexBytes = static_cast<uint32_t>(loadLe(in + 12, 4));
  h.count = loadLe(in + 16, 8);
  h.aux = loadLe(in + 24, 8);
  return h;
}

void writeHeader(const Header& h, void* out);

// Reads and validates the header of `in` (inBytes long) with headerProblem. Throws
// Error(cclInvalidUsage) naming the first problem, or Error(cclRemoteError) for a failed
// sender's stream (the failure is the sender's).
Header readHeader(const void* in, size_t inBytes);

// Writes a failed sender's stream (failedSenderHeader) into out and returns its length, or
// returns 0 where out has no room for a header.
size_t writeFailedSender(void* out, size_t outBytes);

}  // namespace ccl::codec
