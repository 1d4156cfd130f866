#include "codecs/wire.h"

#include <cstring>
#include <string>

#include "common/error.h"

namespace ccl::codec {

int codeBits(cclCodec_t codec) {
  switch (codec) {
    case cclCodecFp8E4m3:
    case cclCodecFp8E5m2:
    case cclCodecMxfp8E4m3:
    case cclCodecInt8:
      return 8;
    case cclCodecInt4:
      return 4;
    case cclCodecInt2:
      return 2;
    default:
      return 0;
  }
}

bool isQuantizer(cclCodec_t codec) { return codeBits(codec) != 0; }

bool isSparsifier(cclCodec_t codec) {
  return codec == cclCodecTopK || codec == cclCodecRandK || codec == cclCodecThreshold;
}

size_t scaleBytes(cclCodec_t codec, uint8_t flags) {
  if (codec == cclCodecMxfp8E4m3) return 1;
  return (flags & kFlagFp16Scales) ? 2 : 4;
}

Layout layoutOf(const Header& h) {
  const auto codec = static_cast<cclCodec_t>(h.codec);
  Layout l;
  if (codec == cclCodecNone) {
    l.codes = kHeaderBytes;
    l.total = kHeaderBytes + h.count * 4;
  } else if (isQuantizer(codec)) {
    const uint64_t blocks = (h.count + h.blockSize - 1) / h.blockSize;
    l.scales = kHeaderBytes;
    l.codes = alignUp(l.scales + blocks * scaleBytes(codec, h.flags));
    l.raw = alignUp(l.codes + (h.count * codeBits(codec) + 7) / 8);
    l.total = l.raw + h.aux * rawEntryBytes(h.blockSize);
  } else {
    const size_t valueBytes = (h.flags & kFlagFp16Values) ? 2 : 4;
    l.codes = kHeaderBytes + (codec == cclCodecRandK ? 8 : 0);
    l.raw = alignUp(l.codes + h.aux * valueBytes);
    l.total = l.raw + h.indexBytes;
  }
  return l;
}

void writeHeader(const Header& h, void* out) { std::memcpy(out, &h, sizeof(h)); }

namespace {

void fail(const std::string& what) { throw Error(cclInvalidUsage, "compressed stream: " + what); }

void checkQuantizerHeader(const Header& h, cclCodec_t codec) {
  if (h.blockSize == 0 || h.blockSize % 8 != 0 || h.blockSize > kMaxBlockSize)
    fail("bad block size " + std::to_string(h.blockSize));
  const uint8_t allowed = (codec == cclCodecInt8 || codec == cclCodecInt4 || codec == cclCodecInt2)
                              ? (kFlagFp16Scales | kFlagStochastic)
                              : kFlagStochastic;
  if (h.flags & ~allowed) fail("flags not valid for this codec");
  const uint64_t blocks = (h.count + h.blockSize - 1) / h.blockSize;
  if (h.aux > blocks) fail("more raw blocks than blocks");
  if (h.indexBytes != 0) fail("index bytes set for a quantiser");
}

void checkSparseHeader(const Header& h, cclCodec_t codec) {
  if (h.blockSize != 0) fail("block size set for a sparsifier");
  if (h.aux > h.count) fail("more kept elements than elements");
  const uint8_t allowed = codec == cclCodecRandK ? kFlagFp16Values : (kFlagFp16Values | kFlagBitmap);
  if (h.flags & ~allowed) fail("flags not valid for this codec");
  if (codec == cclCodecRandK && h.indexBytes != 0) fail("index bytes set for randk");
  if ((h.flags & kFlagBitmap) && h.indexBytes != (h.count + 7) / 8) fail("bitmap size does not match the count");
  if (codec != cclCodecRandK && !(h.flags & kFlagBitmap) && h.indexBytes > h.aux * 5) fail("index section too long");
  if (h.count > 0xffffffffull) fail("sparse stream over 2^32 elements");
}

}  // namespace

Header readHeader(const void* in, size_t inBytes) {
  if (in == nullptr && inBytes != 0) fail("null buffer");
  if (inBytes < kHeaderBytes) fail("shorter than its header (" + std::to_string(inBytes) + " bytes)");
  Header h;
  std::memcpy(&h, in, sizeof(h));
  if (h.magic != kWireMagic) fail("bad magic");
  if (h.version != kWireVersion) fail("unsupported version " + std::to_string(h.version));
  if (h.codec >= cclNumCodecs) fail("unknown codec " + std::to_string(h.codec));
  if (h.reserved != 0) fail("reserved byte set");
  if (h.count > kMaxCount) fail("element count too large");
  const auto codec = static_cast<cclCodec_t>(h.codec);
  if (codec == cclCodecNone) {
    if (h.flags || h.blockSize || h.indexBytes || h.aux) fail("fields set for codec none");
  } else if (isQuantizer(codec)) {
    checkQuantizerHeader(h, codec);
  } else {
    checkSparseHeader(h, codec);
  }
  const Layout l = layoutOf(h);
  if (l.total > inBytes) fail("truncated: needs " + std::to_string(l.total) + " bytes, got " + std::to_string(inBytes));
  return h;
}

}  // namespace ccl::codec
