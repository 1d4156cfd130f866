// Error feedback: the plain residual makes the running sum of decoded values track the
// running sum of inputs; LoCo keeps a moving average in 8 bits and resets on schedule.
#include <gtest/gtest.h>

#include <cmath>

#include "codec_test_util.h"
#include "codecs/error_feedback.h"
#include "common/error.h"

namespace ccl::codec::test {
namespace {

double maxAbsDiff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

TEST(ResidualFeedback, SumOfDecodedTracksSumOfInputs) {
  const size_t n = 2000;
  Params p = params(cclCodecInt2);
  ResidualFeedback ef(n);
  std::vector<double> sumX(n, 0), sumY(n, 0), sumNoEf(n, 0);
  for (int step = 0; step < 50; ++step) {
    const auto x = makeInput(Pattern::kRandom, n, 100 + step);
    std::vector<uint8_t> s(maxEncodedBytes(p, n));
    s.resize(ef.encode(p, x.data(), cclFloat32, n, s.data(), s.size()));
    const auto y = decodeVec(s, n);
    const auto y0 = decodeVec(encodeVec(p, x), n);
    for (size_t i = 0; i < n; ++i) {
      sumX[i] += x[i];
      sumY[i] += y[i];
      sumNoEf[i] += y0[i];
    }
    // The sums differ by exactly the residual left in the state.
    for (size_t i = 0; i < n; ++i) ASSERT_NEAR(sumX[i] - sumY[i], ef.error()[i], 1e-3);
  }
  EXPECT_LT(maxAbsDiff(sumX, sumY), 0.25 * maxAbsDiff(sumX, sumNoEf));
  ef.reset();
  EXPECT_EQ(ef.error(), std::vector<float>(n, 0.0f));
  EXPECT_THROW(ef.encode(p, nullptr, cclFloat32, n + 1, nullptr, 0), Error);
}

TEST(LocoFeedback, MovingAverageIn8BitsWithReset) {
  const size_t n = 1000;
  Params p = params(cclCodecInt4);
  LocoOptions opt;
  opt.beta = 0.5f;
  opt.resetInterval = 3;
  LocoFeedback loco(n, opt);
  EXPECT_LT(loco.storageBytes(), n * 2) << "about a byte per element";
  std::vector<float> prev(n, 0.0f), now(n);
  for (int step = 0; step < 7; ++step) {
    const auto x = makeInput(Pattern::kRandom, n, 200 + step);
    loco.error(prev.data());
    if (step % 3 == 0) prev.assign(n, 0.0f);  // reset before steps 3 and 6
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = x[i] + prev[i];
    std::vector<uint8_t> s(maxEncodedBytes(p, n));
    s.resize(loco.encode(p, x.data(), cclFloat32, n, s.data(), s.size()));
    EXPECT_EQ(s, encodeVec(p, v)) << "step " << step << " sends x + e";
    const auto y = decodeVec(s, n);
    loco.error(now.data());
    float m = 0;
    for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(0.5f * prev[i] + 0.5f * (v[i] - y[i])));
    for (size_t i = 0; i < n; ++i)
      ASSERT_NEAR(now[i], 0.5f * prev[i] + 0.5f * (v[i] - y[i]), m / 127 * 0.51 + 1e-7) << step << " " << i;
  }
  EXPECT_EQ(loco.steps(), 7u);
  EXPECT_THROW(LocoFeedback(10, LocoOptions{1.0f, 0}), Error);
}

}  // namespace
}  // namespace ccl::codec::test
