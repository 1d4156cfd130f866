// SPDX-License-Identifier: BSD-3-Clause
// PowerSGD (codec powersgd) through the API: the allreduce of matrices whose sum has rank
// <= r is exact and identical on every rank, counted as one compressed call; with error
// feedback what arrives over many calls tracks what was sent; send/recv carries P and Q and
// keeps the sender's residual; its allreduce is a plan, so it runs inside a group too; where
// it cannot run it is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "ccl/ccl.h"
#include "dtype_ref.h"
#include "scoped_env.h"
#include "world.h"

namespace {

using Vec = std::vector<float>;
using ccltest::World;

const int kCompressAllSizes = setenv("CCL_CODEC_MIN_BYTES", "0", 1);

cclCompression_t powerSgd(int rank, size_t rows, size_t cols) {
  cclCompression_t z = CCL_COMPRESSION_INITIALIZER;
  z.codec = cclCodecPowerSgd;
  z.rank = rank;
  z.rows = rows;
  z.cols = cols;
  z.seed = 5;
  return z;
}

// rows x cols, rank 1: a b^T with a, b drawn from `seed`.
Vec rankOne(size_t rows, size_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  Vec a(rows), b(cols), m(rows * cols);
  for (float& v : a) v = d(rng);
  for (float& v : b) v = d(rng);
  for (size_t i = 0; i < rows; ++i)
    for (size_t j = 0; j < cols; ++j) m[i * cols + j] = a[i] * b[j];
  return m;
}

float maxAbs(const Vec& v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

// Each rank holds a rank-1 matrix: the sum over n <= r ranks has rank <= r.
TEST(LowRank, AllReduceOfLowRankSumsIsExact) {
  const size_t rows = 48, cols = 40, count = rows * cols;
  for (int n : {1, 2, 3, 4})
    for (cclRedOp_t op : {cclSum, cclAvg}) {
      const cclCompression_t z = powerSgd(4, rows, cols);
      std::vector<Vec> out(n, Vec(count));
      std::vector<cclOpStats_t> stats(n);
      World::get(n).run([&](int r, cclComm_t comm) {
        const Vec x = rankOne(rows, cols, 10 + r);
        cclStats_t before = CCL_STATS_INITIALIZER, after = CCL_STATS_INITIALIZER;
        ASSERT_CCL_OK(cclCommGetStats(comm, &before));
        ASSERT_CCL_OK(cclAllReduceEx(x.data(), out[r].data(), count, cclFloat, op, comm, nullptr, &z, nullptr));
        ASSERT_CCL_OK(cclCommGetStats(comm, &after));
        stats[r] = after.op[cclOpAllReduce];
        stats[r].calls -= before.op[cclOpAllReduce].calls;
        stats[r].compressedCalls -= before.op[cclOpAllReduce].compressedCalls;
        stats[r].rawBytes -= before.op[cclOpAllReduce].rawBytes;
        stats[r].wireBytes -= before.op[cclOpAllReduce].wireBytes;
      });
      Vec want(count, 0.0f);
      for (int r = 0; r < n; ++r) {
        const Vec x = rankOne(rows, cols, 10 + r);
        for (size_t i = 0; i < count; ++i) want[i] += op == cclAvg ? x[i] / n : x[i];
      }
      for (size_t i = 0; i < count; ++i) {
        ASSERT_NEAR(out[0][i], want[i], 1e-4f * maxAbs(want)) << "n " << n << " element " << i;
        for (int r = 1; r < n; ++r) ASSERT_EQ(out[r][i], out[0][i]) << "every rank gets the same bits";
      }
      EXPECT_EQ(stats[0].calls, 1u) << "one call, not the two small allreduces";
      EXPECT_EQ(stats[0].compressedCalls, 1u);
      // (48 + 40) x 4 values instead of 48 x 40; the small allreduces move them less evenly
      // than the ring the raw bytes are counted with.
      if (n > 1) {
        EXPECT_LT(stats[0].wireBytes * 2, stats[0].rawBytes);
      }
    }
}

// A full-rank stream of matrices with error feedback: the running sum of the outputs tracks
// the running sum of the ranks' inputs (the difference is the ranks' residuals), and every
// The call's data in 16-bit floats: the factors are still fp32, summed as fp32 by the rings
// (they were summed as if they were bf16 or fp16 values, which gave garbage on 2 ranks or
// more), and the result is the fp32 sum rounded once to the call's type.
TEST(LowRank, AllReduceOfSixteenBitFloatsSumsTheFactorsInFp32) {
  const size_t rows = 48, cols = 40, count = rows * cols;
  for (cclDataType_t type : {cclBfloat16, cclFloat16})
    for (int n : {2, 3}) {
      const cclCompression_t z = powerSgd(4, rows, cols);
      std::vector<std::vector<uint16_t>> in(n, std::vector<uint16_t>(count)), out(n, std::vector<uint16_t>(count));
      std::vector<double> want(count, 0.0);
      for (int r = 0; r < n; ++r) {
        const Vec x = rankOne(rows, cols, 10 + r);
        for (size_t i = 0; i < count; ++i) {
          in[r][i] = static_cast<uint16_t>(ccltest::encodeFloat(type, x[i]));
          want[i] += ccltest::decodeFloat(type, in[r][i]);
        }
      }
      World::get(n).run([&](int r, cclComm_t comm) {
        ASSERT_CCL_OK(cclAllReduceEx(in[r].data(), out[r].data(), count, type, cclSum, comm, nullptr, &z, nullptr));
      });
      double scale = 0;
      for (double w : want) scale = std::max(scale, std::fabs(w));
      // A sum of rank <= r is exact in fp32 up to rounding; then one rounding to 8 (bf16) or
      // 11 (fp16) significant bits, and the inputs' own roundings break the rank a little.
      const double tol = (type == cclBfloat16 ? 0x1p-6 : 0x1p-9) * scale;
      for (size_t i = 0; i < count; ++i) {
        ASSERT_NEAR(ccltest::decodeFloat(type, out[0][i]), want[i], tol)
            << ccltest::dtypeInfo(type).name << ", n " << n << ", element " << i;
        for (int r = 1; r < n; ++r) ASSERT_EQ(out[r][i], out[0][i]) << "every rank gets the same bits";
      }
    }
}

// call agrees on all ranks (the warm-start Q stays shared).
TEST(LowRank, FeedbackTracksTheSumOverCalls) {
  const int n = 3, calls = 30;
  const size_t rows = 24, cols = 20, count = rows * cols;
  const cclCompression_t z = powerSgd(2, rows, cols);
  std::vector<Vec> sums(n, Vec(count, 0.0f));
  Vec sent(count, 0.0f);
  World::get(n).run([&](int r, cclComm_t comm) {
    cclFeedback_t fb = nullptr;
    ASSERT_CCL_OK(cclFeedbackCreate(&fb, cclFeedbackResidual, 0.0f, 0));
    std::mt19937 rng(3 + r);
    std::normal_distribution<float> d;
    Vec x(count), y(count);
    for (int t = 0; t < calls; ++t) {
      for (float& v : x) v = d(rng);
      ASSERT_CCL_OK(cclAllReduceEx(x.data(), y.data(), count, cclFloat, cclSum, comm, nullptr, &z, fb));
      for (size_t i = 0; i < count; ++i) sums[r][i] += y[i];
    }
    cclFeedbackDestroy(fb);
  });
  for (int r = 0; r < n; ++r) {
    std::mt19937 rng(3 + r);
    std::normal_distribution<float> d;
    for (int t = 0; t < calls; ++t)
      for (size_t i = 0; i < count; ++i) sent[i] += d(rng);
  }
  EXPECT_EQ(sums[1], sums[0]);
  EXPECT_EQ(sums[2], sums[0]);
  // Without feedback a rank-2 approximation of 3 x 30 random 24 x 20 matrices would lose most
  // of them; with it, what is missing is one step's residual per rank.
  double missing = 0, total = 0;
  for (size_t i = 0; i < count; ++i) {
    missing += double(sent[i] - sums[0][i]) * (sent[i] - sums[0][i]);
    total += double(sent[i]) * sent[i];
  }
  EXPECT_LT(std::sqrt(missing), 0.5 * std::sqrt(total));
}

// The warm start is independent of error feedback (ccl.h): a feedback handle of kind none
// keeps only the warm start, so allreducing one full-rank sum again and again is subspace
// iteration on it (the error shrinks, every rank agreeing), while warmStart -1 starts every
// call from the seed (the same bits every call), and no handle does the same.
TEST(LowRank, WarmStartWithoutErrorFeedback) {
  const int n = 2, calls = 6;
  const size_t rows = 30, cols = 24, count = rows * cols;
  for (int warm : {0, -1}) {
    cclCompression_t z = powerSgd(2, rows, cols);
    z.warmStart = warm;
    std::vector<std::vector<Vec>> outs(n, std::vector<Vec>(calls, Vec(count)));
    World::get(n).run([&](int r, cclComm_t comm) {
      cclFeedback_t fb = nullptr;
      ASSERT_CCL_OK(cclFeedbackCreate(&fb, cclFeedbackNone, 0.0f, 0));
      Vec x(count);
      std::mt19937 rng(40 + r);
      std::normal_distribution<float> d;
      for (float& v : x) v = d(rng);
      for (int t = 0; t < calls; ++t)
        ASSERT_CCL_OK(cclAllReduceEx(x.data(), outs[r][t].data(), count, cclFloat, cclSum, comm, nullptr, &z, fb));
      cclFeedbackDestroy(fb);
    });
    Vec sum(count, 0.0f);
    for (int r = 0; r < n; ++r) {
      std::mt19937 rng(40 + r);
      std::normal_distribution<float> d;
      for (size_t i = 0; i < count; ++i) sum[i] += d(rng);
    }
    auto error = [&](const Vec& y) {
      double e = 0;
      for (size_t i = 0; i < count; ++i) e += double(y[i] - sum[i]) * (y[i] - sum[i]);
      return std::sqrt(e);
    };
    for (int t = 0; t < calls; ++t) ASSERT_EQ(outs[1][t], outs[0][t]) << "every rank agrees, call " << t;
    if (warm == 0) {
      EXPECT_LT(error(outs[0][calls - 1]), 0.98 * error(outs[0][0])) << "the warm start iterates";
      for (int t = 1; t < calls; ++t)
        EXPECT_LE(error(outs[0][t]), error(outs[0][t - 1]) * 1.0001) << "no residual re-sent, call " << t;
    } else {
      for (int t = 1; t < calls; ++t) EXPECT_EQ(outs[0][t], outs[0][0]) << "from the seed every call";
    }
  }
}

// cclFeedbackErrorNorm: the norm of the error a state keeps. For powersgd the result P Q^T
// and the kept error are orthogonal parts of what was encoded (x plus the previous error):
// ||y||^2 + ||e_new||^2 = ||x + e_old||^2, the identity Optimus-CC's captured energy rests
// on. A state of kind none, and one before its first call, keep no error; LoCo's after a
// reset neither.
TEST(LowRank, TheErrorNormOfAFeedbackState) {
  const size_t rows = 24, cols = 20, count = rows * cols;
  const cclCompression_t z = powerSgd(2, rows, cols);
  double norms[2] = {-1, -1};
  std::vector<double> encoded, arrived, kept;
  World::get(2).run([&](int r, cclComm_t comm) {
    cclFeedback_t fb = nullptr, none = nullptr;
    ASSERT_CCL_OK(cclFeedbackCreate(&fb, cclFeedbackResidual, 0.0f, 0));
    ASSERT_CCL_OK(cclFeedbackCreate(&none, cclFeedbackNone, 0.0f, 0));
    if (r == 0) ASSERT_CCL_OK(cclFeedbackErrorNorm(fb, &norms[0]));
    std::mt19937 rng(12);
    std::normal_distribution<float> d;
    Vec x(count), got(count);
    double previous = 0;
    for (int t = 0; t < 4; ++t) {
      for (float& v : x) v = d(rng);
      if (r == 0) {
        ASSERT_CCL_OK(cclSendEx(x.data(), count, cclFloat, 1, comm, nullptr, &z, fb));
        ASSERT_CCL_OK(cclSendEx(x.data(), count, cclFloat, 1, comm, nullptr, &z, none));
        double e = 0;
        ASSERT_CCL_OK(cclFeedbackErrorNorm(fb, &e));
        kept.push_back(e);
        double xx = 0;
        for (float v : x) xx += double(v) * v;
        // ||x + e_old||^2 needs <x, e_old>, unknown here: the first call has e_old = 0.
        encoded.push_back(t == 0 ? std::sqrt(xx) : previous);
        previous = e;
      } else {
        ASSERT_CCL_OK(cclRecvEx(got.data(), count, cclFloat, 0, comm, nullptr, &z));
        double yy = 0;
        for (float v : got) yy += double(v) * v;
        arrived.push_back(std::sqrt(yy));
        ASSERT_CCL_OK(cclRecvEx(got.data(), count, cclFloat, 0, comm, nullptr, &z));
      }
    }
    if (r == 0) ASSERT_CCL_OK(cclFeedbackErrorNorm(none, &norms[1]));
    cclFeedbackDestroy(fb);
    cclFeedbackDestroy(none);
  });
  EXPECT_EQ(norms[0], 0.0) << "before the first call";
  EXPECT_EQ(norms[1], 0.0) << "kind none keeps no error";
  ASSERT_EQ(kept.size(), 4u);
  EXPECT_GT(kept[0], 0.1 * encoded[0]) << "a rank-2 approximation of a full-rank matrix loses much";
  EXPECT_NEAR(arrived[0] * arrived[0] + kept[0] * kept[0], encoded[0] * encoded[0], 1e-4 * encoded[0] * encoded[0])
      << "P Q^T and the error are orthogonal";
  for (int t = 1; t < 4; ++t) EXPECT_GT(kept[t], 0.0);
  // After an int4 allreduce a residual state keeps its error, LoCo's too; LoCo's with a
  // reset every call keeps nothing. NULL pointers are refused.
  cclCompression_t int4 = CCL_COMPRESSION_INITIALIZER;
  int4.codec = cclCodecInt4;
  double after[2][3];
  World::get(2).run([&](int r, cclComm_t comm) {
    Vec x(1024, 0.3f + 0.1f * r), y(1024);
    x[0] = 1.0f;
    const struct {
      cclFeedbackKind_t kind;
      int reset;
    } kinds[3] = {{cclFeedbackResidual, 0}, {cclFeedbackLoco, 0}, {cclFeedbackLoco, 1}};
    for (int k = 0; k < 3; ++k) {
      cclFeedback_t fb = nullptr;
      ASSERT_CCL_OK(cclFeedbackCreate(&fb, kinds[k].kind, 0.5f, kinds[k].reset));
      ASSERT_CCL_OK(cclAllReduceEx(x.data(), y.data(), x.size(), cclFloat, cclSum, comm, nullptr, &int4, fb));
      ASSERT_CCL_OK(cclFeedbackErrorNorm(fb, &after[r][k]));
      cclFeedbackDestroy(fb);
    }
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_GT(after[r][0], 0.0) << "int4's error on 0.3 in blocks scaled by 1";
    EXPECT_GT(after[r][1], 0.0) << "LoCo's average of it";
    EXPECT_EQ(after[r][2], 0.0) << "LoCo reset after every call";
  }
  double e = -1;
  EXPECT_EQ(cclFeedbackErrorNorm(nullptr, &e), cclInvalidArgument);
  cclFeedback_t fb = nullptr;
  ASSERT_CCL_OK(cclFeedbackCreate(&fb, cclFeedbackResidual, 0.0f, 0));
  EXPECT_EQ(cclFeedbackErrorNorm(fb, nullptr), cclInvalidArgument);
  cclFeedbackDestroy(fb);
}

TEST(LowRank, SendRecvCarriesPAndQWithTheSendersFeedback) {
  const size_t rows = 30, cols = 16, count = rows * cols;
  const cclCompression_t z = powerSgd(2, rows, cols);
  Vec got(count), sentSum(count, 0.0f), gotSum(count, 0.0f);
  cclStats_t before = CCL_STATS_INITIALIZER, stats = CCL_STATS_INITIALIZER;
  World::get(2).run([&](int r, cclComm_t comm) {
    if (r == 0) ASSERT_CCL_OK(cclCommGetStats(comm, &before));  // earlier tests' calls on this communicator
    // A rank-2 matrix first: it arrives exactly.
    Vec x = rankOne(rows, cols, 1);
    const Vec y = rankOne(rows, cols, 2);
    for (size_t i = 0; i < count; ++i) x[i] += y[i];
    if (r == 0)
      ASSERT_CCL_OK(cclSendEx(x.data(), count, cclFloat, 1, comm, nullptr, &z, nullptr));
    else
      ASSERT_CCL_OK(cclRecvEx(got.data(), count, cclFloat, 0, comm, nullptr, &z));
    if (r == 1) {
      for (size_t i = 0; i < count; ++i) ASSERT_NEAR(got[i], x[i], 1e-4f * maxAbs(x));
    }
    // Then full-rank matrices, the sender keeping its residual.
    cclFeedback_t fb = nullptr;
    ASSERT_CCL_OK(cclFeedbackCreate(&fb, cclFeedbackResidual, 0.0f, 0));
    std::mt19937 rng(9);
    std::normal_distribution<float> d;
    for (int t = 0; t < 20; ++t) {
      for (float& v : x) v = d(rng);
      if (r == 0) {
        ASSERT_CCL_OK(cclSendEx(x.data(), count, cclFloat, 1, comm, nullptr, &z, fb));
        for (size_t i = 0; i < count; ++i) sentSum[i] += x[i];
      } else {
        ASSERT_CCL_OK(cclRecvEx(got.data(), count, cclFloat, 0, comm, nullptr, &z));
        for (size_t i = 0; i < count; ++i) gotSum[i] += got[i];
      }
    }
    if (r == 0) ASSERT_CCL_OK(cclCommGetStats(comm, &stats));
    cclFeedbackDestroy(fb);
  });
  double missing = 0, total = 0;
  for (size_t i = 0; i < count; ++i) {
    missing += double(sentSum[i] - gotSum[i]) * (sentSum[i] - gotSum[i]);
    total += double(sentSum[i]) * sentSum[i];
  }
  EXPECT_LT(std::sqrt(missing), 0.5 * std::sqrt(total)) << "the residual carried the rest";
  const cclOpStats_t &s = stats.op[cclOpSend], &b = before.op[cclOpSend];
  EXPECT_EQ(s.compressedCalls - b.compressedCalls, 21u);
  EXPECT_LT((s.wireBytes - b.wireBytes) * 3, s.rawBytes - b.rawBytes);
}

// Lazy error propagation, exactly: x1 of rank r + 1 loses one direction (its error has rank
// 1 <= r), so sending zeros next delivers exactly that error: y2 = x1 - y1.
TEST(LowRank, SendFeedbackCarriesThePreviousErrorIntoTheNextSend) {
  const size_t rows = 40, cols = 24, count = rows * cols;
  const int r = 2;
  const cclCompression_t z = powerSgd(r, rows, cols);
  Vec x1(count, 0.0f);
  for (uint32_t k = 0; k < r + 1; ++k) {
    const Vec one = rankOne(rows, cols, 50 + k);
    for (size_t i = 0; i < count; ++i) x1[i] += one[i];
  }
  Vec y1(count), y2(count);
  World::get(2).run([&](int rank, cclComm_t comm) {
    cclFeedback_t fb = nullptr;
    ASSERT_CCL_OK(cclFeedbackCreate(&fb, cclFeedbackResidual, 0.0f, 0));
    const Vec zeros(count, 0.0f);
    if (rank == 0) {
      ASSERT_CCL_OK(cclSendEx(x1.data(), count, cclFloat, 1, comm, nullptr, &z, fb));
      ASSERT_CCL_OK(cclSendEx(zeros.data(), count, cclFloat, 1, comm, nullptr, &z, fb));
    } else {
      ASSERT_CCL_OK(cclRecvEx(y1.data(), count, cclFloat, 0, comm, nullptr, &z));
      ASSERT_CCL_OK(cclRecvEx(y2.data(), count, cclFloat, 0, comm, nullptr, &z));
    }
    cclFeedbackDestroy(fb);
  });
  float lost = 0;
  for (size_t i = 0; i < count; ++i) lost = std::max(lost, std::fabs(x1[i] - y1[i]));
  ASSERT_GT(lost, 0.05f * maxAbs(x1)) << "rank 2 of a rank-3 matrix loses something";
  for (size_t i = 0; i < count; ++i) ASSERT_NEAR(y2[i], x1[i] - y1[i], 1e-4f * maxAbs(x1)) << i;
}

// The allreduce is a plan like any other: inside a group, next to an uncompressed call, it
// gives the bits it gives alone, with feedback state carried alike.
TEST(LowRank, AllReduceInAGroupGivesTheBitsItGivesAlone) {
  const size_t rows = 32, cols = 24, count = rows * cols;
  const cclCompression_t shared = powerSgd(2, rows, cols);
  World::get(3).run([&](int r, cclComm_t comm) {
    cclCompression_t z = shared;
    const Vec x = rankOne(rows, cols, 20 + r);
    Vec alone(count), grouped(count), y{1.0f + r}, ysum(1);
    cclFeedback_t f1 = nullptr, f2 = nullptr;
    ASSERT_CCL_OK(cclFeedbackCreate(&f1, cclFeedbackResidual, 0.0f, 0));
    ASSERT_CCL_OK(cclFeedbackCreate(&f2, cclFeedbackResidual, 0.0f, 0));
    for (int call = 0; call < 2; ++call) {
      ASSERT_CCL_OK(cclAllReduceEx(x.data(), alone.data(), count, cclFloat, cclSum, comm, nullptr, &z, f1));
      ASSERT_CCL_OK(cclGroupStart());
      ASSERT_CCL_OK(cclAllReduceEx(x.data(), grouped.data(), count, cclFloat, cclSum, comm, nullptr, &z, f2));
      ASSERT_CCL_OK(cclAllReduce(y.data(), ysum.data(), 1, cclFloat, cclSum, comm, nullptr));
      ASSERT_CCL_OK(cclGroupEnd());
      EXPECT_EQ(alone, grouped) << "call " << call;
      EXPECT_EQ(ysum[0], 6.0f);
    }
    cclFeedbackDestroy(f1);
    cclFeedbackDestroy(f2);
  });
}

TEST(LowRank, RefusedWhereItCannotRun) {
  const size_t count = 64;
  const cclCompression_t shared = powerSgd(2, 8, 8);
  World::get(2).run([&](int, cclComm_t comm) {
    cclCompression_t z = shared;  // each rank edits its own copy below
    Vec x(count, 1.0f), y(2 * count);
    EXPECT_EQ(cclReduceScatterEx(y.data(), x.data(), count, cclFloat, cclSum, comm, nullptr, &z, nullptr),
              cclInvalidArgument);
    EXPECT_EQ(cclAllGatherEx(x.data(), y.data(), count, cclFloat, comm, nullptr, &z, nullptr), cclInvalidArgument);
    cclFeedback_t loco = nullptr;
    ASSERT_CCL_OK(cclFeedbackCreate(&loco, cclFeedbackLoco, 0.5f, 0));
    EXPECT_EQ(cclAllReduceEx(x.data(), x.data(), count, cclFloat, cclSum, comm, nullptr, &z, loco), cclInvalidArgument);
    cclFeedbackDestroy(loco);
    z.rows = 7;  // 7 x 8 is not 64
    EXPECT_EQ(cclAllReduceEx(x.data(), x.data(), count, cclFloat, cclSum, comm, nullptr, &z, nullptr),
              cclInvalidArgument);
    z.rows = 8;
    // The communicator still works.
    EXPECT_CCL_OK(cclAllReduceEx(x.data(), x.data(), count, cclFloat, cclSum, comm, nullptr, &z, nullptr));
  });
}

// The same shape error below CCL_CODEC_MIN_BYTES, where the call goes uncompressed: refused
// all the same (it used to pass, and the same call of a larger count to fail).
TEST(LowRank, AShapeThatIsNotTheCountIsRefusedAtEverySize) {
  ccltest::ScopedEnv floor("CCL_CODEC_MIN_BYTES", "64K");
  World w(2);
  ASSERT_TRUE(w.ready());
  w.run([&](int r, cclComm_t comm) {
    const size_t count = 64;
    cclCompression_t z = powerSgd(2, 7, 8);  // 7 x 8 is not 64
    Vec x(count, 1.0f), y(count);
    EXPECT_EQ(cclAllReduceEx(x.data(), y.data(), count, cclFloat, cclSum, comm, nullptr, &z, nullptr),
              cclInvalidArgument);
    EXPECT_EQ(r == 0 ? cclSendEx(x.data(), count, cclFloat, 1, comm, nullptr, &z, nullptr)
                     : cclRecvEx(y.data(), count, cclFloat, 0, comm, nullptr, &z),
              cclInvalidArgument);
    z.rows = 8;
    EXPECT_CCL_OK(cclAllReduceEx(x.data(), y.data(), count, cclFloat, cclSum, comm, nullptr, &z, nullptr));
    EXPECT_EQ(y[0], 2.0f);
  });
}

}  // namespace
