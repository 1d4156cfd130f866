// SPDX-License-Identifier: BSD-3-Clause
// The per-element bound of -c 1 with -Z: values just inside pass, values just outside are
// counted wrong, a codec without an element-wise bound (powersgd) is checked for finite
// results only, and a simulated quantized allreduce (two-shot and ring) stays inside the
// composed bound while a single round trip's bound is too tight for it.
#include "harness/codec_bound.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace cclperf {
namespace {

// Names for messages; the bound itself comes from the library (cclCodecErrorBound).
const char* nameOf(cclCodec_t c) { return c == cclCodecInt8 ? "int8" : c == cclCodecInt4 ? "int4" : "other"; }

CodecOptions codecNamed(cclCodec_t c) {
  CodecOptions z;
  z.name = nameOf(c);
  z.codec = c;
  return z;
}

TypedBuffer view(std::vector<double>& v) { return TypedBuffer{v.data(), v.size(), cclFloat64}; }

// Symmetric absmax quantization per block, rounded to nearest, as the int codecs document.
std::vector<double> quantize(const std::vector<double>& x, double qmax, size_t block) {
  std::vector<double> y(x.size());
  for (size_t b = 0; b < x.size(); b += block) {
    const size_t end = std::min(x.size(), b + block);
    double m = 0;
    for (size_t i = b; i < end; ++i) m = std::max(m, std::fabs(x[i]));
    const double s = m / qmax;
    for (size_t i = b; i < end; ++i) y[i] = s > 0 ? std::nearbyint(x[i] / s) * s : 0.0;
  }
  return y;
}

std::vector<std::vector<double>> inputs(int n, size_t count) {
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> d(0, 1000);
  std::vector<std::vector<double>> in(size_t(n), std::vector<double>(count, 0.0));
  for (auto& x : in)
    for (auto& v : x) v = d(rng);
  return in;
}

// Ring allreduce: the partial sum is quantized at every hop, then the full sum once.
std::vector<double> ringAllReduce(const std::vector<std::vector<double>>& in, double qmax) {
  std::vector<double> acc = quantize(in[0], qmax, 128);
  for (size_t r = 1; r < in.size(); ++r) {
    for (size_t i = 0; i < acc.size(); ++i) acc[i] += in[r][i];
    acc = quantize(acc, qmax, 128);
  }
  return acc;
}

// Two-shot: every peer's shard quantized once, the owner's own exact, the sum once.
std::vector<double> twoShotAllReduce(const std::vector<std::vector<double>>& in, double qmax) {
  std::vector<double> sum = in[0];
  for (size_t r = 1; r < in.size(); ++r) {
    const std::vector<double> q = quantize(in[r], qmax, 128);
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += q[i];
  }
  return quantize(sum, qmax, 128);
}

std::vector<double> exactSum(const std::vector<std::vector<double>>& in) {
  std::vector<double> sum(in[0].size(), 0.0);
  for (const auto& x : in)
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += x[i];
  return sum;
}

TEST(CodecBound, CodecNoneIsExact) {
  const ElementBound bound(codecNamed(cclCodecNone), cclFloat32, true, {true, 4, 2});
  EXPECT_TRUE(bound.exact());
  std::vector<double> want{1.0, 2.0, 3.0};
  std::vector<double> got = want;
  EXPECT_EQ(tallyAgainstBound(view(got), view(want), bound).wrong, 0);
  got[1] = std::nextafter(2.0, 3.0);
  EXPECT_EQ(tallyAgainstBound(view(got), view(want), bound).wrong, 1);
}

TEST(CodecBound, UncompressibleCallsAreExact) {
  const ElementBound bound(codecNamed(cclCodecInt8), cclInt32, false, {true, 4, 2});
  EXPECT_TRUE(bound.exact());
  EXPECT_EQ(bound(1000.0, 1000.0), 0.0);
}

TEST(CodecBound, JustOutsideTheBoundIsWrong) {
  const ElementBound bound(codecNamed(cclCodecInt8), cclFloat32, true, {true, 4, 2});
  std::vector<double> want{1000.0, 10.0, 0.0, 500.0};
  const double s = 1000.0;
  std::vector<double> inside(want.size()), outside(want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const double b = bound(want[i], s);
    ASSERT_GT(b, 0.0);
    inside[i] = want[i] + (i % 2 ? -b : b) * (1 - 1e-9);
    outside[i] = want[i] + (i % 2 ? -b : b) * (1 + 1e-9);
  }
  const AccuracyTally in = tallyAgainstBound(view(inside), view(want), bound);
  EXPECT_EQ(in.wrong, 0);
  EXPECT_EQ(in.count, double(want.size()));
  EXPECT_DOUBLE_EQ(in.maxExact, 1000.0);
  EXPECT_EQ(tallyAgainstBound(view(outside), view(want), bound).wrong, long(want.size()));
}

TEST(CodecBound, IntBoundMatchesCodecDocumentation) {
  // One round trip of int8 errs by at most (absmax / 127) / 2.
  const ElementBound one(codecNamed(cclCodecInt8), cclFloat32, true, {true, 1, 0});
  EXPECT_NEAR(one(0.0, 254.0), 1.0, 1e-3);  // plus the fp32 slack
  EXPECT_GE(one(0.0, 254.0), 1.0);
  CodecOptions stochastic = codecNamed(cclCodecInt8);
  stochastic.stochastic = 1;
  EXPECT_NEAR(ElementBound(stochastic, cclFloat32, true, {true, 1, 0})(0.0, 254.0), 2.0, 1e-3);
}

TEST(CodecBound, NaNIsWrong) {
  const ElementBound bound(codecNamed(cclCodecFp8E4m3), cclFloat32, true, {true, 1, 0});
  std::vector<double> want{1.0, 2.0};
  std::vector<double> got{1.0, std::numeric_limits<double>::quiet_NaN()};
  EXPECT_EQ(tallyAgainstBound(view(got), view(want), bound).wrong, 1);
}

// powersgd has no element-wise bound (the library's is +inf): -c 1 checks only that results
// are finite. The bound is +inf, not the NaN of inf - inf that counted every element wrong.
TEST(CodecBound, PowerSgdChecksFinitenessOnly) {
  CodecOptions z;
  z.name = "powersgd";
  z.codec = cclCodecPowerSgd;
  EXPECT_FALSE(hasElementBound(z));
  EXPECT_TRUE(hasElementBound(codecNamed(cclCodecInt8)));
  EXPECT_TRUE(hasElementBound(codecNamed(cclCodecNone)));
  const ElementBound bound(z, cclFloat32, true, {true, 4, 2});
  EXPECT_EQ(bound(10.0, 1000.0), std::numeric_limits<double>::infinity());
  std::vector<double> want{1000.0, 10.0, 0.0};
  std::vector<double> far{-5000.0, 10.0, 3.0};  // a low-rank approximation may miss by this much
  EXPECT_EQ(tallyAgainstBound(view(far), view(want), bound).wrong, 0);
  std::vector<double> broken{std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN(), 0.0};
  EXPECT_EQ(tallyAgainstBound(view(broken), view(want), bound).wrong, 2);
}

TEST(CodecBound, SparsifierAllowsDroppingOnly) {
  const ElementBound bound(codecNamed(cclCodecTopK), cclFloat32, true, {true, 4, 2});
  std::vector<double> want{100.0, 50.0, 7.0};
  std::vector<double> dropped{0.0, 50.0, 7.0};
  EXPECT_EQ(tallyAgainstBound(view(dropped), view(want), bound).wrong, 0);
  std::vector<double> corrupted{-1.0, 50.0, 7.0};  // more than every contributor dropped
  EXPECT_EQ(tallyAgainstBound(view(corrupted), view(want), bound).wrong, 1);
}

// The composed bound holds for both allreduce algorithms of int8 and int4; the bound of a
// single round trip does not (so -c 1 with a too tight bound reports #wrong > 0).
TEST(CodecBound, SimulatedAllReduceFitsComposedBoundOnly) {
  for (cclCodec_t c : {cclCodecInt8, cclCodecInt4}) {
    const double qmax = c == cclCodecInt8 ? 127.0 : 7.0;
    for (int n : {2, 4, 8}) {
      const auto in = inputs(n, 4096);
      std::vector<double> want = exactSum(in);
      const ElementBound composed(codecNamed(c), cclFloat32, true, {true, n, 2});
      const ElementBound single(codecNamed(c), cclFloat32, true, {true, 1, 0});
      for (auto* algorithm : {&ringAllReduce, &twoShotAllReduce}) {
        std::vector<double> got = algorithm(in, qmax);
        const AccuracyTally t = tallyAgainstBound(view(got), view(want), composed);
        EXPECT_EQ(t.wrong, 0) << nameOf(c) << " n=" << n;
        EXPECT_GT(t.maxErr, 0.0);
      }
      std::vector<double> ring = ringAllReduce(in, qmax);
      EXPECT_GT(tallyAgainstBound(view(ring), view(want), single).wrong, 0) << nameOf(c) << " n=" << n;
    }
  }
}

TEST(CodecBound, FeedbackWidensTheBound) {
  CodecOptions z = codecNamed(cclCodecInt4);
  const double plain = ElementBound(z, cclFloat32, true, {true, 4, 2})(100.0, 1000.0);
  z.feedback = cclFeedbackResidual;
  const double ef = ElementBound(z, cclFloat32, true, {true, 4, 2})(100.0, 1000.0);
  z.feedback = cclFeedbackLoco;
  const double loco = ElementBound(z, cclFloat32, true, {true, 4, 2})(100.0, 1000.0);
  EXPECT_GT(ef, plain);
  EXPECT_GT(loco, ef);
}

TEST(CodecBound, TallyStatistics) {
  const ElementBound bound(codecNamed(cclCodecInt8), cclFloat32, true, {true, 1, 0});
  std::vector<double> want{10.0, -20.0};
  std::vector<double> got{10.5, -20.0};
  const AccuracyTally t = tallyAgainstBound(view(got), view(want), bound);
  EXPECT_DOUBLE_EQ(t.maxErr, 0.5);
  EXPECT_DOUBLE_EQ(t.sumSq, 0.25);
  EXPECT_DOUBLE_EQ(t.maxExact, 20.0);
  AccuracyTally total;
  total.add(t);
  total.add(t);
  EXPECT_EQ(total.count, 4.0);
  EXPECT_DOUBLE_EQ(total.sumSq, 0.5);
}

}  // namespace
}  // namespace cclperf
