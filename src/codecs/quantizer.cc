// The CPU loops of the block quantisers. Each block is staged as fp32 (the input itself
// when it is fp32 and no residual is added), scanned for its absmax and non-finite values,
// then quantised element by element with the shared math of codecs/math/.
#include "codecs/quantizer.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "codecs/elements.h"
#include "codecs/quantizer_kinds.h"

namespace ccl::codec::detail {
namespace {

struct Geometry {
  uint64_t blocks;
  Layout layout;
};

Geometry geometry(const Header& h) { return Geometry{(h.count + h.blockSize - 1) / h.blockSize, layoutOf(h)}; }

// Absmax of v[0, len) and whether all of it is finite.
inline float blockAbsMax(const float* v, uint32_t len, bool& finite) {
  float m = 0.0f;
  uint32_t nonFinite = 0;
  for (uint32_t i = 0; i < len; ++i) {
    m = math::absMaxStep(m, v[i]);
    nonFinite |= (fp::floatBits(v[i]) & 0x7f800000u) == 0x7f800000u;
  }
  finite = nonFinite == 0;
  return m;
}

// Codes of v[0, len), len a multiple of 8 / K::kBits elements per byte, packed into out.
template <class K, bool kStochastic>
void quantizeCodes(const float* v, uint32_t len, float inv, uint8_t* out, math::RngKey key, uint64_t base) {
  constexpr int kPer = 8 / K::kBits;
  for (uint32_t j = 0; j < len / kPer; ++j) {
    uint32_t byte = 0;
    for (int t = 0; t < kPer; ++t) {
      const uint32_t i = j * kPer + t;
      uint32_t c;
      if constexpr (kStochastic) {
        c = K::quantStochastic(v[i], inv, math::rngBits(key, base + i));
      } else {
        c = K::quant(v[i], inv);
      }
      byte |= c << (t * K::kBits);
    }
    out[j] = static_cast<uint8_t>(byte);
  }
}

// Calls op(i, value) for the dequantised elements of a block's codes, i in [0, len).
template <class K, class Op>
inline void dequantizeCodes(const uint8_t* in, uint32_t len, float s, Op op) {
  constexpr int kPer = 8 / K::kBits;
  constexpr uint32_t kMask = (1u << K::kBits) - 1;
  const uint32_t full = len / kPer;
  for (uint32_t j = 0; j < full; ++j) {
    const uint32_t byte = in[j];
    for (int t = 0; t < kPer; ++t) op(j * kPer + t, K::dequant((byte >> (t * K::kBits)) & kMask, s));
  }
  for (uint32_t i = full * kPer; i < len; ++i) op(i, K::dequant((in[i / kPer] >> ((i % kPer) * K::kBits)) & kMask, s));
}

template <class K, class T>
class BlockEncoder {
 public:
  BlockEncoder(const Params& p, const typename T::Storage* x, size_t n, uint8_t* out, float* residual)
      : p_(p), x_(x), n_(n), out_(out), residual_(residual), key_(math::rngKey(p.seed)) {
    h_.codec = static_cast<uint8_t>(p.codec);
    h_.blockSize = p.blockSize;
    h_.count = n;
    h_.flags = static_cast<uint8_t>((p.fp16Scales ? kFlagFp16Scales : 0) | (p.stochastic ? kFlagStochastic : 0));
    g_ = geometry(h_);
    scaleBytes_ = scaleBytes(p.codec, h_.flags);
    stage_.assign(p.blockSize, 0.0f);
  }

  size_t run() {
    rawOut_ = out_ + g_.layout.raw;
    for (uint64_t b = 0; b < g_.blocks; ++b) block(b);
    h_.aux = rawBlocks_;
    writeHeader(h_, out_);
    // Zero the alignment padding so equal inputs give equal bytes.
    std::memset(out_ + kHeaderBytes + g_.blocks * scaleBytes_, 0,
                g_.layout.codes - kHeaderBytes - g_.blocks * scaleBytes_);
    const size_t codeEnd = g_.layout.codes + (n_ * K::kBits + 7) / 8;
    std::memset(out_ + codeEnd, 0, g_.layout.raw - codeEnd);
    return static_cast<size_t>(rawOut_ - out_);
  }

 private:
  void block(uint64_t b) {
    const size_t off = b * p_.blockSize;
    const uint32_t len = static_cast<uint32_t>(std::min<size_t>(p_.blockSize, n_ - off));
    const float* v = stage(off, len);
    bool finite = true;
    const float absmax = blockAbsMax(v, len, finite);
    BlockScale bs = K::chooseScale(absmax, p_.fp16Scales);
    uint8_t* codes = out_ + g_.layout.codes + off * K::kBits / 8;
    const size_t codeBytes = (size_t{len} * K::kBits + 7) / 8;
    if (!finite || bs.raw) {
      storeScale(out_ + kHeaderBytes, b, scaleBytes_, rawMarker());
      std::memset(codes, 0, codeBytes);
      writeRaw(b, v, len);
      if (residual_) std::fill_n(residual_ + off, len, 0.0f);
      return;
    }
    storeScale(out_ + kHeaderBytes, b, scaleBytes_, bs.stored);
    // Whole groups of 8 go straight to the output; a last partial group (zero-padded in
    // the stage) goes through `tail` so no byte past the stream's codes is written.
    const uint32_t len8 = len & ~7u;
    quantize(v, len8, bs.inv, codes, off);
    if (len8 != len) {
      uint8_t tail[8];
      quantize(v + len8, 8, bs.inv, tail, off + len8);
      std::memcpy(codes + len8 * K::kBits / 8, tail, codeBytes - len8 * K::kBits / 8);
    }
    if (residual_) {
      float* e = residual_ + off;
      dequantizeCodes<K>(codes, len, bs.scale, [&](uint32_t i, float y) { e[i] = v[i] - y; });
    }
  }

  void quantize(const float* v, uint32_t len, float inv, uint8_t* dst, uint64_t base) {
    if (p_.stochastic) {
      quantizeCodes<K, true>(v, len, inv, dst, key_, base);
    } else {
      quantizeCodes<K, false>(v, len, inv, dst, key_, base);
    }
  }

  // The block as fp32, zero-padded to a multiple of 8 elements.
  const float* stage(size_t off, uint32_t len) {
    if constexpr (std::is_same_v<T, F32>) {
      if (!residual_ && len == p_.blockSize) return x_ + off;
    }
    // Adding a zero residual would turn -0 into +0 (raw blocks must be exact).
    if (residual_) {
      for (uint32_t i = 0; i < len; ++i) stage_[i] = T::load(x_, off + i) + residual_[off + i];
    } else {
      for (uint32_t i = 0; i < len; ++i) stage_[i] = T::load(x_, off + i);
    }
    std::fill(stage_.begin() + len, stage_.end(), 0.0f);
    return stage_.data();
  }

  uint32_t rawMarker() const {
    if (p_.codec == cclCodecMxfp8E4m3) return math::kMxRawMarker;
    return p_.fp16Scales ? kF16RawMarker : kF32RawMarker;
  }

  void writeRaw(uint64_t b, const float* v, uint32_t len) {
    const uint32_t entry[2] = {static_cast<uint32_t>(b), 0};
    std::memcpy(rawOut_, entry, sizeof(entry));
    std::memcpy(rawOut_ + 8, v, size_t{len} * 4);
    std::memset(rawOut_ + 8 + size_t{len} * 4, 0, size_t{p_.blockSize - len} * 4);
    rawOut_ += rawEntryBytes(p_.blockSize);
    ++rawBlocks_;
  }

  const Params& p_;
  const typename T::Storage* x_;
  size_t n_;
  uint8_t* out_;
  float* residual_;
  math::RngKey key_;
  Header h_;
  Geometry g_{};
  size_t scaleBytes_ = 4;
  std::vector<float> stage_;
  uint8_t* rawOut_ = nullptr;
  uint64_t rawBlocks_ = 0;
};

// Checks every scale and raw entry before anything is written: raw entries name distinct
// blocks in increasing order, exactly the blocks whose scale is the raw marker.
template <class K>
void validateBlocks(const Header& h, const uint8_t* in, const Geometry& g) {
  const bool fp16 = h.flags & kFlagFp16Scales;
  const size_t sb = scaleBytes(static_cast<cclCodec_t>(h.codec), h.flags);
  uint64_t marked = 0;
  for (uint64_t b = 0; b < g.blocks; ++b) {
    float s;
    marked += K::readScale(loadScale(in + kHeaderBytes, b, sb), fp16, s) ? 0 : 1;
  }
  if (marked != h.aux) throw Error(cclInvalidUsage, "compressed stream: raw block count does not match the scales");
  int64_t prev = -1;
  for (uint64_t r = 0; r < h.aux; ++r) {
    uint32_t entry[2];
    std::memcpy(entry, in + g.layout.raw + r * rawEntryBytes(h.blockSize), sizeof(entry));
    float s;
    if (static_cast<int64_t>(entry[0]) <= prev || entry[0] >= g.blocks || entry[1] != 0 ||
        K::readScale(loadScale(in + kHeaderBytes, entry[0], sb), fp16, s))
      throw Error(cclInvalidUsage, "compressed stream: bad raw block entry");
    prev = entry[0];
  }
}

// Runs op(index, value) over every element of a validated stream.
template <class K, class Op>
void forEachElement(const Header& h, const uint8_t* in, Op op) {
  const Geometry g = geometry(h);
  validateBlocks<K>(h, in, g);
  const bool fp16 = h.flags & kFlagFp16Scales;
  const size_t sb = scaleBytes(static_cast<cclCodec_t>(h.codec), h.flags);
  for (uint64_t b = 0; b < g.blocks; ++b) {
    const size_t off = b * h.blockSize;
    const uint32_t len = static_cast<uint32_t>(std::min<uint64_t>(h.blockSize, h.count - off));
    float s;
    if (!K::readScale(loadScale(in + kHeaderBytes, b, sb), fp16, s)) continue;
    dequantizeCodes<K>(in + g.layout.codes + off * K::kBits / 8, len, s, [&](uint32_t i, float y) { op(off + i, y); });
  }
  for (uint64_t r = 0; r < h.aux; ++r) {
    const uint8_t* entry = in + g.layout.raw + r * rawEntryBytes(h.blockSize);
    uint32_t b;
    std::memcpy(&b, entry, 4);
    const size_t off = size_t{b} * h.blockSize;
    const uint32_t len = static_cast<uint32_t>(std::min<uint64_t>(h.blockSize, h.count - off));
    for (uint32_t i = 0; i < len; ++i) {
      float v;
      std::memcpy(&v, entry + 8 + size_t{i} * 4, 4);
      op(off + i, v);
    }
  }
}

template <class Fn>
decltype(auto) withKind(cclCodec_t codec, Fn&& fn) {
  switch (codec) {
    case cclCodecFp8E4m3:
      return fn(Fp8Kind<fp::E4M3>{});
    case cclCodecFp8E5m2:
      return fn(Fp8Kind<fp::E5M2>{});
    case cclCodecMxfp8E4m3:
      return fn(MxKind{});
    case cclCodecInt8:
      return fn(IntKind<8>{});
    case cclCodecInt4:
      return fn(IntKind<4>{});
    case cclCodecInt2:
      return fn(IntKind<2>{});
    default:
      throw Error(cclInternalError, "not a quantiser codec");
  }
}

}  // namespace

size_t quantizerMaxBytes(const Params& p, size_t n) {
  Header h;
  h.codec = static_cast<uint8_t>(p.codec);
  h.blockSize = p.blockSize;
  h.count = n;
  h.flags = p.fp16Scales ? kFlagFp16Scales : 0;
  h.aux = (n + p.blockSize - 1) / p.blockSize;  // every block raw
  return layoutOf(h).total;
}

size_t quantizerEncode(const Params& p, const void* x, cclDataType_t type, size_t n, uint8_t* out, float* residual) {
  return withKind(p.codec, [&](auto kind) {
    using K = decltype(kind);
    return withElementType(type, [&](auto tag) {
      using T = decltype(tag);
      return BlockEncoder<K, T>(p, static_cast<const typename T::Storage*>(x), n, out, residual).run();
    });
  });
}

void quantizerDecode(const Header& h, const uint8_t* in, void* y, cclDataType_t type) {
  withKind(static_cast<cclCodec_t>(h.codec), [&](auto kind) {
    using K = decltype(kind);
    withElementType(type, [&](auto tag) {
      using T = decltype(tag);
      auto* out = static_cast<typename T::Storage*>(y);
      forEachElement<K>(h, in, [out](size_t i, float v) { T::store(out, i, v); });
    });
  });
}

void quantizerAccumulate(const Header& h, const uint8_t* in, float* acc) {
  withKind(static_cast<cclCodec_t>(h.codec),
           [&](auto kind) { forEachElement<decltype(kind)>(h, in, [acc](size_t i, float v) { acc[i] += v; }); });
}

}  // namespace ccl::codec::detail
