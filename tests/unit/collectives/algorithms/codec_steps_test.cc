// SPDX-License-Identifier: BSD-3-Clause
// Compressed plans over the in-process transport: every rank gets the same bits, errors stay
// within the codec's bound composed over the algorithm, lossless settings are exact, and
// error feedback makes repeated calls converge to the exact mean.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "collectives/algorithms/algorithms.h"
#include "plan_runner.h"
#include "shard.h"

namespace ccl::coll {
namespace {

using Vec = std::vector<float>;

std::vector<Vec> gaussian(int n, size_t count, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<Vec> v(n, Vec(count));
  for (auto& x : v)
    for (auto& e : x) e = dist(rng);
  return v;
}

CollArgs args(int n, int r, size_t count, cclCodec_t c, Algo algo, size_t chunkBytes = 1 << 18) {
  CollArgs a;
  a.rank = r;
  a.nranks = n;
  a.count = count;
  a.dtype = cclFloat32;
  a.op = cclSum;
  a.chunkBytes = chunkBytes;
  a.algo = algo;
  a.codec = codec::defaultParams(c);
  return a;
}

// Runs an allreduce plan on every rank; returns each rank's output.
std::vector<Vec> allReduce(const std::vector<Vec>& in, const std::function<CollArgs(int)>& argsOf, bool inPlace,
                           std::vector<Vec>* feedback = nullptr, uint64_t callSeed = 0) {
  const int n = static_cast<int>(in.size());
  std::vector<Vec> out = in;  // in place works on a copy of the input
  if (!inPlace)
    for (auto& o : out) std::fill(o.begin(), o.end(), -12345.0f);
  testing::runPlans(
      n, [&](int r) { return planAllReduce(argsOf(r)); },
      [&](int r) {
        return testing::RankBuffers{inPlace ? static_cast<const void*>(out[r].data()) : in[r].data(), out[r].data(),
                                    feedback ? (*feedback)[r].data() : nullptr};
      },
      callSeed);
  return out;
}

void expectSameOnAllRanks(const std::vector<Vec>& out) {
  for (size_t r = 1; r < out.size(); ++r)
    ASSERT_EQ(0, std::memcmp(out[0].data(), out[r].data(), out[0].size() * sizeof(float))) << "rank " << r;
}

double relRms(const Vec& got, const Vec& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (got[i] - want[i]) * double(got[i] - want[i]);
    den += want[i] * double(want[i]);
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

Vec exactSum(const std::vector<Vec>& in) {
  Vec s(in[0].size(), 0.0f);
  for (const auto& x : in)
    for (size_t i = 0; i < s.size(); ++i) s[i] += x[i];
  return s;
}

float maxAbs(const std::vector<Vec>& in) {
  float m = 0;
  for (const auto& x : in)
    for (float e : x) m = std::max(m, std::fabs(e));
  return m;
}

struct QCase {
  cclCodec_t codec;
  Algo algo;
  int n;
  size_t count;
  size_t chunkBytes;
  bool inPlace;
};

class CompressedAllReduce : public ::testing::TestWithParam<QCase> {};

// Per-element bound of the compressed allreduce of `in`, from the codecs' one bound
// (codec::errorBound) composed over the algorithm; 1e-5 covers the plans' fp32 sums.
std::vector<double> allReduceBound(const std::vector<Vec>& in, cclCodec_t c, Algo algo) {
  const codec::Params p = codec::defaultParams(c);
  const size_t count = in[0].size();
  const double m = maxAbs(in);
  std::vector<double> sumAbs(count, 0.0), bound(count);
  for (const auto& x : in)
    for (size_t i = 0; i < count; ++i) sumAbs[i] += std::fabs(x[i]);
  const double maxSumAbs = *std::max_element(sumAbs.begin(), sumAbs.end());
  const int n = static_cast<int>(in.size());
  if (n == 1 || algo == Algo::kRing) {
    // Every hop re-quantizes a partial sum, then the sum once more: n round trips.
    for (size_t i = 0; i < count; ++i) bound[i] = codec::errorBound(p, sumAbs[i], maxSumAbs, n) + 1e-5;
    return bound;
  }
  // Two-shot: each input is quantized once in its own block (an owner's own shard is not,
  // which the sum over every rank covers), then the sum once.
  std::vector<double> first(count, 0.0);
  for (const auto& x : in)
    for (size_t i = 0; i < count; ++i) first[i] += codec::errorBound(p, std::fabs(x[i]), m, 1);
  const double maxFirst = *std::max_element(first.begin(), first.end());
  for (size_t i = 0; i < count; ++i)
    bound[i] = first[i] + codec::errorBound(p, sumAbs[i] + first[i], maxSumAbs + maxFirst, 1) + 1e-5;
  return bound;
}

TEST_P(CompressedAllReduce, BoundAndAgreement) {
  const QCase c = GetParam();
  auto in = gaussian(c.n, c.count, 1234 + c.n);
  auto out = allReduce(
      in, [&](int r) { return args(c.n, r, c.count, c.codec, c.algo, c.chunkBytes); }, c.inPlace);
  expectSameOnAllRanks(out);
  const Vec want = exactSum(in);
  const std::vector<double> bound = allReduceBound(in, c.codec, c.algo);
  for (size_t i = 0; i < c.count; ++i) ASSERT_LE(std::fabs(out[0][i] - want[i]), bound[i]) << "element " << i;
}

std::vector<QCase> qcases() {
  std::vector<QCase> v;
  // Every quantizer of the codec table.
  for (int code = 0; code < cclNumCodecs; ++code)
    if (const auto codec = static_cast<cclCodec_t>(code); codec::isQuantizer(code))
      for (Algo algo : {Algo::kTwoShot, Algo::kRing})
        for (int n : {1, 2, 3, 4, 7, 8})
          for (size_t count : {size_t{1}, size_t{7}, size_t{1000}, size_t{4099}})
            v.push_back({codec, algo, n, count, 1 << 18, count == 1000});
  // Small chunks: many pipelined streams per shard, in and out of place.
  for (Algo algo : {Algo::kTwoShot, Algo::kRing})
    for (bool inPlace : {false, true}) v.push_back({cclCodecInt8, algo, 5, 100003, 4096, inPlace});
  return v;
}

std::string qname(const ::testing::TestParamInfo<QCase>& i) {
  const QCase& c = i.param;
  return std::string(cclCodecName(c.codec)) + "_" + algoName(c.algo) + "_n" + std::to_string(c.n) + "_count" +
         std::to_string(c.count) + "_chunk" + std::to_string(c.chunkBytes) + (c.inPlace ? "_inplace" : "");
}

INSTANTIATE_TEST_SUITE_P(Codecs, CompressedAllReduce, ::testing::ValuesIn(ccltest::Shard::fromEnv().of(qcases())),
                         qname);

// Keeping every element makes a sparsifier lossless: the sum in rank order is exact.
TEST(CompressedSparse, LosslessSettingsMatchRankOrderSum) {
  for (cclCodec_t codec : {cclCodecTopK, cclCodecThreshold})
    for (int n : {1, 2, 3, 6}) {
      const size_t count = 3001;
      auto in = gaussian(n, count, 77);
      auto out = allReduce(
          in,
          [&](int r) {
            CollArgs a = args(n, r, count, codec, Algo::kAuto);
            a.codec.keepRatio = 1.0;
            a.codec.threshold = 0.0f;
            return a;
          },
          false);
      expectSameOnAllRanks(out);
      Vec want = exactSum(in);  // rank order, as the plan adds
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(out[0][i], want[i]) << cclCodecName(codec) << " n " << n;
    }
}

TEST(CompressedSparse, TopKKeepsLargestAndAgrees) {
  const int n = 4;
  const size_t count = 10000;
  auto in = gaussian(n, count, 5);
  auto out = allReduce(
      in,
      [&](int r) {
        CollArgs a = args(n, r, count, cclCodecTopK, Algo::kAuto);
        a.codec.keepRatio = 0.01;
        return a;
      },
      false);
  expectSameOnAllRanks(out);
  size_t nonzero = std::count_if(out[0].begin(), out[0].end(), [](float x) { return x != 0.0f; });
  EXPECT_LE(nonzero, size_t{n} * 100);
  EXPECT_GT(nonzero, 0u);
}

// Random-k through the values ring: every rank keeps the same positions, so the result is
// the exact sum there (up to fp32 rounding of a different summation order) and 0 elsewhere,
// the same positions as the sparse allgather, and identical on every rank.
TEST(CompressedSparse, RandKRingMatchesSparseAllGather) {
  const size_t count = 100003;
  for (int n : {2, 3, 5, 8})
    for (bool inPlace : {false, true}) {
      auto in = gaussian(n, count, 31 + n);
      auto argsFor = [&](Algo algo) {
        return [&, algo](int r) {
          CollArgs a = args(n, r, count, cclCodecRandK, algo, 4096);
          a.codec.keepRatio = 0.2;  // 80 KB of values: above treeMaxBytes, so auto picks the ring
          return a;
        };
      };
      ASSERT_EQ(chooseAlgorithm(Coll::kAllReduce, argsFor(Algo::kAuto)(0)).algo, Algo::kRing);
      auto ring = allReduce(in, argsFor(Algo::kRing), inPlace, nullptr, 7);
      auto sparse = allReduce(in, argsFor(Algo::kSparse), inPlace, nullptr, 7);
      expectSameOnAllRanks(ring);
      const Vec want = exactSum(in);
      const double tol = 1e-6 * n * maxAbs(in);
      size_t kept = 0;
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(ring[0][i] != 0.0f, sparse[0][i] != 0.0f) << "position " << i << " n " << n;
        if (sparse[0][i] == 0.0f) continue;
        ++kept;
        ASSERT_NEAR(ring[0][i], want[i], tol) << "position " << i << " n " << n;
      }
      EXPECT_EQ(kept, codec::keptCount(argsFor(Algo::kRing)(0).codec, count)) << "n " << n;
    }
}

// Relative RMS error of two-shot int8 on Gaussian data stays under 1% and does not grow
// with the rank count; the ring's is recorded beside it for comparison.
TEST(CompressedAccuracy, TwoShotInt8IsFlatInRankCount) {
  const size_t count = 1 << 16;
  double prev = 0;
  for (int n : {2, 4, 8}) {
    auto in = gaussian(n, count, 99);
    Vec want = exactSum(in);
    double two = relRms(allReduce(
                            in, [&](int r) { return args(n, r, count, cclCodecInt8, Algo::kTwoShot); }, false)[0],
                        want);
    double ring = relRms(allReduce(
                             in, [&](int r) { return args(n, r, count, cclCodecInt8, Algo::kRing); }, false)[0],
                         want);
    RecordProperty("two_shot_int8_rel_rms_n" + std::to_string(n), std::to_string(two));
    RecordProperty("ring_int8_rel_rms_n" + std::to_string(n), std::to_string(ring));
    std::printf("n=%d two-shot int8 rel RMS %.5f, ring %.5f\n", n, two, ring);
    EXPECT_LT(two, 0.01);
    if (prev > 0) {
      EXPECT_LT(two, prev * 1.5) << "two-shot error grew with the rank count";
    }
    prev = two;
  }
}

// A constant input allreduced T times with int4 and error feedback: what each call loses
// is carried to the next, so the mean of the outputs converges to the exact sum.
TEST(CompressedFeedback, Int4MeanConvergesToExactSum) {
  const int n = 4;
  const size_t count = 4099;
  auto in = gaussian(n, count, 2024);
  Vec want = exactSum(in);
  CollArgs proto = args(n, 0, count, cclCodecInt4, Algo::kTwoShot);
  proto.feedback = true;
  std::vector<Vec> residual(n, Vec(feedbackFloats(Coll::kAllReduce, proto), 0.0f));
  Vec mean(count, 0.0f);
  double firstErr = 0;
  const int T = 64;
  for (int t = 0; t < T; ++t) {
    auto out = allReduce(
        in,
        [&](int r) {
          CollArgs a = proto;
          a.rank = r;
          return a;
        },
        false, &residual, t);
    if (t == 0) firstErr = relRms(out[0], want);
    for (size_t i = 0; i < count; ++i) mean[i] += out[0][i] / T;
  }
  double meanErr = relRms(mean, want);
  std::printf("int4 feedback: one call rel RMS %.5f, mean of %d calls %.5f\n", firstErr, T, meanErr);
  EXPECT_LT(meanErr, firstErr / 10);
}

TEST(CompressedOthers, AllGatherBroadcastAlltoAllReduceScatterSendRecv) {
  const int n = 5;
  const size_t count = 2053;
  auto in = gaussian(n, count * n, 31);
  const double m = maxAbs(in);
  const double tol = codec::errorBound(codec::defaultParams(cclCodecInt8), m, m, 1);
  auto a = [&](int r) { return args(n, r, count, cclCodecInt8, Algo::kAuto, 4096); };

  std::vector<Vec> out(n, Vec(count * n));
  testing::runPlans(
      n, [&](int r) { return planAllGather(a(r)); },
      [&](int r) {
        return testing::RankBuffers{in[r].data(), out[r].data()};
      });
  expectSameOnAllRanks(out);
  for (int k = 0; k < n; ++k)
    for (size_t i = 0; i < count; ++i) ASSERT_NEAR(out[0][k * count + i], in[k][i], tol) << "allgather";

  for (auto& o : out) std::fill(o.begin(), o.end(), 0.0f);
  testing::runPlans(
      n,
      [&](int r) {
        auto x = a(r);
        x.root = 2;
        return planBroadcast(x);
      },
      [&](int r) {
        return testing::RankBuffers{in[r].data(), out[r].data()};
      });
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) ASSERT_NEAR(out[r][i], in[2][i], tol) << "broadcast";

  testing::runPlans(
      n, [&](int r) { return planAlltoAll(a(r)); },
      [&](int r) {
        return testing::RankBuffers{in[r].data(), out[r].data()};
      });
  for (int r = 0; r < n; ++r)
    for (int k = 0; k < n; ++k)
      for (size_t i = 0; i < count; ++i) ASSERT_NEAR(out[r][k * count + i], in[k][r * count + i], tol) << "alltoall";

  testing::runPlans(
      n, [&](int r) { return planReduceScatter(a(r)); },
      [&](int r) {
        return testing::RankBuffers{in[r].data(), out[r].data()};
      });
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) {
      float want = 0;
      for (int k = 0; k < n; ++k) want += in[k][r * count + i];
      ASSERT_NEAR(out[r][i], want, tol * n * 2) << "reduce-scatter";
    }

  testing::runPlans(
      2, [&](int r) { return r == 0 ? planCompressedSend(a(0), 1, 0) : planCompressedRecv(a(1), 0, 0); },
      [&](int r) {
        return testing::RankBuffers{in[r].data(), out[r].data()};
      });
  for (size_t i = 0; i < count; ++i) ASSERT_NEAR(out[1][i], in[0][i], tol) << "send/recv";
}

// A receiver expecting another codec refuses the stream instead of misreading it.
TEST(CompressedMismatch, DifferentCodecsAreInvalidUsage) {
  const size_t count = 1000;
  auto in = gaussian(2, count, 3);
  std::vector<Vec> out(2, Vec(count));
  auto fabric = transport::makeFabric(2);
  std::vector<std::string> err(2);
  std::vector<std::thread> t;
  for (int r = 0; r < 2; ++r)
    t.emplace_back([&, r] {
      try {
        CollArgs a = args(2, r, count, r == 0 ? cclCodecInt8 : cclCodecInt4, Algo::kTwoShot);
        Plan p = planAllReduce(a);
        std::vector<std::byte> scratch(p.scratchBytes);
        auto tr = transport::createLocalTransport(fabric, r);
        Job j;
        j.plan = &p;
        j.buffers = {in[r].data(), out[r].data(), scratch.data(), nullptr};
        j.transport = tr.get();
        ExecOptions o;
        o.timeout = std::chrono::seconds(2);
        execute(std::span<const Job>(&j, 1), o);
      } catch (const Error& e) {
        err[r] = std::to_string(e.code());
      }
    });
  for (auto& x : t) x.join();
  EXPECT_EQ(err[0], std::to_string(cclInvalidUsage));
  EXPECT_EQ(err[1], std::to_string(cclInvalidUsage));
}

}  // namespace
}  // namespace ccl::coll

namespace ccl::coll {
namespace {

// Random-k through the values ring with a NaN or an infinity in one rank's input, whichever
// rank: that rank's stream says so in its header only, and its values travel as 0, but every
// rank's output is NaN everywhere (include/ccl/compression.h: a sparsifier's input holding a
// non-finite value arrives as NaN everywhere), for sums and averages, chunked or not.
TEST(CompressedSparse, RandKRingCarriesANonFiniteInputToEveryRank) {
  const size_t count = 70000;
  for (int n : {2, 3, 5})
    for (int bad = 0; bad < n; ++bad)
      for (float poison : {std::nanf(""), INFINITY, -INFINITY})
        for (cclRedOp_t op : {cclSum, cclAvg}) {
          auto in = gaussian(n, count, 41 + n);
          in[bad][5 + bad] = poison;
          auto argsOf = [&](int r) {
            CollArgs a = args(n, r, count, cclCodecRandK, Algo::kRing, bad % 2 ? 4096 : 1 << 18);
            a.codec.keepRatio = 0.3;
            a.op = op;
            return a;
          };
          ASSERT_EQ(chooseAlgorithm(Coll::kAllReduce, argsOf(0)).algo, Algo::kRing);
          const auto out = allReduce(in, argsOf, bad % 2 == 0, nullptr, 9);
          for (int r = 0; r < n; ++r) {
            const size_t finite = std::count_if(out[r].begin(), out[r].end(), [](float x) { return !std::isnan(x); });
            EXPECT_EQ(finite, 0u) << "n " << n << " rank " << r << " input of rank " << bad << " held " << poison
                                  << (op == cclAvg ? " (avg)" : "");
          }
        }
}

}  // namespace
}  // namespace ccl::coll
