// The byte stream every codec writes: a 32-byte little-endian header, then the codec's
// sections, each starting on a 16-byte boundary.
//
//   none        fp32 values
//   quantisers  scales[nblocks] | codes (packed) | raw blocks[aux]: {u32 block, u32 0, fp32 x[blockSize]}
//               (a partial last block is zero-padded in its raw entry)
//   topk, threshold  values[aux] (fp32 or fp16) | indices (indexBytes: LEB128 gaps or bitmap)
//   randk       u64 seed | values[aux]  (positions are regenerated from the seed)
//
// A scale equal to the raw marker (fp32/fp16 NaN, e8m0 0xff) means the block's elements
// are in the raw section instead, exactly as given (non-finite input, or a scale out of range).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ccl/ccl.h"

namespace ccl::codec {

constexpr uint32_t kWireMagic = 0x5a4c4343u;  // "CCLZ"
constexpr uint8_t kWireVersion = 1;
constexpr size_t kHeaderBytes = 32;
constexpr size_t kSectionAlign = 16;
// Element counts beyond this are refused (keeps every size computation far from overflow).
constexpr uint64_t kMaxCount = 1ull << 40;
constexpr uint32_t kMaxBlockSize = 65536;

enum WireFlags : uint8_t {
  kFlagFp16Scales = 1,  // int codecs: fp16 scales
  kFlagFp16Values = 2,  // sparsifiers: fp16 values
  kFlagBitmap = 4,      // sparsifiers: bitmap indices instead of LEB128 gaps
  kFlagStochastic = 8,  // informational: stochastic rounding was used
};

struct Header {
  uint32_t magic = kWireMagic;
  uint8_t version = kWireVersion;
  uint8_t codec = 0;
  uint8_t flags = 0;
  uint8_t reserved = 0;
  uint32_t blockSize = 0;   // quantisers; 0 otherwise
  uint32_t indexBytes = 0;  // topk/threshold: bytes of the index section
  uint64_t count = 0;       // elements encoded
  uint64_t aux = 0;         // quantisers: raw blocks; sparsifiers: kept elements
};
static_assert(sizeof(Header) == kHeaderBytes);

inline size_t rawEntryBytes(uint32_t blockSize) { return 8 + size_t{blockSize} * 4; }

inline size_t alignUp(size_t v) { return (v + kSectionAlign - 1) & ~(kSectionAlign - 1); }

// Byte offsets of a stream's sections, derived from its header alone.
struct Layout {
  size_t scales = 0;  // quantisers
  size_t codes = 0;   // quantisers (element codes); sparsifiers: values
  size_t raw = 0;     // quantisers: raw section; sparsifiers: index section
  size_t total = 0;   // bytes of the whole stream
};

// Bits per element code of a quantiser (0 for other codecs).
int codeBits(cclCodec_t codec);
bool isQuantizer(cclCodec_t codec);
bool isSparsifier(cclCodec_t codec);
size_t scaleBytes(cclCodec_t codec, uint8_t flags);

// Layout for a header whose fields are already range-checked.
Layout layoutOf(const Header& h);

void writeHeader(const Header& h, void* out);

// Reads and validates the header of `in` (inBytes long): magic, version, codec, flags,
// block size, counts, and that inBytes covers the whole stream. Throws
// Error(cclInvalidUsage) naming the first problem.
Header readHeader(const void* in, size_t inBytes);

}  // namespace ccl::codec
