// SPDX-License-Identifier: BSD-3-Clause
// The codec table (codec_table.h) has a row, a name and a bound for every codec, and each
// quantizer's documented bound is both kept and tight: probes built to hit each of its
// terms (the relative one and the absolute one, to nearest and stochastically) come within
// a factor of the bound and never beyond it. A bound written twice too loose, or too tight,
// fails here.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "codec_test_util.h"

namespace ccl::codec::test {
namespace {

TEST(CodecTable, EveryCodecHasARowANameAndABound) {
  for (int c = 0; c < cclNumCodecs; ++c) {
    const CodecInfo info = codecInfo(c);
    SCOPED_TRACE(info.name ? info.name : "(no name)");
    ASSERT_NE(info.name, nullptr);
    EXPECT_EQ(std::string(cclCodecName(static_cast<cclCodec_t>(c))), info.name);
    cclCodec_t parsed;
    ASSERT_TRUE(codecFromName(info.name, &parsed));
    EXPECT_EQ(parsed, c);
    const Params p = params(static_cast<cclCodec_t>(c));
    const double b = errorBound(p, 0.5, 1.0, 2);
    EXPECT_EQ(std::isfinite(b), boundedPerElement(c));
    EXPECT_GE(b, 0.0);
    switch (info.family) {
      case Family::kNone:
        EXPECT_EQ(b, 0.0);
        break;
      case Family::kSparsifier:
        EXPECT_NE(info.selection, Selection::kNone);
        EXPECT_EQ(b, 0.5) << "exact or dropped";
        break;
      case Family::kQuantizer:
        EXPECT_GT(info.codeBits, 0);
        EXPECT_GT(info.defaultBlock, 0);
        EXPECT_EQ(p.blockSize, info.defaultBlock);
        EXPECT_GT(info.scaleDivisor, 0.0f);
        EXPECT_NE(info.scale, ScaleFormat::kNone);
        EXPECT_GT(info.nearest.rel + info.nearest.abs, 0.0) << "a quantizer without a bound";
        EXPECT_GE(info.stochastic.rel, info.nearest.rel);
        EXPECT_GE(info.stochastic.abs, info.nearest.abs);
        EXPECT_GT(b, 0.0);
        break;
      case Family::kLowRank:
        EXPECT_GT(info.defaultRank, 0);
        EXPECT_EQ(p.rank, info.defaultRank);
        EXPECT_TRUE(std::isinf(b)) << "no element-wise bound";
        break;
    }
  }
  EXPECT_STREQ(cclCodecName(cclNumCodecs), "invalid");
}

TEST(CodecTable, BoundComposesOverRoundTrips) {
  for (cclCodec_t c : quantizerCodecs()) {
    const Params p = params(c);
    EXPECT_EQ(errorBound(p, 0.3, 1.0, 0), 0.0);
    const double one = errorBound(p, 0.3, 1.0, 1);
    // Each round trip adds at least one more bound of the same value.
    EXPECT_GE(errorBound(p, 0.3, 1.0, 2), 2 * one) << cclCodecName(c);
    EXPECT_GE(errorBound(p, 0.3, 1.0, 8), 8 * one) << cclCodecName(c);
  }
}

// Blocks whose absmax is m and whose other elements are x, encoded and decoded once.
// Returns the largest |error| / bound over the x elements; fails if any exceeds 1.
double worstRatio(const Params& p, double m, double x) {
  const size_t blocks = 64, n = blocks * p.blockSize;
  std::vector<float> in(n, static_cast<float>(x));
  for (size_t b = 0; b < blocks; ++b) in[b * p.blockSize] = static_cast<float>(m);
  for (size_t i = 1; i < n; i += 2) in[i] = -in[i];
  const auto out = decodeVec(encodeVec(p, in), n);
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    const double bound = errorBound(p, std::fabs(in[i]), m, 1);
    const double err = std::fabs(double(out[i]) - in[i]);
    EXPECT_LE(err, bound) << cclCodecName(p.codec) << " m " << m << " x " << in[i];
    if (i % p.blockSize != 0) worst = std::max(worst, err / bound);
  }
  return worst;
}

struct Probe {
  cclCodec_t codec;
  bool stochastic;
  bool fp16Scales;
  double m;  // the block's absmax
  double x;  // the probed elements
  const char* term;
};

// The absmax sets the scale to 1 (s = m / divisor, or MX's X = 1; nvfp4's block scale is
// m / 6 = 1), so x is in scale units.
// Nearest: x just below a rounding midpoint. Stochastic: x just above a code, so that a few
// of the 4096 samples round down by almost a whole step.
const Probe kProbes[] = {
    {cclCodecInt8, false, false, 127, 0.5 - 0x1p-16, "abs"},
    {cclCodecInt8, false, true, 127, 0.5 - 0x1p-16, "abs, fp16 scales"},
    {cclCodecInt8, true, false, 127, 0.97, "abs"},
    {cclCodecInt4, false, false, 7, 0.5 - 0x1p-16, "abs"},
    {cclCodecInt4, true, true, 7, 0.97, "abs, fp16 scales"},
    {cclCodecInt2, false, false, 1, 0.5 - 0x1p-16, "abs"},
    {cclCodecInt2, true, false, 1, 0.97, "abs"},
    // int2_midrise: levels at +-0.5 and +-1.5 scales, midpoints at 0 and +-1.
    {cclCodecInt2Midrise, false, false, 1.5, 1 - 0x1p-16, "abs"},
    {cclCodecInt2Midrise, false, true, 1.5, 1 - 0x1p-16, "abs, fp16 scales"},
    {cclCodecInt2Midrise, true, false, 1.5, 0.53, "abs"},
    {cclCodecFp8E4m3, false, false, 448, 1.0625 - 0x1p-12, "rel"},
    {cclCodecFp8E4m3, false, false, 448, 0x1p-10 - 0x1p-16, "abs"},
    {cclCodecFp8E4m3, true, false, 448, 1.12, "rel"},
    {cclCodecFp8E4m3, true, false, 448, 0.96 * 0x1p-9, "abs"},
    {cclCodecFp8E5m2, false, false, 57344, 1.125 - 0x1p-10, "rel"},
    {cclCodecFp8E5m2, false, false, 57344, 0x1p-17 - 0x1p-24, "abs"},
    {cclCodecFp8E5m2, true, false, 57344, 1.24, "rel"},
    {cclCodecFp8E5m2, true, false, 57344, 0.96 * 0x1p-16, "abs"},
    {cclCodecMxfp8E4m3, false, false, 511, 511, "rel (saturation)"},
    {cclCodecMxfp8E4m3, false, false, 300, 0x1p-10 - 0x1p-16, "abs"},
    {cclCodecMxfp8E4m3, true, false, 511, 511, "rel (saturation)"},
    {cclCodecMxfp8E4m3, true, false, 300, 0.96 * 0x1p-9, "abs"},
    // e2m1 (X = 1 for m in [4, 8); nvfp4's block scale is m / 6 when the block holds the
    // stream's absmax). Nearest rounding reaches its rel term only by saturating (mxfp4);
    // stochastic rounding reaches both terms.
    {cclCodecMxfp4, false, false, 7.99, 7.99, "rel (saturation)"},
    {cclCodecMxfp4, false, false, 7, 0.2499, "abs"},
    {cclCodecMxfp4, true, false, 7, 4.1, "rel"},
    {cclCodecMxfp4, true, false, 7, 0.01, "abs"},
    {cclCodecNvfp4, false, false, 6, 0.2499, "abs"},
    {cclCodecNvfp4, true, false, 6, 4.1, "rel"},
    {cclCodecNvfp4, true, false, 6, 0.01, "abs"},
};

TEST(CodecBounds, EachTermIsReachedAndNeverExceeded) {
  for (const Probe& pr : kProbes) {
    Params p = params(pr.codec);
    p.stochastic = pr.stochastic;
    p.fp16Scales = pr.fp16Scales;
    p.seed = 7;
    const double r = worstRatio(p, pr.m, pr.x);
    // A term documented twice too large would leave every probe below 0.5 of it.
    EXPECT_GE(r, 0.7) << cclCodecName(pr.codec) << (pr.stochastic ? " stochastic " : " nearest ") << pr.term;
  }
}

}  // namespace
}  // namespace ccl::codec::test
