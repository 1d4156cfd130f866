// SPDX-License-Identifier: BSD-3-Clause
// Sparsifiers: choose the kept indices (exact top-k, seeded strata, or a threshold), then
// write their values (fp32 or fp16) and, except for randk whose indices follow from the
// seed, the index set in the smaller of its two encodings.
#include "codecs/sparsifier.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "codecs/elements.h"
#include "codecs/index_coding.h"
#include "codecs/math/quant_int.h"
#include "codecs/topk_select.h"

namespace ccl::codec::detail {
namespace {

// The input as fp32 (x itself when it is fp32 and no residual is added; else x + residual
// in the residual buffer or in a per-thread stage), and whether any of it is not finite. A
// non-finite sum leaves 0 in the residual (the stream carries it as NaN everywhere: there is
// nothing left to carry), which is also the value selection sees there.
// Per-thread working memory of the encoder, handed back past kKeepScratchBytes.
thread_local std::vector<float> tlsStage;
thread_local std::vector<uint32_t> tlsIndices;

template <class T>
void trim(std::vector<T>& v) {
  if (v.capacity() * sizeof(T) > kKeepScratchBytes) std::vector<T>().swap(v);
}

const float* stageInput(const void* x, cclDataType_t type, size_t n, float* residual, bool& nonFinite) {
  return withElementType(type, [&](auto tag) -> const float* {
    using T = decltype(tag);
    const auto* src = static_cast<const typename T::Storage*>(x);
    uint32_t bad = 0;
    if (residual) {
      for (size_t i = 0; i < n; ++i) {
        const float v = residual[i] + T::load(src, i);
        const bool finite = math::isFiniteBits(v);
        bad |= finite ? 0u : 1u;
        residual[i] = finite ? v : 0.0f;
      }
      nonFinite = bad != 0;
      return residual;
    }
    for (size_t i = 0; i < n; ++i) bad |= math::isFiniteBits(T::load(src, i)) ? 0u : 1u;
    nonFinite = bad != 0;
    if constexpr (std::is_same_v<T, F32>) return src;
    tlsStage.resize(n);
    for (size_t i = 0; i < n; ++i) tlsStage[i] = T::load(src, i);
    return tlsStage.data();
  });
}

void chooseIndices(const Params& p, const float* v, size_t n, std::vector<uint32_t>& idx) {
  if (p.codec == cclCodecTopK) {
    selectTopK(v, n, keptCount(p, n), idx);
  } else if (p.codec == cclCodecThreshold) {
    selectAtLeast(v, n, p.threshold, idx);
  } else {
    const uint64_t k = keptCount(p, n);
    const math::RngKey key = math::rngKey(p.seed);
    idx.resize(k);
    for (uint64_t j = 0; j < k; ++j) idx[j] = randomKIndex(key, n, k, j);
  }
}

// Writes the values at idx; with a residual (which holds v), leaves v - sent there.
void writeValues(const Params& p, const float* v, const std::vector<uint32_t>& idx, uint8_t* out, float* residual) {
  if (p.fp16Values) {
    for (size_t r = 0; r < idx.size(); ++r) {
      const uint16_t h = fp::floatToHalf(v[idx[r]]);
      std::memcpy(out + 2 * r, &h, 2);
      if (residual) residual[idx[r]] = v[idx[r]] - fp::halfToFloat(h);
    }
  } else {
    for (size_t r = 0; r < idx.size(); ++r) {
      std::memcpy(out + 4 * r, v + idx[r], 4);
      if (residual) residual[idx[r]] = 0.0f;
    }
  }
}

inline float valueAt(const uint8_t* values, bool fp16, uint64_t r) {
  if (fp16) {
    uint16_t h;
    std::memcpy(&h, values + 2 * r, 2);
    return fp::halfToFloat(h);
  }
  float f;
  std::memcpy(&f, values + 4 * r, 4);
  return f;
}

// Runs fn(index, value) for every kept element of a stream; indices are validated first.
template <class Fn>
void forEachKept(const Header& h, const uint8_t* in, Fn fn) {
  const Layout l = layoutOf(h);
  const bool fp16 = h.flags & kFlagFp16Values;
  const uint8_t* values = in + l.codes;
  const auto codec = static_cast<cclCodec_t>(h.codec);
  if (codec == cclCodecRandK) {
    if (h.count > 0 && h.aux == 0) badIndices("randk with no kept element");
    uint64_t seed;
    std::memcpy(&seed, in + kHeaderBytes, 8);
    const math::RngKey key = math::rngKey(seed);
    for (uint64_t j = 0; j < h.aux; ++j) fn(randomKIndex(key, h.count, h.aux, j), valueAt(values, fp16, j));
    return;
  }
  const uint8_t* indices = in + l.raw;
  auto apply = [&](auto&& each) {
    if (h.flags & kFlagBitmap) {
      forEachBitmapIndex(indices, h.aux, h.count, each);
    } else {
      forEachGapIndex(indices, h.indexBytes, h.aux, h.count, each);
    }
  };
  apply([](uint64_t, uint64_t) {});
  apply([&](uint64_t r, uint64_t index) { fn(index, valueAt(values, fp16, r)); });
}

}  // namespace

size_t sparsifierMaxBytes(const Params& p, size_t n) {
  const uint64_t kept = p.codec == cclCodecThreshold ? n : keptCount(p, n);
  Header h;
  h.codec = static_cast<uint8_t>(p.codec);
  h.count = n;
  h.aux = kept;
  h.flags = p.fp16Values ? kFlagFp16Values : 0;
  if (p.codec != cclCodecRandK)
    h.indexBytes = static_cast<uint32_t>(std::min<uint64_t>(bitmapBytes(n), kept * kMaxGapBytes));
  return layoutOf(h).total;
}

size_t sparsifierEncode(const Params& p, const void* x, cclDataType_t type, size_t n, uint8_t* out, float* residual) {
  bool nonFinite = false;
  const float* v = stageInput(x, type, n, residual, nonFinite);
  std::vector<uint32_t>& idx = tlsIndices;
  chooseIndices(p, v, n, idx);
  Header h;
  h.codec = static_cast<uint8_t>(p.codec);
  h.count = n;
  h.aux = idx.size();
  h.flags = static_cast<uint8_t>((p.fp16Values ? kFlagFp16Values : 0) | (nonFinite ? kFlagNonFinite : 0));
  // Gaps take at most 5 bytes each: when that fits in the bitmap they are the smaller, and
  // their size is known once they are written (the index section is last; its size only
  // moves the stream's end).
  const bool indexed = p.codec != cclCodecRandK;
  const bool surelyGaps = idx.size() * kMaxGapBytes <= bitmapBytes(n);
  const bool bitmap = indexed && !surelyGaps && bitmapBytes(n) < gapBytes(idx);
  if (bitmap) h.flags |= kFlagBitmap;
  const Layout l = layoutOf(h);
  if (!indexed) std::memcpy(out + kHeaderBytes, &p.seed, 8);  // randk: its indices follow from the seed
  const size_t valueBytes = idx.size() * (p.fp16Values ? 2 : 4);
  writeValues(p, v, idx, out + l.codes, residual);
  std::memset(out + l.codes + valueBytes, 0, l.raw - l.codes - valueBytes);
  if (bitmap) {
    writeBitmap(idx, n, out + l.raw);
    h.indexBytes = static_cast<uint32_t>(bitmapBytes(n));
  } else if (indexed) {
    h.indexBytes = static_cast<uint32_t>(writeGaps(idx, out + l.raw));
  }
  writeHeader(h, out);
  trim(idx);
  trim(tlsStage);
  return layoutOf(h).total;
}

void sparsifierDecode(const Header& h, const uint8_t* in, void* y, cclDataType_t type) {
  withElementType(type, [&](auto tag) {
    using T = decltype(tag);
    auto* out = static_cast<typename T::Storage*>(y);
    // Validate before the output is cleared: a bad stream leaves y untouched.
    forEachKept(h, in, [](uint64_t, float) {});
    if (h.flags & kFlagNonFinite) {
      for (size_t i = 0; i < h.count; ++i) T::store(out, i, markedBlockValue());
      return;
    }
    for (size_t i = 0; i < h.count; ++i) T::store(out, i, 0.0f);
    forEachKept(h, in, [out](uint64_t i, float v) { T::store(out, i, v); });
  });
}

void sparsifierAccumulate(const Header& h, const uint8_t* in, float* acc) {
  forEachKept(h, in, [acc](uint64_t i, float v) { acc[i] += v; });
  if (h.flags & kFlagNonFinite)
    for (size_t i = 0; i < h.count; ++i) acc[i] += markedBlockValue();
}

}  // namespace ccl::codec::detail
