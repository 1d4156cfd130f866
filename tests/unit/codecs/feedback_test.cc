// SPDX-License-Identifier: BSD-3-Clause
// The error-feedback state the compressed collectives run (codecs/feedback.h): the plain
// residual makes the running sum of decoded values track the running sum of inputs; LoCo
// keeps a moving average in 8 bits and clears it on schedule.
#include <gtest/gtest.h>

#include <cmath>

#include "codec_test_util.h"
#include "codecs/feedback.h"

namespace ccl::codec::test {
namespace {

constexpr int kOp = cclOpAllReduce;

double maxAbsDiff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// One call as an encode step runs it: prepare, encode x with the residual, finish.
std::vector<float> step(FeedbackState& fb, const Params& p, const std::vector<float>& x) {
  float* residual = fb.prepare(kOp, x.size(), x.size());
  const auto y = decodeVec(encodeVec(p, x, residual), x.size());
  fb.finish();
  return y;
}

TEST(ResidualFeedback, SumOfDecodedTracksSumOfInputs) {
  const size_t n = 2000;
  const Params p = params(cclCodecInt2);
  FeedbackState ef(cclFeedbackResidual, 0.0f, 0);
  std::vector<double> sumX(n, 0), sumY(n, 0), sumNoEf(n, 0);
  for (int k = 0; k < 50; ++k) {
    const auto x = makeInput(Pattern::kRandom, n, 100 + k);
    const auto y = step(ef, p, x);
    const auto y0 = decodeVec(encodeVec(p, x), n);
    for (size_t i = 0; i < n; ++i) {
      sumX[i] += x[i];
      sumY[i] += y[i];
      sumNoEf[i] += y0[i];
    }
    // The sums differ by exactly the residual the state carries into the next call.
    const float* e = ef.prepare(kOp, n, n);
    for (size_t i = 0; i < n; ++i) ASSERT_NEAR(sumX[i] - sumY[i], e[i], 1e-3) << "call " << k;
  }
  EXPECT_EQ(ef.calls(), 50u);
  EXPECT_LT(maxAbsDiff(sumX, sumY), 0.25 * maxAbsDiff(sumX, sumNoEf));
}

TEST(ResidualFeedback, AnotherOperationOrSizeStartsAfresh) {
  const size_t n = 300;
  const Params p = params(cclCodecInt2);
  FeedbackState ef(cclFeedbackResidual, 0.0f, 0);
  step(ef, p, makeInput(Pattern::kRandom, n, 1));
  const float* e = ef.prepare(kOp, n, n);
  double carried = 0;
  for (size_t i = 0; i < n; ++i) carried += std::fabs(e[i]);
  ASSERT_GT(carried, 0.0) << "int2 leaves an error to carry";
  for (auto [op, floats] : {std::pair<int, size_t>{cclOpAllGather, n}, std::pair<int, size_t>{kOp, n + 1}}) {
    const float* fresh = ef.prepare(op, floats, floats);
    for (size_t i = 0; i < floats; ++i) ASSERT_EQ(fresh[i], 0.0f) << "op " << op << " size " << floats;
    EXPECT_EQ(ef.calls(), 0u);
  }
}

TEST(LocoFeedback, MovingAverageIn8BitsWithReset) {
  const size_t n = 1000;
  const Params p = params(cclCodecInt4);
  FeedbackState loco(cclFeedbackLoco, 0.5f, 3);
  std::vector<float> prev(n, 0.0f);
  for (int k = 0; k < 7; ++k) {
    const auto x = makeInput(Pattern::kRandom, n, 200 + k);
    float* e = loco.prepare(kOp, n, n);
    // Calls 3 and 6 start from a cleared average.
    const std::vector<float> start(e, e + n);
    if (k % 3 == 0) {
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(start[i], 0.0f) << "call " << k;
    } else {
      // The stored average reads back within int8's bound of what was folded in.
      float m = 0;
      for (float v : prev) m = std::max(m, std::fabs(v));
      for (size_t i = 0; i < n; ++i)
        ASSERT_NEAR(start[i], prev[i], errorBound(params(cclCodecInt8), std::fabs(prev[i]), m, 1))
            << "call " << k << " element " << i;
    }
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = x[i] + start[i];
    const auto sent = encodeVec(p, x, e);
    EXPECT_EQ(sent, encodeVec(p, v)) << "call " << k << " sends x + e";
    const auto y = decodeVec(sent, n);
    // The residual holds this call's error until finish folds it into the average.
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(e[i], v[i] - y[i]) << i;
    loco.finish();
    for (size_t i = 0; i < n; ++i) prev[i] = 0.5f * start[i] + 0.5f * (v[i] - y[i]);
    if ((k + 1) % 3 != 0) {
      EXPECT_LT(loco.storedBytes(), n * 2) << "about a byte per element";
    }
  }
  EXPECT_EQ(loco.calls(), 7u);
}

// Why LoCo loses to plain error feedback where a block's scale is coarse: a value that rounds
// to zero adds only (1 - beta) of its miss to LoCo's average each call (e <- beta e + (1 -
// beta)(g + e) = e + (1 - beta) g), so it reaches the rounding step 1 / (1 - beta) times later
// than the residual does. Over many calls both deliver the inputs' sum.
TEST(LocoFeedback, ASmallValueAccumulatesAtOneMinusBetaOfTheResidualsRate) {
  const size_t n = 128;  // one int2 block: s = absmax = 1, so a value is sent once it reaches 1/2
  const Params p = params(cclCodecInt2);
  ASSERT_FALSE(p.stochastic);
  constexpr float kSmall = 0.03f;
  std::vector<float> x(n, kSmall);
  x[0] = 1.0f;  // the block's largest, sent exactly every call
  const int calls = 2000;
  struct Run {
    FeedbackState state;
    int firstSent = -1;
    double sum = 0;  // of element 1's decoded values
  } ef{FeedbackState(cclFeedbackResidual, 0.0f, 0)}, loco{FeedbackState(cclFeedbackLoco, 0.8f, 0)};
  for (int k = 1; k <= calls; ++k) {
    for (Run* r : {&ef, &loco}) {
      const auto y = step(r->state, p, x);
      ASSERT_EQ(y[0], 1.0f) << "call " << k;
      if (y[1] != 0.0f && r->firstSent < 0) r->firstSent = k;
      r->sum += y[1];
    }
  }
  // Call k sends x + e: with the residual 0.03 k, first at least 1/2 at call 17; with LoCo's
  // average 0.03 + 0.006 (k - 1), at call 80, about 1 / (1 - beta) = 5 times later.
  EXPECT_EQ(ef.firstSent, 17);
  EXPECT_GE(loco.firstSent, 76);
  EXPECT_LE(loco.firstSent, 84);
  // Both deliver the inputs' sum but for what they still hold: the residual's e (|e| <= 1/2),
  // LoCo's e / (1 - beta) (the telescoped sum of its errors; |e| <= 1/2, plus int8's rounding).
  EXPECT_NEAR(ef.sum, calls * kSmall, 0.5);
  EXPECT_NEAR(loco.sum, calls * kSmall, 0.51 / 0.2);
}

}  // namespace
}  // namespace ccl::codec::test
