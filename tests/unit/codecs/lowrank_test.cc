// SPDX-License-Identifier: BSD-3-Clause
// The low-rank codec (powersgd): a matrix of rank <= r survives encode/decode up to fp32
// rounding; the stream is P and Q; error feedback keeps exactly what was lost and its warm
// start makes repeated approximations of one matrix better; shapes and ranks are checked.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "codecs/codec.h"
#include "codecs/lowrank.h"
#include "common/error.h"

namespace ccl::codec::test {
namespace {

using Vec = std::vector<float>;

Params lowRank(uint32_t rank, size_t rows = 0, size_t cols = 0) {
  Params p = defaultParams(cclCodecPowerSgd);
  p.rank = rank;
  p.rows = rows;
  p.cols = cols;
  p.seed = 99;
  return p;
}

// rows x cols, of rank k: sum of k random outer products.
Vec ofRank(size_t rows, size_t cols, size_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  Vec a(rows * k), b(cols * k), m(rows * cols, 0.0f);
  for (float& v : a) v = d(rng);
  for (float& v : b) v = d(rng);
  for (size_t i = 0; i < rows; ++i)
    for (size_t j = 0; j < cols; ++j)
      for (size_t t = 0; t < k; ++t) m[i * cols + j] += a[i * k + t] * b[j * k + t];
  return m;
}

float maxAbs(const Vec& v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

float maxDiff(const Vec& a, const Vec& b) {
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

Vec roundTrip(const Params& p, const Vec& x, float* residual = nullptr, size_t* bytes = nullptr) {
  std::vector<uint8_t> s(maxEncodedBytes(p, x.size()));
  s.resize(encode(p, x.data(), cclFloat32, x.size(), s.data(), s.size(), residual));
  if (bytes) *bytes = s.size();
  Expect e;
  e.count = x.size();
  e.codec = cclCodecPowerSgd;
  Vec y(x.size());
  decode(s.data(), s.size(), e, y.data(), cclFloat32);
  return y;
}

TEST(LowRank, MatricesOfRankAtMostRArriveExactly) {
  for (auto [rows, cols, k, r] : {std::tuple{64, 48, 1, 1}, std::tuple{64, 48, 3, 4}, std::tuple{100, 7, 4, 4},
                                  std::tuple{5, 300, 2, 8}, std::tuple{1, 1, 1, 1}}) {
    const Vec m = ofRank(rows, cols, k, rows + cols);
    const Vec y = roundTrip(lowRank(r, rows, cols), m);
    EXPECT_LE(maxDiff(y, m), 2e-5f * maxAbs(m)) << rows << "x" << cols << " rank " << k << " r " << r;
  }
  // A full-rank matrix loses something: the test above can fail.
  const Vec full = ofRank(40, 40, 40, 5);
  EXPECT_GT(maxDiff(roundTrip(lowRank(4, 40, 40), full), full), 0.1f * maxAbs(full));
}

TEST(LowRank, TheStreamIsPAndQ) {
  const size_t rows = 30, cols = 20;
  const uint32_t r = 3;
  size_t bytes = 0;
  roundTrip(lowRank(r, rows, cols), ofRank(rows, cols, 2, 1), nullptr, &bytes);
  EXPECT_EQ(bytes, 32 + (rows * r * 4 + 15) / 16 * 16 + cols * r * 4);
  // The default shape is near-square and pads: 1000 elements as 32 rows of 32.
  const LowRankShape s = lowRankShape(lowRank(4), 1000);
  EXPECT_EQ(s.cols, 32u);
  EXPECT_EQ(s.rows, 32u);
  EXPECT_EQ(s.rank, 4u);
  EXPECT_EQ(lowRankShape(lowRank(10, 3, 5), 15).rank, 3u) << "r at most min(rows, cols)";
  const Vec prime = ofRank(1, 997, 1, 3);  // 997 elements: 32 columns, the last row short
  const Vec y = roundTrip(lowRank(32), prime);
  EXPECT_LE(maxDiff(y, prime), 2e-5f * maxAbs(prime)) << "rank 32 of a 32 x 32 matrix is exact";
}

float frobenius(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i] - b[i]) * (a[i] - b[i]);
  return static_cast<float>(std::sqrt(s));
}

// With a residual the codec encodes x + e and keeps exactly what it lost.
TEST(LowRank, FeedbackKeepsTheLoss) {
  const size_t rows = 50, cols = 40;
  const Params p = lowRank(2, rows, cols);
  const Vec x = ofRank(rows, cols, 10, 8);
  Vec state(residualFloats(p, x.size()), 0.0f);
  ASSERT_EQ(state.size(), x.size() + cols * 2 + 1);
  Vec sentSum(x.size(), 0.0f), gotSum(x.size(), 0.0f);
  for (int call = 0; call < 12; ++call) {
    const Vec before(state.begin(), state.begin() + static_cast<long>(x.size()));
    const Vec y = roundTrip(p, x, state.data());
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_NEAR(y[i] + state[i], x[i] + before[i], 1e-4f * maxAbs(x)) << "residual = input - output";
      sentSum[i] += x[i];
      gotSum[i] += y[i];
    }
    EXPECT_EQ(state.back(), 1.0f) << "warm start set";
  }
  // What was sent in total differs from what arrived by the last residual.
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(sentSum[i] - gotSum[i], state[i], 1e-3f * maxAbs(x));
}

// The state's Q starts the next call: encoding one matrix again and again (residual cleared
// each time) is subspace iteration, which approaches the best rank-r approximation.
TEST(LowRank, WarmStartsImproveTheApproximation) {
  const size_t rows = 60, cols = 50;
  const Params p = lowRank(3, rows, cols);
  const Vec x = ofRank(rows, cols, 12, 21);
  Vec state(residualFloats(p, x.size()), 0.0f);
  std::vector<float> errors;
  for (int call = 0; call < 10; ++call) {
    std::fill(state.begin(), state.begin() + static_cast<long>(x.size()), 0.0f);
    errors.push_back(frobenius(roundTrip(p, x, state.data()), x));
  }
  EXPECT_LT(errors.back(), errors.front() * 0.99f);
  for (size_t i = 1; i < errors.size(); ++i) EXPECT_LE(errors[i], errors[i - 1] * 1.0001f) << i;
  // Without a state every call starts from the seed's Q: the same bytes each time.
  EXPECT_EQ(roundTrip(p, x), roundTrip(p, x));
}

// The warm start without error feedback (a state of kind none: residualFeedback off): the
// state keeps Q only, so encoding one matrix again and again is subspace iteration on that
// matrix, step for step as the exported steps compute it, and the residual stays zero.
TEST(LowRank, WarmStartWithoutFeedbackIteratesOnTheInputAlone) {
  const size_t rows = 40, cols = 30;
  Params p = lowRank(3, rows, cols);
  p.residualFeedback = false;
  const Vec x = ofRank(rows, cols, 9, 4);
  Vec state(residualFloats(p, x.size()), 0.0f);
  Vec q(cols * 3), pm(rows * 3);
  lowrank::initialQ(p.seed, cols, 3, q.data());
  for (int call = 0; call < 4; ++call) {
    const Vec y = roundTrip(p, x, state.data());
    lowrank::project(x.data(), rows, cols, q.data(), 3, pm.data());
    lowrank::orthonormalize(pm.data(), rows, 3);
    lowrank::projectBack(x.data(), rows, cols, pm.data(), 3, q.data());
    Vec want(x.size());
    lowrank::expand(pm.data(), q.data(), cols, 3, x.size(), 1.0f, false, want.data());
    EXPECT_EQ(y, want) << "call " << call << ": one more power iteration from the last Q";
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(state[i], 0.0f) << "no residual kept";
    EXPECT_EQ(state.back(), 1.0f) << "warm start set";
  }
}

// Error feedback without the warm start (warmStart -1): every call starts from the seed's Q
// and encodes x + e: the same bytes as a state-less encode of x + e.
TEST(LowRank, FeedbackWithoutWarmStartStartsFromTheSeed) {
  const size_t rows = 40, cols = 30;
  Params p = lowRank(3, rows, cols);
  p.warmStart = false;
  const Vec x = ofRank(rows, cols, 9, 5);
  Vec state(residualFloats(p, x.size()), 0.0f);
  for (int call = 0; call < 3; ++call) {
    Vec withError(x);
    for (size_t i = 0; i < x.size(); ++i) withError[i] += state[i];
    const Vec y = roundTrip(p, x, state.data());
    EXPECT_EQ(y, roundTrip(p, withError)) << "call " << call;
  }
  cclCompression_t c = CCL_COMPRESSION_INITIALIZER;
  c.codec = cclCodecPowerSgd;
  EXPECT_TRUE(resolveParams(&c).warmStart) << "on by default";
  c.warmStart = 1;
  EXPECT_TRUE(resolveParams(&c).warmStart);
  c.warmStart = -1;
  EXPECT_FALSE(resolveParams(&c).warmStart);
  c.warmStart = 2;
  EXPECT_THROW(resolveParams(&c), Error);
}

TEST(LowRank, NarrowTypesAndNonFiniteInput) {
  const Vec m = ofRank(16, 16, 1, 2);
  std::vector<uint16_t> half(m.size());
  for (size_t i = 0; i < m.size(); ++i) half[i] = fp::floatToBf16(m[i]);
  const Params p = lowRank(2, 16, 16);
  std::vector<uint8_t> s(maxEncodedBytes(p, m.size()));
  s.resize(encode(p, half.data(), cclBfloat16, m.size(), s.data(), s.size()));
  Expect e;
  e.count = m.size();
  std::vector<uint16_t> back(m.size());
  decode(s.data(), s.size(), e, back.data(), cclBfloat16);
  for (size_t i = 0; i < m.size(); ++i) EXPECT_NEAR(fp::bf16ToFloat(back[i]), m[i], 0.02f * maxAbs(m) + 1e-6f);
  Vec bad = m;
  bad[7] = NAN;
  const Vec y = roundTrip(p, bad);
  EXPECT_TRUE(std::any_of(y.begin(), y.end(), [](float v) { return !std::isfinite(v); })) << "a NaN is not hidden";
}

// The plan runs the codec's three stages through codec::runStage (a kCodecStage step names
// only its number): each stage is the allreduce step it stands for, byte for byte, with its
// feedback state, and a codec or a stage that does not exist is an internal error.
TEST(LowRank, RunStageIsTheAllReduceStepsInOrder) {
  const size_t rows = 12, cols = 10, n = rows * cols;
  const Params p = lowRank(3, rows, cols);
  const LowRankShape s = lowRankShape(p, n);
  const Vec x = ofRank(rows, cols, 5, 3);
  Vec areaA(lowrank::workFloats(s)), areaB(areaA.size()), stateA(residualFloats(p, n)), stateB(stateA.size());
  Vec outA(n), outB(n);
  lowrank::allReduceStart(p, x.data(), cclFloat32, n, stateA.data(), areaA.data());
  runStage(p, 0, x.data(), areaB.data(), cclFloat32, n, 1.0f, stateB.data());
  EXPECT_EQ(areaA, areaB);
  lowrank::allReduceMiddle(p, n, stateA.data(), areaA.data());
  runStage(p, 1, nullptr, areaB.data(), cclFloat32, n, 1.0f, stateB.data());
  EXPECT_EQ(areaA, areaB);
  EXPECT_EQ(stateA, stateB);
  lowrank::allReduceFinish(p, n, 2.0f, stateA.data(), areaA.data(), outA.data(), cclFloat32);
  runStage(p, 2, areaB.data(), outB.data(), cclFloat32, n, 2.0f, stateB.data());
  EXPECT_EQ(outA, outB);
  EXPECT_EQ(stateA, stateB);
  auto internal = [&](const Params& q, int stage) {
    try {
      runStage(q, stage, x.data(), areaB.data(), cclFloat32, n, 1.0f, nullptr);
    } catch (const Error& e) {
      return e.code() == cclInternalError;
    }
    return false;
  };
  EXPECT_TRUE(internal(defaultParams(cclCodecInt8), 0)) << "a codec without stages";
  EXPECT_TRUE(internal(p, 3));
  EXPECT_TRUE(internal(p, -1));
}

TEST(LowRank, ShapesAndRanksAreChecked) {
  const Vec x(12, 1.0f);
  auto refused = [&](const Params& p) {
    try {
      roundTrip(p, x);
    } catch (const Error& e) {
      return e.code() == cclInvalidArgument;
    }
    return false;
  };
  EXPECT_TRUE(refused(lowRank(2, 5, 3))) << "5 x 3 is not 12";
  EXPECT_TRUE(refused(lowRank(2, 12, 0))) << "rows without cols";
  EXPECT_TRUE(refused(lowRank(0)));
  EXPECT_TRUE(refused(lowRank(kMaxLowRank + 1)));
  EXPECT_FALSE(refused(lowRank(2, 4, 3)));
  cclCompression_t z = CCL_COMPRESSION_INITIALIZER;
  z.codec = cclCodecPowerSgd;
  EXPECT_EQ(resolveParams(&z).rank, 4u) << "the table's default rank";
  z.rank = -1;
  EXPECT_THROW(resolveParams(&z), Error);
  // A caller built before the low-rank fields existed passes a shorter struct.
  z.rank = 7;
  z.size = offsetof(cclCompression_t, rank);
  EXPECT_EQ(resolveParams(&z).rank, 4u);
}

}  // namespace
}  // namespace ccl::codec::test
