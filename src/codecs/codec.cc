// SPDX-License-Identifier: BSD-3-Clause
// Codec parameters, names, and the dispatch from the codec-independent interface to the
// quantizers and sparsifiers. Also the exported cclCodecName (cclCodecFromName is in
// api/names.cc, where a failure records its message).
#include "codecs/codec.h"

#include <strings.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "codecs/elements.h"
#include "codecs/lowrank.h"
#include "codecs/math/feedback_add.h"
#include "codecs/quantizer.h"
#include "codecs/sparsifier.h"
#include "common/error.h"

namespace ccl::codec {
namespace {

[[noreturn]] void badParam(const std::string& what) {
  throw Error(cclInvalidArgument, "compression parameters: " + what);
}

void checkParams(const Params& p) {
  if (!validCodec(p.codec)) badParam("unknown codec " + std::to_string(p.codec));
  if (isQuantizer(p.codec)) {
    if (p.blockSize == 0 || p.blockSize % 8 != 0 || p.blockSize > kMaxBlockSize)
      badParam("blockSize must be a multiple of 8 in [8, 65536], got " + std::to_string(p.blockSize));
  }
  if (p.fixedLength && (!isQuantizer(p.codec) || p.fp16Scales))
    badParam("fixed-length streams are written by quantizers with fp32 or e8m0 scales only");
  const Selection sel = codecInfo(p.codec).selection;
  if ((sel == Selection::kLargest || sel == Selection::kRandom) && !(p.keepRatio > 0.0 && p.keepRatio <= 1.0))
    badParam("keepRatio must be in (0, 1]");
  if (sel == Selection::kThreshold && !(p.threshold >= 0.0f && std::isfinite(p.threshold)))
    badParam("threshold must be finite and >= 0");
  if (isLowRank(p.codec)) {
    if (p.rank == 0 || p.rank > kMaxLowRank) badParam("rank must be in [1, " + std::to_string(kMaxLowRank) + "]");
    if ((p.rows == 0) != (p.cols == 0)) badParam("rows and cols must both be given, or both be 0");
  }
}

// Copies the caller's struct, reading only the bytes it says it has.
cclCompression_t readCallerStruct(const cclCompression_t* c) {
  cclCompression_t s = CCL_COMPRESSION_INITIALIZER;
  if (c->size < offsetof(cclCompression_t, codec) + sizeof(c->codec)) badParam("size too small");
  if (c->magic != CCL_COMPRESSION_MAGIC) badParam("bad magic (start from CCL_COMPRESSION_INITIALIZER)");
  // A caller built before the low-rank fields passes a shorter struct: they keep their 0s.
  std::memcpy(&s, c, std::min(c->size, sizeof(s)));
  return s;
}

}  // namespace

Params defaultParams(cclCodec_t codec) {
  Params p;
  p.codec = codec;
  p.blockSize = codecInfo(codec).defaultBlock;
  p.rank = codecInfo(codec).defaultRank;
  return p;
}

Params fixLength(Params p) {
  p.fixedLength = p.fixedLength || (isQuantizer(p.codec) && !p.fp16Scales);
  return p;
}

Params resolveParams(const cclCompression_t* c) {
  if (!c) return defaultParams(cclCodecNone);
  const cclCompression_t s = readCallerStruct(c);
  if (static_cast<unsigned>(s.codec) >= cclNumCodecs) badParam("unknown codec " + std::to_string(s.codec));
  Params p = defaultParams(s.codec);
  if (s.blockSize < 0) badParam("negative blockSize");
  if (s.blockSize > 0 && isQuantizer(s.codec)) p.blockSize = static_cast<uint32_t>(s.blockSize);
  if (isQuantizer(s.codec)) {
    if (s.bits != 0 && s.bits != codeBits(s.codec)) badParam("bits does not match the codec");
    if (s.scaleBits != 0 && s.scaleBits != 32 && !(s.scaleBits == 16 && codecInfo(s.codec).fp16Scales))
      badParam("scaleBits must be 32, or 16 for the int codecs");
    p.fp16Scales = s.scaleBits == 16;
    p.stochastic = s.stochasticRounding != 0;
  } else if (isSparsifier(s.codec)) {
    if (s.bits != 0 && s.bits != 32 && s.bits != 16) badParam("bits must be 32 or 16 for a sparsifier");
    p.fp16Values = s.bits == 16;
    if (s.keepRatio != 0.0) p.keepRatio = s.keepRatio;
    p.threshold = s.threshold;
  } else if (isLowRank(s.codec)) {
    if (s.rank < 0) badParam("negative rank");
    if (s.rank > 0) p.rank = static_cast<uint32_t>(s.rank);
    p.rows = s.rows;
    p.cols = s.cols;
    if (s.warmStart < -1 || s.warmStart > 1) badParam("warmStart must be -1, 0 or 1");
    p.warmStart = s.warmStart != -1;
  }
  p.seed = s.seed;
  checkParams(p);
  return p;
}

uint64_t keptCount(const Params& p, uint64_t n) {
  if (n == 0) return 0;
  const auto k = static_cast<uint64_t>(std::llround(p.keepRatio * static_cast<double>(n)));
  return std::clamp<uint64_t>(k, 1, n);
}

size_t maxEncodedBytes(const Params& p, size_t n) {
  checkParams(p);
  if (n > kMaxCount) badParam("element count too large");
  if (isSparsifier(p.codec) && n > kMaxSparseCount) badParam("sparsifiers take fewer than 2^32 elements");
  if (isQuantizer(p.codec)) return detail::quantizerMaxBytes(p, n);
  if (isSparsifier(p.codec)) return detail::sparsifierMaxBytes(p, n);
  if (isLowRank(p.codec)) return detail::lowRankMaxBytes(p, n);
  return kHeaderBytes + n * 4;
}

LowRankShape lowRankShape(const Params& p, size_t n) {
  LowRankShape s;
  if (n == 0) return s;
  if (p.rows || p.cols) {
    if (p.rows * p.cols != n || p.rows > n || p.cols > n)
      badParam("rows x cols = " + std::to_string(p.rows) + " x " + std::to_string(p.cols) + " is not the " +
               std::to_string(n) + " elements");
    s.rows = p.rows, s.cols = p.cols;
  } else {
    s.cols = static_cast<size_t>(std::ceil(std::sqrt(static_cast<double>(n))));
    s.rows = (n + s.cols - 1) / s.cols;
  }
  s.rank = static_cast<uint32_t>(std::min<size_t>({p.rank, s.rows, s.cols}));
  return s;
}

size_t residualFloats(const Params& p, size_t n) {
  if (!isLowRank(p.codec) || n == 0) return n;
  const LowRankShape s = lowRankShape(p, n);
  return n + s.cols * s.rank + 1;
}

size_t encode(const Params& p, const void* x, cclDataType_t type, size_t n, void* out, size_t outBytes,
              float* residual) {
  const size_t need = maxEncodedBytes(p, n);
  if (outBytes < need)
    throw Error(cclInvalidArgument,
                "encode: output buffer of " + std::to_string(outBytes) + " bytes, needs " + std::to_string(need));
  if (!out || (n > 0 && !x)) throw Error(cclInvalidArgument, "encode: null buffer");
  auto* o = static_cast<uint8_t*>(out);
  if (isQuantizer(p.codec)) return detail::quantizerEncode(p, x, type, n, o, residual);
  if (isSparsifier(p.codec)) return detail::sparsifierEncode(p, x, type, n, o, residual);
  if (isLowRank(p.codec)) return detail::lowRankEncode(p, x, type, n, o, residual);
  Header h;
  h.count = n;
  writeHeader(h, o);
  withElementType(type, [&](auto tag) {
    using T = decltype(tag);
    const auto* src = static_cast<const typename T::Storage*>(x);
    float* dst = reinterpret_cast<float*>(o + kHeaderBytes);
    for (size_t i = 0; i < n; ++i) {
      const float v = math::withResidual(T::load(src, i), residual, i);
      std::memcpy(dst + i, &v, 4);
      if (residual) residual[i] = 0.0f;
    }
  });
  return kHeaderBytes + n * 4;
}

void runStage(const Params& p, int stage, const void* src, void* dst, cclDataType_t type, size_t n, float divisor,
              float* state) {
  if (p.codec == cclCodecRandK) {
    if (stage == kRandKNewsOut) {
      const float news = nonFiniteNews(static_cast<const uint8_t*>(src));
      std::memcpy(dst, &news, sizeof(news));
      return;
    }
    if (stage == kRandKNewsIn) {
      float news;
      std::memcpy(&news, src, sizeof(news));
      return takeNonFiniteNews(news, static_cast<uint8_t*>(dst));
    }
    throw Error(cclInternalError, "the random-k codec has no stage " + std::to_string(stage));
  }
  if (!isLowRank(p.codec)) throw Error(cclInternalError, "codec " + std::to_string(p.codec) + " has no stages");
  switch (stage) {
    case 0:
      return lowrank::allReduceStart(p, src, type, n, state, static_cast<float*>(dst));
    case 1:
      return lowrank::allReduceMiddle(p, n, state, static_cast<float*>(dst));
    case 2:
      return lowrank::allReduceFinish(p, n, divisor, state, static_cast<const float*>(src), dst, type);
  }
  throw Error(cclInternalError, "the low-rank codec has no stage " + std::to_string(stage));
}

Header inspect(const void* in, size_t inBytes) { return readHeader(in, inBytes); }

size_t streamBytes(const void* in, size_t inBytes) { return layoutOf(readHeader(in, inBytes)).total; }

namespace {

Header checkExpected(const void* in, size_t inBytes, const Expect& expect) {
  const Header h = readHeader(in, inBytes);
  if (expect.codec != cclNumCodecs && h.codec != expect.codec)
    throw Error(cclInvalidUsage, std::string("compressed stream: codec ") + codecInfo(h.codec).name + ", expected " +
                                     cclCodecName(expect.codec));
  if (h.count != expect.count)
    throw Error(cclInvalidUsage, "compressed stream: " + std::to_string(h.count) + " elements, expected " +
                                     std::to_string(expect.count));
  return h;
}

}  // namespace

void decode(const void* in, size_t inBytes, const Expect& expect, void* y, cclDataType_t type) {
  const Header h = checkExpected(in, inBytes, expect);
  if (h.count > 0 && !y) throw Error(cclInvalidArgument, "decode: null output");
  const auto* i = static_cast<const uint8_t*>(in);
  const auto codec = static_cast<cclCodec_t>(h.codec);
  if (isQuantizer(codec)) return detail::quantizerDecode(h, i, y, type);
  if (isSparsifier(codec)) return detail::sparsifierDecode(h, i, y, type);
  if (isLowRank(codec)) return detail::lowRankDecode(h, i, y, type);
  withElementType(type, [&](auto tag) {
    using T = decltype(tag);
    auto* out = static_cast<typename T::Storage*>(y);
    for (size_t k = 0; k < h.count; ++k) {
      float v;
      std::memcpy(&v, i + kHeaderBytes + 4 * k, 4);
      T::store(out, k, v);
    }
  });
}

void decodeAccumulate(const void* in, size_t inBytes, const Expect& expect, float* acc) {
  const Header h = checkExpected(in, inBytes, expect);
  if (h.count > 0 && !acc) throw Error(cclInvalidArgument, "decodeAccumulate: null output");
  const auto* i = static_cast<const uint8_t*>(in);
  const auto codec = static_cast<cclCodec_t>(h.codec);
  if (isQuantizer(codec)) return detail::quantizerAccumulate(h, i, acc);
  if (isSparsifier(codec)) return detail::sparsifierAccumulate(h, i, acc);
  if (isLowRank(codec)) return detail::lowRankAccumulate(h, i, acc);
  for (size_t k = 0; k < h.count; ++k) {
    float v;
    std::memcpy(&v, i + kHeaderBytes + 4 * k, 4);
    acc[k] += v;
  }
}

size_t decodeAddEncode(const Params& p, const void* in, size_t inBytes, const Expect& expect, const void* local,
                       cclDataType_t type, size_t n, float divisor, void* out, size_t outBytes, float* residual) {
  if (n > 0 && !local) throw Error(cclInvalidArgument, "decodeAddEncode: null local values");
  // Grows to the largest hop a thread has run, then stays: the steady path allocates nothing.
  thread_local std::vector<float> sum;
  if (sum.size() < n) sum.resize(n);
  withElementType(type, [&](auto tag) {
    using T = decltype(tag);
    const auto* x = static_cast<const typename T::Storage*>(local);
    for (size_t i = 0; i < n; ++i) sum[i] = T::load(x, i);
  });
  decodeAccumulate(in, inBytes, expect, sum.data());
  if (divisor != 1.0f)
    for (size_t i = 0; i < n; ++i) sum[i] /= divisor;
  return encode(p, sum.data(), cclFloat32, n, out, outBytes, residual);
}

bool codecFromName(const char* name, cclCodec_t* codec) {
  if (!name || !codec) return false;
  for (int c = 0; c < cclNumCodecs; ++c) {
    if (strcasecmp(name, codecInfo(c).name) == 0) {
      *codec = static_cast<cclCodec_t>(c);
      return true;
    }
  }
  return false;
}

}  // namespace ccl::codec

extern "C" {

CCL_API const char* cclCodecName(cclCodec_t codec) {
  const auto c = static_cast<unsigned>(codec);
  return ccl::codec::validCodec(c) ? ccl::codec::codecInfo(c).name : "invalid";
}

CCL_API int cclCodecCount(void) { return cclNumCodecs; }

}  // extern "C"
