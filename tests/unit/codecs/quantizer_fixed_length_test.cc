// SPDX-License-Identifier: BSD-3-Clause
// Fixed-length quantizer streams (Params::fixedLength, wire.h kFlagFixedLength): the length
// is the bound for every input; the documented bound holds; a block holding NaN/Inf decodes
// as NaN and resets its residual; a block whose scale would underflow gets the smallest
// scale; otherwise the stream is the variable-length one's bytes but for the flag; the
// parameters and headers that cannot be fixed-length are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "codec_test_util.h"
#include "codecs/math/quant_int.h"
#include "codecs/wire.h"
#include "common/error.h"
#include "common/floatconv.h"

namespace ccl::codec::test {
namespace {

Params fixedParams(cclCodec_t c) {
  Params p = fixLength(params(c));
  EXPECT_TRUE(p.fixedLength) << cclCodecName(c);
  return p;
}

class FixedLengthTest : public ::testing::TestWithParam<cclCodec_t> {};

TEST_P(FixedLengthTest, LengthIsTheBoundAndTheBoundHoldsForEveryPattern) {
  const auto& patterns = allPatterns();
  for (size_t n = 0; n <= 600; ++n) {
    Params p = fixedParams(GetParam());
    const Pattern pat = patterns[n % patterns.size()];
    p.stochastic = n % 3 == 1;
    p.seed = n;
    if (n % 7 == 3) p.blockSize = 32;
    const std::string what = std::string(cclCodecName(p.codec)) + " n=" + std::to_string(n) + " " + patternName(pat);
    const auto x = makeInput(pat, n, static_cast<uint32_t>(n));
    const auto s = encodeVec(p, x);
    ASSERT_EQ(s.size(), maxEncodedBytes(p, n)) << what;
    ASSERT_EQ(inspect(s.data(), s.size()).aux, 0u) << what;
    const auto y = decodeVec(s, n);
    const auto bound = quantizerBound(p, x);
    const long bad = firstViolation(x, y, bound);
    ASSERT_EQ(bad, -1) << what << ": x[" << bad << "]=" << x[bad] << " decoded " << y[bad] << " bound " << bound[bad];
  }
}

TEST_P(FixedLengthTest, BelowTheRawVariantsBoundAndItsBytesWhenNoBlockIsRaw) {
  const Params p = fixedParams(GetParam());
  Params variable = p;
  variable.fixedLength = false;
  const size_t n = 10007;
  EXPECT_LT(maxEncodedBytes(p, n), maxEncodedBytes(variable, n));
  EXPECT_LT(maxEncodedBytes(p, n), kHeaderBytes + n * 4) << "smaller than the data";
  const auto x = makeInput(Pattern::kRandom, n, 3);
  auto fixed = encodeVec(p, x);
  const auto plain = encodeVec(variable, x);
  ASSERT_EQ(inspect(plain.data(), plain.size()).aux, 0u);
  ASSERT_EQ(fixed.size(), plain.size());
  EXPECT_EQ(fixed[6], plain[6] | kFlagFixedLength) << "the flags byte";
  fixed[6] = plain[6];
  EXPECT_EQ(fixed, plain);
}

TEST_P(FixedLengthTest, NonFiniteBlocksDecodeAsNanAndResetTheirResidual) {
  const Params p = fixedParams(GetParam());
  std::vector<float> x = makeInput(Pattern::kRandom, 1000, 1);
  x[5] = NAN;
  x[300] = INFINITY;
  x[999] = -INFINITY;
  std::vector<float> e = makeInput(Pattern::kRandom, x.size(), 2);
  for (float& v : e) v *= 0.01f;
  std::vector<float> v(x.size());
  for (size_t i = 0; i < x.size(); ++i) v[i] = x[i] + e[i];
  const auto s = encodeVec(p, x, e.data());
  EXPECT_EQ(s.size(), maxEncodedBytes(p, x.size()));
  const auto y = decodeVec(s, x.size());
  std::vector<float> acc(x.size(), 1.0f);
  decodeAccumulate(s.data(), s.size(), Expect{x.size(), p.codec}, acc.data());
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t b = i / p.blockSize;
    if (b == 5 / p.blockSize || b == 300 / p.blockSize || b == 999 / p.blockSize) {
      ASSERT_TRUE(std::isnan(y[i])) << i;
      ASSERT_TRUE(std::isnan(acc[i])) << i;
      ASSERT_EQ(e[i], 0.0f) << "a non-finite block's residual restarts, " << i;
    } else {
      ASSERT_TRUE(std::isfinite(y[i])) << i;
      ASSERT_EQ(acc[i], 1.0f + y[i]) << i;
      ASSERT_EQ(e[i], v[i] - y[i]) << i;
    }
  }
}

TEST_P(FixedLengthTest, TinyBlocksUseTheSmallestScaleWithinTheirBound) {
  Params p = fixedParams(GetParam());
  Params variable = p;
  variable.fixedLength = false;
  std::vector<float> x(p.blockSize * 3, 0.0f);
  for (size_t i = 0; i < p.blockSize; ++i) x[i] = (i % 2 ? 1.0f : -1.0f) * 0x1p-130f * static_cast<float>(i % 9);
  for (size_t i = p.blockSize; i < 2 * p.blockSize; ++i) x[i] = 1e-3f * static_cast<float>(i % 13);
  x[2 * p.blockSize + 1] = 0x1p-149f;  // the smallest denormal alone
  const auto y = decodeVec(encodeVec(p, x), x.size());
  const auto bound = quantizerBound(p, x);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_LE(std::fabs(double{x[i]} - y[i]), bound[i]) << i;
    // Per-block scales follow a tiny block down; nvfp4's block scales are steps of the
    // stream's tensor scale, so its tiny blocks keep an error of that size (still bounded).
    if ((i < p.blockSize || i >= 2 * p.blockSize) && !tensorScaled(p.codec)) {
      ASSERT_LE(bound[i], 0x1p-126) << i;
    }
  }
  if (codecInfo(p.codec).scale == ScaleFormat::kLinear) {
    const auto s = encodeVec(p, x);
    float first;
    std::memcpy(&first, s.data() + kHeaderBytes, 4);
    EXPECT_EQ(first, math::kMinScale) << "the smallest scale, not the raw marker";
    const auto plain = encodeVec(variable, x);
    EXPECT_EQ(inspect(plain.data(), plain.size()).aux, 2u) << "the variable-length stream sends both raw";
  }
}

TEST_P(FixedLengthTest, HalfAndBf16OutputsRoundTheDecodedValues) {
  const Params p = fixedParams(GetParam());
  std::vector<float> x = makeInput(Pattern::kMixed, 777, 21);
  x[100] = NAN;
  const auto s = encodeVec(p, x);
  const auto y = decodeVec(s, x.size());
  for (cclDataType_t type : {cclBfloat16, cclFloat16}) {
    std::vector<uint16_t> y16(x.size());
    decode(s.data(), s.size(), Expect{x.size()}, y16.data(), type);
    for (size_t i = 0; i < y.size(); ++i) {
      const float back = type == cclBfloat16 ? fp::bf16ToFloat(y16[i]) : fp::halfToFloat(y16[i]);
      const uint16_t want = type == cclBfloat16 ? fp::floatToBf16(y[i]) : fp::floatToHalf(y[i]);
      if (std::isnan(y[i])) {
        ASSERT_TRUE(std::isnan(back)) << i;
      } else {
        ASSERT_EQ(want, y16[i]) << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Codecs, FixedLengthTest, ::testing::ValuesIn(quantizerCodecs()),
                         [](const auto& info) { return std::string(cclCodecName(info.param)); });

TEST(FixedLengthParams, OnlyQuantizersWithFp32OrE8m0ScalesAreFixed) {
  for (int c = 0; c < cclNumCodecs; ++c) {
    const auto codec = static_cast<cclCodec_t>(c);
    EXPECT_EQ(fixLength(params(codec)).fixedLength, isQuantizer(codec)) << cclCodecName(codec);
    Params forced = params(codec);
    forced.fixedLength = true;
    if (!isQuantizer(codec)) {
      try {
        maxEncodedBytes(forced, 100);
        ADD_FAILURE() << cclCodecName(codec) << " accepted fixedLength";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), cclInvalidArgument);
      }
    }
  }
  Params half = params(cclCodecInt8);
  half.fp16Scales = true;
  EXPECT_FALSE(fixLength(half).fixedLength) << "fp16 scales stay variable-length";
  half.fixedLength = true;
  std::vector<float> x(64, 1.0f), out(1 << 12);
  try {
    encode(half, x.data(), cclFloat32, x.size(), out.data(), out.size() * 4);
    ADD_FAILURE() << "fp16 scales with fixedLength were accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("fixed-length"), std::string::npos) << e.what();
  }
}

TEST(FixedLengthWire, HeadersThatCannotBeFixedAreRefused) {
  const Params p = fixedParams(cclCodecInt4);
  std::vector<float> x = makeInput(Pattern::kRandom, 512, 9);
  const auto good = encodeVec(p, x);
  auto expectRefused = [&](std::vector<uint8_t> s, const char* why) {
    std::vector<float> y(x.size(), 7.0f);
    try {
      decode(s.data(), s.size(), Expect{x.size()}, y.data(), cclFloat32);
      ADD_FAILURE() << why << ": accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), cclInvalidUsage) << why;
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
    EXPECT_EQ(y, std::vector<float>(x.size(), 7.0f)) << why << ": output written";
  };
  auto withHeader = [&](auto edit) {
    std::vector<uint8_t> s = good;
    s.resize(s.size() + rawEntryBytes(p.blockSize), 0);
    Header h = loadHeader(s.data());
    edit(h);
    storeHeader(h, s.data());
    return s;
  };
  expectRefused(withHeader([](Header& h) { h.aux = 1; }), "raw blocks in a fixed-length stream");
  expectRefused(withHeader([](Header& h) { h.flags |= kFlagFp16Scales; }), "fp16 scales in a fixed-length stream");
  // A sparsifier's stream with the flag.
  Params topk = params(cclCodecTopK);
  auto sparse = encodeVec(topk, x);
  sparse[6] |= kFlagFixedLength;
  std::vector<float> y(x.size());
  EXPECT_THROW(decode(sparse.data(), sparse.size(), Expect{x.size()}, y.data(), cclFloat32), Error);
}

}  // namespace
}  // namespace ccl::codec::test
