// SPDX-License-Identifier: BSD-3-Clause
// Block quantizers: the documented per-element bound on every input pattern and every
// length 0..1000 plus large odd ones; stochastic rounding unbiased and deterministic;
// non-finite blocks exact; the other element types; sizes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <utility>

#include "codec_test_util.h"
#include "codecs/math/quant_fp8.h"
#include "codecs/math/quant_int.h"
#include "codecs/quantizer_kinds.h"
#include "codecs/wire.h"
#include "common/floatconv.h"

namespace ccl::codec::test {
namespace {

void expectWithinBound(const Params& p, const std::vector<float>& x, const std::string& what) {
  const auto s = encodeVec(p, x);
  ASSERT_LE(s.size(), maxEncodedBytes(p, x.size())) << what;
  const auto y = decodeVec(s, x.size());
  const auto bound = quantizerBound(p, x);
  const long bad = firstViolation(x, y, bound);
  ASSERT_EQ(bad, -1) << what << ": x[" << bad << "]=" << x[bad] << " decoded " << y[bad] << " bound " << bound[bad];
}

// True when element i of x lies above every value its block decodes to with rounding to
// nearest (y): saturated at the top code, as OCP MX and NVFP4 clamp (biased by design).
// Linear-scale codecs map the absmax to their largest code and never saturate.
bool saturates(const Params& p, const std::vector<float>& x, const std::vector<float>& y, size_t i) {
  if (codecInfo(p.codec).scale == ScaleFormat::kLinear) return false;
  const size_t off = i / p.blockSize * p.blockSize;
  float top = 0;
  for (size_t j = off; j < std::min<size_t>(off + p.blockSize, y.size()); ++j) top = std::max(top, std::fabs(y[j]));
  return std::fabs(x[i]) > top;
}

class QuantizerTest : public ::testing::TestWithParam<cclCodec_t> {};

TEST_P(QuantizerTest, BoundHoldsForEveryLengthUpTo1000) {
  const auto& patterns = allPatterns();
  for (size_t n = 0; n <= 1000; ++n) {
    Params p = params(GetParam());
    const Pattern pat = patterns[n % patterns.size()];
    p.stochastic = n % 3 == 1;
    p.seed = n;
    p.fp16Scales = n % 5 == 2 && codecInfo(GetParam()).fp16Scales;
    if (n % 7 == 3) p.blockSize = 32;
    expectWithinBound(p, makeInput(pat, n, static_cast<uint32_t>(n)),
                      std::string(cclCodecName(p.codec)) + " n=" + std::to_string(n) + " " + patternName(pat));
  }
}

TEST_P(QuantizerTest, BoundHoldsOnLargeOddLengthsForEveryPattern) {
  for (Pattern pat : allPatterns()) {
    for (bool sr : {false, true}) {
      Params p = params(GetParam());
      p.stochastic = sr;
      p.seed = 7;
      expectWithinBound(p, makeInput(pat, 100003, 5), std::string(patternName(pat)) + (sr ? " stochastic" : ""));
    }
  }
  expectWithinBound(params(GetParam()), makeInput(Pattern::kMixed, (1 << 20) + 13, 11), "1M+13 mixed");
}

TEST_P(QuantizerTest, StochasticRoundingIsDeterministicPerSeed) {
  const auto x = makeInput(Pattern::kRandom, 4099, 3);
  Params p = params(GetParam());
  p.stochastic = true;
  p.seed = 42;
  const auto a = encodeVec(p, x);
  EXPECT_EQ(a, encodeVec(p, x));
  p.seed = 43;
  EXPECT_NE(a, encodeVec(p, x));
}

TEST_P(QuantizerTest, StochasticRoundingIsUnbiased) {
  // Values between grid points: nearest rounding is biased on them, stochastic is not.
  const auto x = makeInput(Pattern::kRandom, 256, 17);
  Params p = params(GetParam());
  p.stochastic = true;
  constexpr int kSeeds = 2000;
  std::vector<double> meanErr(x.size(), 0.0);
  for (int seed = 0; seed < kSeeds; ++seed) {
    p.seed = static_cast<uint64_t>(seed) * 7919 + 1;
    const auto y = decodeVec(encodeVec(p, x), x.size());
    for (size_t i = 0; i < x.size(); ++i) meanErr[i] += (static_cast<double>(y[i]) - x[i]) / kSeeds;
  }
  // Per element the error is within one grid step g (bounded by twice the nearest bound),
  // so its mean over kSeeds draws has a standard deviation of at most g/2/sqrt(kSeeds).
  Params nearest = params(GetParam());
  const auto bound = quantizerBound(nearest, x);
  const auto yNearest = decodeVec(encodeVec(nearest, x), x.size());
  double total = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (saturates(nearest, x, yNearest, i)) continue;  // clamped: biased by design
    const double g = 2 * bound[i];
    EXPECT_LE(std::fabs(meanErr[i]), 6 * g / 2 / std::sqrt(kSeeds)) << "element " << i;
    total += meanErr[i] / (g > 0 ? g : 1);
  }
  EXPECT_LE(std::fabs(total / x.size()), 0.01);
}

TEST_P(QuantizerTest, NonFiniteBlocksArriveExactly) {
  Params p = params(GetParam());
  std::vector<float> x = makeInput(Pattern::kRandom, 1000, 1);
  x[5] = NAN;
  x[300] = INFINITY;
  x[999] = -INFINITY;
  const auto y = decodeVec(encodeVec(p, x), x.size());
  EXPECT_TRUE(std::isnan(y[5]));
  EXPECT_EQ(y[300], INFINITY);
  EXPECT_EQ(y[999], -INFINITY);
  for (size_t i : {0u, 4u, 6u, 299u, 301u, 998u}) {
    // Elements sharing a block with a non-finite one travel raw too.
    if (i / p.blockSize == 5 / p.blockSize || i / p.blockSize == 300 / p.blockSize ||
        i / p.blockSize == 999 / p.blockSize) {
      EXPECT_EQ(fp::floatBits(x[i]), fp::floatBits(y[i])) << i;
    }
  }
}

TEST_P(QuantizerTest, Bf16AndHalfInputsAndOutputs) {
  const auto x32 = makeInput(Pattern::kRandom, 777, 21);
  std::vector<uint16_t> xb(x32.size()), xh(x32.size());
  std::vector<float> wb(x32.size()), wh(x32.size());
  for (size_t i = 0; i < x32.size(); ++i) {
    xb[i] = fp::floatToBf16(x32[i]);
    xh[i] = fp::floatToHalf(x32[i]);
    wb[i] = fp::bf16ToFloat(xb[i]);
    wh[i] = fp::halfToFloat(xh[i]);
  }
  const Params p = params(GetParam());
  for (auto [type, data, widened] : {std::tuple{cclBfloat16, &xb, &wb}, std::tuple{cclFloat16, &xh, &wh}}) {
    std::vector<uint8_t> s(maxEncodedBytes(p, x32.size()));
    s.resize(encode(p, data->data(), type, x32.size(), s.data(), s.size()));
    EXPECT_EQ(s, encodeVec(p, *widened)) << "a widened input encodes the same";
    const auto y = decodeVec(s, x32.size());
    std::vector<uint16_t> y16(x32.size());
    decode(s.data(), s.size(), Expect{x32.size()}, y16.data(), type);
    for (size_t i = 0; i < y.size(); ++i) {
      const uint16_t want = type == cclBfloat16 ? fp::floatToBf16(y[i]) : fp::floatToHalf(y[i]);
      ASSERT_EQ(want, y16[i]) << i;
    }
  }
}

TEST_P(QuantizerTest, DecodeAccumulateAddsTheDecodedValues) {
  const Params p = params(GetParam());
  const auto x = makeInput(Pattern::kMixed, 1001, 8);
  const auto s = encodeVec(p, x);
  const auto y = decodeVec(s, x.size());
  std::vector<float> acc = makeInput(Pattern::kRandom, x.size(), 9);
  std::vector<float> want(acc.size());
  for (size_t i = 0; i < acc.size(); ++i) want[i] = acc[i] + y[i];
  decodeAccumulate(s.data(), s.size(), Expect{x.size(), GetParam()}, acc.data());
  EXPECT_EQ(acc, want);
}

TEST_P(QuantizerTest, ResidualIsWhatDecodingLost) {
  Params p = params(GetParam());
  const auto x = makeInput(Pattern::kRandom, 1500, 4);
  std::vector<float> e = makeInput(Pattern::kRandom, x.size(), 5);
  std::vector<float> v(x.size());
  for (size_t i = 0; i < x.size(); ++i) v[i] = x[i] + e[i];
  const auto s = encodeVec(p, x, e.data());
  EXPECT_EQ(s, encodeVec(p, v)) << "encodes x + e";
  const auto y = decodeVec(s, x.size());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(e[i], v[i] - y[i]) << i;
}

INSTANTIATE_TEST_SUITE_P(Codecs, QuantizerTest, ::testing::ValuesIn(quantizerCodecs()),
                         [](const auto& info) { return std::string(cclCodecName(info.param)); });

// The fp8 decoders (on x86 with F16C, a separate vector path) give exactly the shared
// element math's value times the scale for every code, the encoder's or not, in decode and
// decode-accumulate, in every position of a block and in short last blocks; blocks whose
// scale a corrupt stream made too large for that path's folded multiplier included.
template <class F>
float elementMath(uint8_t code, float s) {
  return math::fp8DecodeFinite<F>(code) * s;
}

TEST(QuantizerFp8Decode, EveryCodeEqualsTheElementMath) {
  withEachLoopKind([&] {
    for (cclCodec_t c : {cclCodecFp8E4m3, cclCodecFp8E5m2, cclCodecMxfp8E4m3}) {
      const Params p = params(c);
      for (size_t n : {size_t{16}, size_t{5 * p.blockSize + 23}, size_t{3000}}) {
        auto s = encodeVec(p, makeInput(Pattern::kRandom, n, 21));
        const Header h = readHeader(s.data(), s.size());
        const Layout l = layoutOf(h);
        ASSERT_EQ(h.aux, 0u);
        // Block 0 gets the largest scale a stream can carry; the others keep the encoder's.
        if (c == cclCodecMxfp8E4m3) {
          s[l.scales] = 254;
        } else {
          const float big = 3.0e38f;
          std::memcpy(&s[l.scales], &big, 4);
        }
        for (size_t i = 0; i < n; ++i) s[l.codes + i] = static_cast<uint8_t>((i * 37 + i / 256) & 0xff);
        auto scaleOf = [&](uint64_t b) {
          if (c == cclCodecMxfp8E4m3) return math::mxScaleValue(s[l.scales + b]);
          float v;
          std::memcpy(&v, &s[l.scales + 4 * b], 4);
          return v;
        };
        std::vector<float> want(n), acc = makeInput(Pattern::kMixed, n, 22), wantAcc(n);
        for (size_t i = 0; i < n; ++i) {
          const float sc = scaleOf(i / p.blockSize);
          const uint8_t code = s[l.codes + i];
          want[i] = c == cclCodecFp8E5m2 ? elementMath<fp::E5M2>(code, sc) : elementMath<fp::E4M3>(code, sc);
          wantAcc[i] = acc[i] + want[i];
        }
        const auto y = decodeVec(s, n);
        for (size_t i = 0; i < n; ++i)
          ASSERT_EQ(fp::floatBits(y[i]), fp::floatBits(want[i]))
              << cclCodecName(c) << " n=" << n << " i=" << i << " code=" << int(s[l.codes + i]);
        decodeAccumulate(s.data(), s.size(), Expect{n, c}, acc.data());
        for (size_t i = 0; i < n; ++i)
          ASSERT_EQ(fp::floatBits(acc[i]), fp::floatBits(wantAcc[i])) << cclCodecName(c) << " n=" << n << " i=" << i;
      }
    }
  });
}

// 4096 + 23 values of random sign whose magnitudes span 40 binades (2^-30 to 2^11).
std::vector<float> spreadOver40Binades(uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> frac(1.0f, 2.0f);
  std::uniform_int_distribution<int> expo(-30, 10);
  std::vector<float> spread(4096 + 23);
  for (float& v : spread) v = (rng() & 1 ? -1.0f : 1.0f) * std::ldexp(frac(rng), expo(rng));
  return spread;
}

// first, then every finite input pattern at a length of its own.
std::vector<std::vector<float>> withFinitePatterns(std::vector<float> first) {
  std::vector<std::vector<float>> inputs = {std::move(first)};
  for (Pattern pat : allPatterns())
    if (pat != Pattern::kNonFinite) inputs.push_back(makeInput(pat, 1000 + 16 * static_cast<size_t>(pat), 5));
  return inputs;
}

// The fp8 encoders (on x86 with F16C, a separate vector path) write exactly the shared
// element math's code for every element, whatever the magnitudes in a block: values
// spanning 40 binades put codes in every exponent and in the subnormal range.
TEST(QuantizerFp8Encode, EveryCodeEqualsTheElementMath) {
  withEachLoopKind([&] {
    std::vector<float> spread = spreadOver40Binades(31);
    for (size_t i = 0; i < 8; ++i) spread[200 + i] = (i & 1 ? -3.0e38f : 1.0e-3f);  // 256 / s not normal
    const auto inputs = withFinitePatterns(spread);
    for (cclCodec_t c : {cclCodecFp8E4m3, cclCodecFp8E5m2, cclCodecMxfp8E4m3}) {
      const Params p = params(c);
      for (const auto& x : inputs) {
        const auto s = encodeVec(p, x);
        const Header h = readHeader(s.data(), s.size());
        const Layout l = layoutOf(h);
        for (size_t i = 0; i < x.size(); ++i) {
          const size_t b = i / p.blockSize;
          float inv;
          if (c == cclCodecMxfp8E4m3) {
            if (s[l.scales + b] == math::kMxRawMarker) continue;
            inv = math::mxEncodeMultiplier(s[l.scales + b]);
          } else {
            float sc;
            std::memcpy(&sc, &s[l.scales + 4 * b], 4);
            if (std::isnan(sc)) continue;  // a raw block
            inv = sc > 0.0f ? 1.0f / sc : 0.0f;
          }
          const uint32_t want = c == cclCodecFp8E5m2 ? math::fp8EncodeFinite<fp::E5M2>(x[i] * inv)
                                                     : math::fp8EncodeFinite<fp::E4M3>(x[i] * inv);
          ASSERT_EQ(int(s[l.codes + i]), int(want))
              << cclCodecName(c) << " n=" << x.size() << " i=" << i << " x=" << x[i];
        }
      }
    }
  });
}

// The integer quantizers' codes, decoded values and accumulated values equal the shared
// element math exactly (on x86 with AVX2 the int8 and int4 loops are a separate vector path),
// for every code, both scale widths, block sizes the vector loops do not divide, and
// lengths that end in a partial block.
struct IntCase {
  cclCodec_t codec;
  uint32_t blockSize;
  bool fp16Scales;
};

std::vector<IntCase> intCases() {
  std::vector<IntCase> cases;
  for (cclCodec_t c : {cclCodecInt8, cclCodecInt4, cclCodecInt2})
    for (uint32_t bs : {128u, 32u, 40u})
      for (bool f16 : {false, true}) cases.push_back({c, bs, f16});
  return cases;
}

Params intParams(const IntCase& ic) {
  Params p = params(ic.codec);
  p.blockSize = ic.blockSize;
  p.fp16Scales = ic.fp16Scales;
  return p;
}

int intBits(cclCodec_t c) { return c == cclCodecInt8 ? 8 : c == cclCodecInt4 ? 4 : 2; }

uint32_t intCodeAt(const std::vector<uint8_t>& s, const Layout& l, size_t i, int bits) {
  const size_t per = 8 / bits;
  return (s[l.codes + i / per] >> ((i % per) * bits)) & ((1u << bits) - 1);
}

// The block's scale as stored; false for a raw block.
bool intScaleOf(const std::vector<uint8_t>& s, const Layout& l, bool fp16, size_t b, float& sc) {
  if (fp16) {
    uint16_t h;
    std::memcpy(&h, &s[l.scales + 2 * b], 2);
    sc = fp::halfToFloat(h);
  } else {
    std::memcpy(&sc, &s[l.scales + 4 * b], 4);
  }
  return !std::isnan(sc);
}

TEST(QuantizerIntDecode, EveryCodeEqualsTheElementMath) {
  withEachLoopKind([&] {
    for (const IntCase& ic : intCases()) {
      const Params p = intParams(ic);
      const int bits = intBits(ic.codec);
      for (size_t n : {size_t{16}, size_t{5 * p.blockSize + 23}, size_t{3000}}) {
        auto s = encodeVec(p, makeInput(Pattern::kRandom, n, 23));
        const Header h = readHeader(s.data(), s.size());
        const Layout l = layoutOf(h);
        ASSERT_EQ(h.aux, 0u);
        for (size_t i = 0; i < (n * bits + 7) / 8; ++i)
          s[l.codes + i] = static_cast<uint8_t>((i * 37 + i / 256) & 0xff);
        std::vector<float> want(n), acc = makeInput(Pattern::kMixed, n, 24), wantAcc(n);
        for (size_t i = 0; i < n; ++i) {
          float sc;
          ASSERT_TRUE(intScaleOf(s, l, ic.fp16Scales, i / p.blockSize, sc));
          const uint32_t code = intCodeAt(s, l, i, bits);
          const int32_t q = static_cast<int32_t>(code << (32 - bits)) >> (32 - bits);
          want[i] = math::dequantInt(q, sc);
          wantAcc[i] = acc[i] + want[i];
        }
        const auto y = decodeVec(s, n);
        for (size_t i = 0; i < n; ++i)
          ASSERT_EQ(fp::floatBits(y[i]), fp::floatBits(want[i]))
              << cclCodecName(ic.codec) << " block " << ic.blockSize << " n=" << n << " i=" << i;
        decodeAccumulate(s.data(), s.size(), Expect{n, ic.codec}, acc.data());
        for (size_t i = 0; i < n; ++i)
          ASSERT_EQ(fp::floatBits(acc[i]), fp::floatBits(wantAcc[i]))
              << cclCodecName(ic.codec) << " block " << ic.blockSize << " n=" << n << " i=" << i;
      }
    }
  });
}

TEST(QuantizerIntEncode, EveryCodeEqualsTheElementMath) {
  withEachLoopKind([&] {
    std::vector<float> spread = spreadOver40Binades(37);
    // Values half-way between two codes of some block, and the block maximum's negation.
    for (size_t i = 0; i < 64; ++i) spread[512 + i] = (i & 1 ? -1.0f : 1.0f) * (static_cast<float>(i % 15) + 0.5f);
    const auto inputs = withFinitePatterns(spread);
    for (const IntCase& ic : intCases()) {
      const Params p = intParams(ic);
      const int bits = intBits(ic.codec);
      const int qmax = math::intQmax(bits);
      // Ties: every 8th value is qmax * 2^-3, so each block's scale is exactly 2^-3 and the
      // others land exactly half-way between two codes, where an inverse one ulp off rounds
      // the other way.
      std::vector<float> ties(2000 + 23);
      for (size_t i = 0; i < ties.size(); ++i)
        ties[i] = (i % 8 == 0 ? static_cast<float>(qmax) : static_cast<float>(i % qmax) + 0.5f) * 0.125f *
                  (i % 3 == 1 ? -1.0f : 1.0f);
      auto all = inputs;
      all.push_back(ties);
      for (const auto& x : all) {
        const auto s = encodeVec(p, x);
        const Layout l = layoutOf(readHeader(s.data(), s.size()));
        for (size_t i = 0; i < x.size(); ++i) {
          float sc;
          if (!intScaleOf(s, l, ic.fp16Scales, i / p.blockSize, sc)) continue;
          const float inv = sc > 0.0f ? 1.0f / sc : 0.0f;
          const uint32_t want = static_cast<uint32_t>(math::quantIntNearest(x[i] * inv, qmax)) & ((1u << bits) - 1);
          ASSERT_EQ(intCodeAt(s, l, i, bits), want)
              << cclCodecName(ic.codec) << " block " << ic.blockSize << " fp16 " << ic.fp16Scales << " n=" << x.size()
              << " i=" << i << " x=" << x[i];
        }
      }
    }
  });
}

// Every stored scale is the one the per-block element binding (K::chooseScale, which the GPU
// tests compare with the device's) gives, over scales across the whole fp32 range.
template <class K>
void expectScalesOfChooseScale(cclCodec_t c, bool fp16) {
  std::mt19937 rng(41);
  std::uniform_real_distribution<float> frac(1.0f, 2.0f);
  std::uniform_int_distribution<int> expo(-140, 120);
  for (uint32_t bs : {128u, 32u, 40u}) {
    Params p = params(c);
    p.blockSize = bs;
    p.fp16Scales = fp16;
    // Each block spans one binade, a different one per block, so scales cover the range.
    std::vector<float> x(37 * bs + 19);
    for (size_t b = 0; b * bs < x.size(); ++b) {
      const int e = expo(rng);
      for (size_t i = b * bs; i < std::min(x.size(), (b + 1) * bs); ++i)
        x[i] = (rng() & 1 ? -1.0f : 1.0f) * std::ldexp(frac(rng), e);
    }
    const auto s = encodeVec(p, x);
    const Header h = readHeader(s.data(), s.size());
    const Layout l = layoutOf(h);
    const size_t sb = scaleBytes(c, h.flags);
    float streamMax = 0.0f;
    for (float v : x) streamMax = std::max(streamMax, std::fabs(v));
    const float t = tensorScaled(c) ? math::nvfp4TensorScale(streamMax) : 1.0f;
    if (tensorScaled(c)) {
      ASSERT_EQ(fp::floatBits(tensorScaleOf(h)), fp::floatBits(t)) << "the stream's absmax / 2688";
    }
    for (size_t b = 0; b * bs < x.size(); ++b) {
      float m = 0.0f;
      for (size_t i = b * bs; i < std::min(x.size(), (b + 1) * bs); ++i) m = std::max(m, std::fabs(x[i]));
      const uint32_t want = K::chooseScale(m, fp16, t).stored;
      ASSERT_EQ(loadScale(&s[l.scales], b, sb), want)
          << cclCodecName(c) << " block " << bs << " #" << b << " absmax " << m;
    }
  }
}

// int2_midrise: every value decodes to one of four levels (q - 1.5) s, s = absmax / 1.5 of
// its block, within s / 2 of the input (a zero too: it has no level of its own); all four
// are used, and on Gaussian data it loses less than int2's three levels at the same bytes.
TEST(Midrise, FourLevelsWithinHalfAScale) {
  const size_t n = 4096, bs = 128;
  std::mt19937 rng(17);
  std::normal_distribution<float> d;
  std::vector<float> x(n);
  for (float& v : x) v = d(rng);
  x[5] = 0.0f;
  const Params mid = params(cclCodecInt2Midrise), three = params(cclCodecInt2);
  ASSERT_EQ(mid.blockSize, bs);
  const std::vector<uint8_t> stream = encodeVec(mid, x);
  EXPECT_EQ(stream.size(), encodeVec(three, x).size()) << "the same bytes as int2";
  const std::vector<float> y = decodeVec(stream, n), y3 = decodeVec(encodeVec(three, x), n);
  int used[4] = {0, 0, 0, 0};
  double err = 0, err3 = 0;
  for (size_t b = 0; b < n / bs; ++b) {
    float m = 0;
    for (size_t i = b * bs; i < (b + 1) * bs; ++i) m = std::max(m, std::fabs(x[i]));
    const float s = m / 1.5f;
    for (size_t i = b * bs; i < (b + 1) * bs; ++i) {
      int level = -1;
      for (int q = 0; q < 4; ++q)
        if (y[i] == (static_cast<float>(q) - 1.5f) * s) level = q;
      ASSERT_GE(level, 0) << "element " << i << ": " << y[i] << " is not a level of s " << s;
      ++used[level];
      EXPECT_LE(std::fabs(y[i] - x[i]), 0.5f * s * (1 + 0x1p-20f)) << "element " << i;
      err += double(y[i] - x[i]) * (y[i] - x[i]);
      err3 += double(y3[i] - x[i]) * (y3[i] - x[i]);
    }
  }
  for (int q = 0; q < 4; ++q) EXPECT_GT(used[q], 0) << "level " << q;
  EXPECT_NE(y[5], 0.0f) << "no zero level";
  EXPECT_LT(err, 0.8 * err3) << "four levels lose less than three";
  // The documented bound is int2's with the scale unit absmax / 1.5: a third less.
  EXPECT_NEAR(errorBound(mid, 0.3, 1.0, 1) / errorBound(three, 0.3, 1.0, 1), 1 / 1.5, 1e-6);
}

TEST(QuantizerScales, StoredScalesEqualChooseScale) {
  for (bool fp16 : {false, true}) {
    expectScalesOfChooseScale<IntKind<8>>(cclCodecInt8, fp16);
    expectScalesOfChooseScale<IntKind<4>>(cclCodecInt4, fp16);
    expectScalesOfChooseScale<IntKind<2>>(cclCodecInt2, fp16);
    expectScalesOfChooseScale<MidriseKind>(cclCodecInt2Midrise, fp16);
  }
  expectScalesOfChooseScale<Fp8Kind<fp::E4M3>>(cclCodecFp8E4m3, false);
  expectScalesOfChooseScale<Fp8Kind<fp::E5M2>>(cclCodecFp8E5m2, false);
  expectScalesOfChooseScale<MxKind<8>>(cclCodecMxfp8E4m3, false);
  expectScalesOfChooseScale<MxKind<4>>(cclCodecMxfp4, false);
  expectScalesOfChooseScale<Nvfp4Kind>(cclCodecNvfp4, false);
}

double bitsPerElement(const Params& p, size_t n, bool payloadOnly) {
  const auto s = encodeVec(p, makeInput(Pattern::kRandom, n, 1));
  return 8.0 * (s.size() - (payloadOnly ? kHeaderBytes : 0)) / n;
}

TEST(QuantizerSize, Int4Block32Fp16ScalesIsFourAndAHalfBits) {
  Params p = params(cclCodecInt4);
  p.blockSize = 32;
  p.fp16Scales = true;
  const size_t n = 1 << 20;
  EXPECT_LE(bitsPerElement(p, n, true), 4.5);
  EXPECT_LE(bitsPerElement(p, n, false), 4.5 + 8.0 * kHeaderBytes / n);
}

TEST(QuantizerSize, Fp8Block128IsEightAndAQuarterBits) {
  const size_t n = 1 << 20;
  for (cclCodec_t c : {cclCodecFp8E4m3, cclCodecFp8E5m2}) {
    EXPECT_LE(bitsPerElement(params(c), n, true), 8.25);
    EXPECT_LE(bitsPerElement(params(c), n, false), 8.25 + 8.0 * kHeaderBytes / n);
  }
  EXPECT_LE(bitsPerElement(params(cclCodecMxfp8E4m3), n, true), 8.25);
}

TEST(QuantizerSize, SmallScalesWithFp16TravelRawNotWrong) {
  Params p = params(cclCodecInt8);
  p.fp16Scales = true;
  std::vector<float> x(256, 1e-6f);
  x[3] = -2e-6f;
  const auto y = decodeVec(encodeVec(p, x), x.size());
  EXPECT_EQ(y, x);
}

}  // namespace
}  // namespace ccl::codec::test
