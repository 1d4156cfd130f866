// SPDX-License-Identifier: BSD-3-Clause
// The hierarchical allreduce: exact against a serial reference for every split of 2-8 ranks
// into nodes, within the codec's bound composed over its levels when compressed, and the
// plans of every algorithm at 65,536 ranks tagged so that every message pairs with exactly
// one receive.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iterator>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "codecs/codec.h"
#include "collectives/algorithms/algorithms.h"
#include "collectives/exec/stream_executor.h"
#include "collectives/plan/topology.h"
#include "common/dtype.h"
#include "common/floatconv.h"
#include "common/tags.h"
#include "plan_runner.h"
#include "shard.h"

namespace ccl::coll {
namespace {

using Vec = std::vector<float>;
using Ints = std::vector<int32_t>;

// Under a sanitizer (several times slower) the splits of 7 and 8 ranks are sampled, one in
// kThin: the races and memory errors they look for are the executor's and the plan
// builders', which the splits of fewer ranks, all run, exercise as well.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr int kThin = 8;
#else
constexpr int kThin = 1;
#endif

// Every way to cut n ranks into consecutive nodes (compositions of n), n <= 8; in a build that
// runs one shard of the matrices, that shard of them (harness/shard.h).
std::vector<std::vector<int>> splits(int n) {
  std::vector<std::vector<int>> out;
  for (unsigned mask = 0; mask < (1u << (n - 1)); ++mask) {
    if (n >= 7 && mask % kThin != 0) continue;
    std::vector<int> sizes{1};
    for (int i = 1; i < n; ++i) {
      if (mask & (1u << (i - 1)))
        sizes.push_back(1);
      else
        ++sizes.back();
    }
    out.push_back(sizes);
  }
  return ccltest::Shard::fromEnv().of(out);
}

// The fewest cases a test over every split must run: `all` on the main build, less where the
// splits are sampled (kThin) or sharded.
int atLeast(int all) { return all / kThin / static_cast<int>(ccltest::Shard::fromEnv().count()); }

TEST(Topology, NodesFromHostIdsInOrderOfTheirFirstRank) {
  const uint64_t ids[] = {7, 9, 7, 3, 9, 7};
  const Topology t = Topology::fromHostIds(ids);
  EXPECT_EQ(t.nodes(), 3);
  EXPECT_EQ(t.nodeOf, (std::vector<int>{0, 1, 0, 2, 1, 0}));
  EXPECT_EQ(t.localRank, (std::vector<int>{0, 0, 1, 0, 1, 2}));
  EXPECT_EQ(t.members[0], (std::vector<int>{0, 2, 5}));
  EXPECT_EQ(t.describe(), "3 nodes of 3+2+1 ranks");
  EXPECT_TRUE(t.layered());
  const int equal[] = {2, 2};
  EXPECT_EQ(Topology::blocks(equal).describe(), "2 nodes of 2 ranks each");
  const int oneNode[] = {4}, singles[] = {1, 1, 1};
  EXPECT_FALSE(Topology::blocks(oneNode).layered());
  EXPECT_FALSE(Topology::blocks(singles).layered());
  EXPECT_NE(Topology::blocks(equal).digest(), Topology::blocks(oneNode).digest());
}

CollArgs hierArgs(const Topology& t, int r, size_t count, cclDataType_t dtype, cclRedOp_t op, size_t chunkBytes,
                  bool inPlace) {
  CollArgs a;
  a.rank = r;
  a.nranks = t.nranks();
  a.count = count;
  a.dtype = dtype;
  a.op = op;
  a.inPlace = inPlace;
  a.chunkBytes = chunkBytes;
  a.algo = Algo::kHier;
  a.topo = &t;
  return a;
}

int32_t value(int rank, size_t i) { return static_cast<int32_t>((i * 7 + rank * 13) % 23) - 11; }

// Uncompressed: the exact sum and max on every rank, for every split of 2-8 ranks.
TEST(HierarchicalAllReduce, ExactForEverySplitIntoNodes) {
  int ran = 0;
  for (int n = 2; n <= 8; ++n) {
    for (const std::vector<int>& sizes : splits(n)) {
      const Topology t = Topology::blocks(sizes);
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1001}}) {
        for (cclRedOp_t op : {cclSum, cclMax}) {
          for (bool inPlace : {false, true}) {
            if (count == 7 && op == cclMax) continue;
            const size_t chunk = count == 1001 ? 64 : 1 << 18;  // deep pipelines on the long case
            std::vector<Ints> send(n, Ints(count)), recv(n, Ints(count, -99));
            Ints want(count, op == cclSum ? 0 : INT32_MIN);
            for (int r = 0; r < n; ++r)
              for (size_t i = 0; i < count; ++i) {
                send[r][i] = value(r, i);
                recv[r][i] = inPlace ? send[r][i] : -99;
                want[i] = op == cclSum ? want[i] + send[r][i] : std::max(want[i], send[r][i]);
              }
            testing::runPlans(
                n,
                [&](int r) {
                  const CollArgs a = hierArgs(t, r, count, cclInt32, op, chunk, inPlace);
                  EXPECT_EQ(chooseAlgorithm(Coll::kAllReduce, a).algo == Algo::kHier, t.layered());
                  return planAllReduce(a);
                },
                [&](int r) {
                  return testing::RankBuffers{inPlace ? static_cast<const void*>(recv[r].data()) : send[r].data(),
                                              recv[r].data()};
                });
            for (int r = 0; r < n; ++r)
              ASSERT_EQ(recv[r], want) << t.describe() << " count " << count << " rank " << r << " op " << op
                                       << (inPlace ? " in place" : "");
            ++ran;
          }
        }
      }
    }
  }
  EXPECT_GT(ran, atLeast(1500));
}

// An average divides the sum once, by every rank of the communicator.
TEST(HierarchicalAllReduce, AverageDividesByEveryRank) {
  const int sizes[] = {3, 2};
  const Topology t = Topology::blocks(sizes);
  const size_t count = 513;
  std::vector<Vec> send(5, Vec(count)), recv(5, Vec(count));
  for (int r = 0; r < 5; ++r)
    for (size_t i = 0; i < count; ++i) send[r][i] = static_cast<float>(value(r, i));
  testing::runPlans(
      5, [&](int r) { return planAllReduce(hierArgs(t, r, count, cclFloat32, cclAvg, 1 << 18, false)); },
      [&](int r) {
        return testing::RankBuffers{send[r].data(), recv[r].data()};
      });
  for (size_t i = 0; i < count; ++i) {
    double sum = 0;
    for (int r = 0; r < 5; ++r) sum += send[r][i];
    ASSERT_NEAR(recv[0][i], sum / 5, 1e-5) << i;
    for (int r = 1; r < 5; ++r) ASSERT_EQ(recv[r][i], recv[0][i]);
  }
}

std::vector<Vec> gaussian(int n, size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<Vec> v(n, Vec(count));
  for (auto& x : v)
    for (auto& e : x) e = dist(rng);
  return v;
}

// Per element, the bound of a two-shot sum of `inputs` (codec::errorBound composed as the
// flat plans' tests compose it): each input quantized once in its block, the sum once more.
std::vector<double> twoShotBound(const std::vector<Vec>& inputs, const codec::Params& p) {
  const size_t count = inputs[0].size();
  double m = 0, maxSumAbs = 0, maxFirst = 0;
  for (const Vec& x : inputs)
    for (float e : x) m = std::max(m, double(std::fabs(e)));
  std::vector<double> sumAbs(count, 0), first(count, 0), bound(count);
  for (const Vec& x : inputs)
    for (size_t i = 0; i < count; ++i) {
      sumAbs[i] += std::fabs(x[i]);
      first[i] += codec::errorBound(p, std::fabs(x[i]), m, 1);
    }
  for (size_t i = 0; i < count; ++i) {
    maxSumAbs = std::max(maxSumAbs, sumAbs[i]);
    maxFirst = std::max(maxFirst, first[i]);
  }
  for (size_t i = 0; i < count; ++i)
    bound[i] = first[i] + codec::errorBound(p, sumAbs[i] + first[i], maxSumAbs + maxFirst, 1);
  return bound;
}

std::vector<Vec> runCompressed(const std::vector<Vec>& in, const std::function<CollArgs(int)>& argsOf,
                               std::vector<Vec>* feedback = nullptr, uint64_t seed = 0) {
  const int n = static_cast<int>(in.size());
  std::vector<Vec> out(n, Vec(in[0].size(), -7.0f));
  testing::runPlans(
      n, [&](int r) { return planCollective(Coll::kAllReduce, argsOf(r)); },
      [&](int r) {
        return testing::RankBuffers{in[r].data(), out[r].data(), feedback ? (*feedback)[r].data() : nullptr};
      },
      seed);
  return out;
}

// Compressed across nodes: every rank gets the same bits, within the bound of the plan's one
// lossy level. Inside a node the sums are exact (fp32), so the bound is the flat two-shot's
// over the node sums: each node sum quantized once in its block, the total once.
TEST(HierarchicalAllReduce, CompressedAcrossNodesWithinTheComposedBound) {
  for (cclCodec_t c : {cclCodecInt8, cclCodecInt4, cclCodecFp8E4m3, cclCodecInt2}) {
    for (const std::vector<int>& sizes : std::vector<std::vector<int>>{{2, 2}, {2, 3}, {3, 2}, {4, 4}, {1, 3}}) {
      const Topology t = Topology::blocks(sizes);
      const int n = t.nranks();
      const size_t count = 4099;
      const auto in = gaussian(n, count, 99 + n);
      const auto out = runCompressed(in, [&](int r) {
        CollArgs a = hierArgs(t, r, count, cclFloat32, cclSum, 4096, false);
        a.codec = codec::defaultParams(c);
        return a;
      });
      for (int r = 1; r < n; ++r)
        ASSERT_EQ(0, std::memcmp(out[0].data(), out[r].data(), count * sizeof(float))) << "rank " << r;
      std::vector<Vec> nodeSum(t.nodes(), Vec(count, 0.0f));
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i) nodeSum[t.nodeOf[r]][i] += in[r][i];
      const std::vector<double> twoShot = twoShotBound(nodeSum, codec::defaultParams(c));
      for (size_t i = 0; i < count; ++i) {
        double want = 0;
        for (int r = 0; r < n; ++r) want += in[r][i];
        const double bound = twoShot[i] + 1e-4;
        ASSERT_LE(std::fabs(out[0][i] - want), bound) << cclCodecName(c) << " " << t.describe() << " element " << i;
      }
    }
  }
}

// Compressed inside nodes too (CCL_CODEC_INTRA): every rank gets the same bits, within the
// bound of a two-shot over all the inputs (each contribution quantized once on its way to the
// owner, the total once more on its way back; a lossless level between them adds nothing).
TEST(HierarchicalAllReduce, CompressedInsideNodesWithinTheComposedBound) {
  for (auto [dtype, stochastic] : {std::pair{cclFloat32, 0}, std::pair{cclBfloat16, 0}, std::pair{cclFloat32, 1}}) {
    for (const std::vector<int>& sizes : std::vector<std::vector<int>>{{2, 2}, {3, 2}, {1, 3}}) {
      const Topology t = Topology::blocks(sizes);
      const int n = t.nranks();
      const size_t count = 3001;
      const auto in = gaussian(n, count, 7 + n);
      // bf16 inputs: the values the caller's bf16 buffer holds.
      std::vector<std::vector<uint16_t>> half(n, std::vector<uint16_t>(count));
      std::vector<Vec> held = in;
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i) {
          uint32_t bits;
          std::memcpy(&bits, &in[r][i], 4);
          half[r][i] = static_cast<uint16_t>(bits >> 16);
          bits = uint32_t{half[r][i]} << 16;
          std::memcpy(&held[r][i], &bits, 4);
        }
      std::vector<std::vector<uint16_t>> halfOut(n, std::vector<uint16_t>(count));
      std::vector<Vec> out(n, Vec(count));
      testing::runPlans(
          n,
          [&](int r) {
            CollArgs a = hierArgs(t, r, count, dtype, cclSum, 2048, false);
            a.intraCodec = codec::defaultParams(cclCodecInt8);
            a.intraCodec.stochastic = stochastic != 0;
            Plan plan = planCollective(Coll::kAllReduce, a);
            // Every rank encodes inside its node: a contribution, or an owner's shard (a lone
            // owner too, so that its rank gets the bits every other node's ranks get).
            EXPECT_TRUE(std::any_of(plan.steps.begin(), plan.steps.end(),
                                    [](const Step& s) { return s.intra && s.kind == StepKind::kEncode; }))
                << "rank " << r;
            return plan;
          },
          [&](int r) {
            if (dtype == cclBfloat16) return testing::RankBuffers{half[r].data(), halfOut[r].data()};
            return testing::RankBuffers{in[r].data(), out[r].data()};
          });
      if (dtype == cclBfloat16)
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i) {
            const uint32_t bits = uint32_t{halfOut[r][i]} << 16;
            std::memcpy(&out[r][i], &bits, 4);
          }
      for (int r = 1; r < n; ++r)
        ASSERT_EQ(0, std::memcmp(out[0].data(), out[r].data(), count * sizeof(float))) << "rank " << r;
      const std::vector<double> twoShot = twoShotBound(held, codec::defaultParams(cclCodecInt8));
      for (size_t i = 0; i < count; ++i) {
        double want = 0;
        for (int r = 0; r < n; ++r) want += held[r][i];
        double bound = twoShot[i] + 1e-4;
        if (dtype == cclBfloat16) bound += std::fabs(want) / 128 + 1e-3;  // the result rounded to bf16
        ASSERT_LE(std::fabs(out[0][i] - want), bound) << t.describe() << " dtype " << dtype << " element " << i;
      }
    }
  }
}

// Error feedback on the compressed level: a constant input allreduced T times with int4, the
// mean of the outputs converges to the exact sum; ranks that own no shard keep no residual.
TEST(HierarchicalAllReduce, FeedbackOnTheCompressedLevelConverges) {
  const int sizes[] = {3, 2};
  const Topology t = Topology::blocks(sizes);
  const int n = t.nranks();
  const size_t count = 4099;
  const auto in = gaussian(n, count, 2024);
  auto argsOf = [&](int r) {
    CollArgs a = hierArgs(t, r, count, cclFloat32, cclSum, 1 << 18, false);
    a.codec = codec::defaultParams(cclCodecInt4);
    a.feedback = true;
    return a;
  };
  std::vector<Vec> residual(n);
  for (int r = 0; r < n; ++r) residual[r].assign(feedbackFloats(Coll::kAllReduce, argsOf(r)), 0.0f);
  EXPECT_EQ(residual[2].size(), 0u) << "local rank 2 of the 3-rank node owns no shard";
  EXPECT_GT(residual[0].size(), 0u);
  Vec want(count, 0.0f), mean(count, 0.0f);
  for (const Vec& x : in)
    for (size_t i = 0; i < count; ++i) want[i] += x[i];
  auto relRms = [&](const Vec& got) {
    double num = 0, den = 0;
    for (size_t i = 0; i < count; ++i) {
      num += (got[i] - want[i]) * double(got[i] - want[i]);
      den += want[i] * double(want[i]);
    }
    return std::sqrt(num / den);
  };
  const int T = 64;
  double firstErr = 0;
  for (int k = 0; k < T; ++k) {
    const auto out = runCompressed(in, argsOf, &residual, static_cast<uint64_t>(k));
    if (k == 0) firstErr = relRms(out[0]);
    for (size_t i = 0; i < count; ++i) mean[i] += out[0][i] / T;
  }
  EXPECT_LT(relRms(mean), firstErr / 10) << "first " << firstErr;
}

// Broadcast and reduce across nodes and inside them: exact for every split of 2-8 ranks into
// nodes, roots at both ends and in the middle, in and out of place.
TEST(HierarchicalRooted, BroadcastAndReduceExactForEverySplit) {
  int ran = 0;
  for (int n = 2; n <= 8; ++n) {
    for (const std::vector<int>& sizes : splits(n)) {
      const Topology t = Topology::blocks(sizes);
      // The first, the middle and the last rank as the root: in the first node, in a middle
      // one and in the last, leader or not.
      for (int root : std::set<int>{0, n / 2, n - 1}) {
        for (size_t count : {size_t{0}, size_t{1}, size_t{1001}}) {
          for (bool inPlace : {false, true}) {
            for (Coll coll : {Coll::kBroadcast, Coll::kReduce}) {
              std::vector<Ints> send(n, Ints(count)), recv(n, Ints(count, -99));
              Ints want(count, 0);
              for (int r = 0; r < n; ++r)
                for (size_t i = 0; i < count; ++i) {
                  send[r][i] = value(r, i);
                  if (inPlace && r == root) recv[r][i] = send[r][i];
                  want[i] = coll == Coll::kBroadcast ? value(root, i) : want[i] + send[r][i];
                }
              testing::runPlans(
                  n,
                  [&](int r) {
                    CollArgs a = hierArgs(t, r, count, cclInt32, cclSum, 64, inPlace && r == root);
                    a.root = root;
                    return planCollective(coll, a);
                  },
                  [&](int r) {
                    const bool same = inPlace && r == root;
                    return testing::RankBuffers{same ? static_cast<const void*>(recv[r].data()) : send[r].data(),
                                                recv[r].data()};
                  });
              for (int r = 0; r < n; ++r) {
                if (coll == Coll::kReduce && r != root) continue;
                ASSERT_EQ(recv[r], want) << collInfo(coll).name << " " << t.describe() << " root " << root << " count "
                                         << count << " rank " << r << (inPlace ? " in place" : "");
              }
              ++ran;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(ran, atLeast(2000));
}

// A compressed broadcast: the root's data quantized once across nodes (and once more inside
// them with an intra-node codec), the same bits on every rank.
TEST(HierarchicalRooted, CompressedBroadcastAgreesWithinTheBound) {
  for (bool intra : {false, true}) {
    const int sizes[] = {2, 3, 1};
    const Topology t = Topology::blocks(sizes);
    const int n = t.nranks(), root = 3;
    const size_t count = 2500;
    const auto in = gaussian(n, count, 5);
    std::vector<Vec> out(n, Vec(count, -1.0f));
    testing::runPlans(
        n,
        [&](int r) {
          CollArgs a = hierArgs(t, r, count, cclFloat32, cclSum, 2048, false);
          a.root = root;
          a.codec = codec::defaultParams(cclCodecInt8);
          if (intra) a.intraCodec = codec::defaultParams(cclCodecInt4);
          return planCollective(Coll::kBroadcast, a);
        },
        [&](int r) {
          return testing::RankBuffers{in[r].data(), out[r].data()};
        });
    for (int r = 0; r < n; ++r)
      ASSERT_EQ(0, std::memcmp(out[0].data(), out[r].data(), count * sizeof(float))) << "rank " << r;
    double m = 0;
    for (float e : in[root]) m = std::max(m, double(std::fabs(e)));
    const codec::Params p8 = codec::defaultParams(cclCodecInt8), p4 = codec::defaultParams(cclCodecInt4);
    for (size_t i = 0; i < count; ++i) {
      const double x = std::fabs(in[root][i]), first = codec::errorBound(p8, x, m, 1);
      const double bound = first + (intra ? codec::errorBound(p4, x + first, m + first, 1) : 0) + 1e-6;
      ASSERT_LE(std::fabs(out[0][i] - in[root][i]), bound) << (intra ? "int8 + int4 " : "int8 ") << i;
    }
  }
}

// Allgather inside nodes, across their leaders and inside again: exact for every split of 2-8
// ranks, in and out of place; with a codec every rank holds the same bits, each block within
// one quantization of its owner's.
TEST(HierarchicalAllGather, ExactForEverySplitAndOneQuantizationCompressed) {
  int ran = 0;
  for (int n = 2; n <= 8; ++n) {
    for (const std::vector<int>& sizes : splits(n)) {
      const Topology t = Topology::blocks(sizes);
      for (size_t count : {size_t{0}, size_t{1}, size_t{333}}) {
        for (bool inPlace : {false, true}) {
          std::vector<Ints> send(n, Ints(count)), recv(n, Ints(count * n, -99));
          Ints want(count * n);
          for (int r = 0; r < n; ++r)
            for (size_t i = 0; i < count; ++i) {
              send[r][i] = value(r, i);
              want[r * count + i] = send[r][i];
              if (inPlace) recv[r][r * count + i] = send[r][i];
            }
          testing::runPlans(
              n,
              [&](int r) {
                return planCollective(Coll::kAllGather, hierArgs(t, r, count, cclInt32, cclSum, 64, inPlace));
              },
              [&](int r) {
                return testing::RankBuffers{
                    inPlace ? static_cast<const void*>(recv[r].data() + r * count) : send[r].data(), recv[r].data()};
              });
          for (int r = 0; r < n; ++r)
            ASSERT_EQ(recv[r], want) << t.describe() << " count " << count << " rank " << r
                                     << (inPlace ? " in place" : "");
          ++ran;
        }
      }
    }
  }
  EXPECT_GT(ran, atLeast(700));

  const int sizes[] = {3, 1, 2};
  const Topology t = Topology::blocks(sizes);
  const int n = t.nranks();
  const size_t count = 1500;
  const auto in = gaussian(n, count, 17);
  std::vector<Vec> out(n, Vec(count * n, -1.0f)), residual(n);
  auto argsOf = [&](int r) {
    CollArgs a = hierArgs(t, r, count, cclFloat32, cclSum, 1 << 18, false);
    a.codec = codec::defaultParams(cclCodecInt4);
    a.feedback = true;
    return a;
  };
  for (int r = 0; r < n; ++r) residual[r].assign(feedbackFloats(Coll::kAllGather, argsOf(r)), 0.0f);
  testing::runPlans(
      n, [&](int r) { return planCollective(Coll::kAllGather, argsOf(r)); },
      [&](int r) {
        return testing::RankBuffers{in[r].data(), out[r].data(), residual[r].data()};
      });
  const codec::Params p = codec::defaultParams(cclCodecInt4);
  for (int r = 1; r < n; ++r)
    ASSERT_EQ(0, std::memcmp(out[0].data(), out[r].data(), count * n * sizeof(float))) << "rank " << r;
  for (int d = 0; d < n; ++d) {
    double m = 0;
    for (float e : in[d]) m = std::max(m, double(std::fabs(e)));
    for (size_t i = 0; i < count; ++i) {
      const double err = std::fabs(out[0][d * count + i] - in[d][i]);
      ASSERT_LE(err, codec::errorBound(p, std::fabs(in[d][i]), m, 1) + 1e-6) << "block " << d << " element " << i;
      // The residual is what the quantization lost, kept by the block's owner.
      ASSERT_NEAR(residual[d][i], in[d][i] - out[0][d * count + i], 1e-5) << "residual of rank " << d;
    }
  }
}

// Reduce-scatter to an owner per block inside each node, then across: exact for every split
// of 2-8 ranks, in and out of place, sum and average; with a codec, each other node's sum
// quantized once on its way to the block's rank, the residual kept by its sender.
TEST(HierarchicalReduceScatter, ExactForEverySplitAndOneQuantizationPerNodeCompressed) {
  int ran = 0;
  for (int n = 2; n <= 8; ++n) {
    for (const std::vector<int>& sizes : splits(n)) {
      const Topology t = Topology::blocks(sizes);
      for (size_t count : {size_t{0}, size_t{1}, size_t{333}}) {
        for (bool inPlace : {false, true}) {
          std::vector<Ints> send(n, Ints(count * n)), recv(n, Ints(count, -99));
          Ints want(count * n, 0);
          for (int r = 0; r < n; ++r)
            for (size_t i = 0; i < count * n; ++i) {
              send[r][i] = value(r, i);
              want[i] += send[r][i];
            }
          testing::runPlans(
              n,
              [&](int r) {
                return planCollective(Coll::kReduceScatter, hierArgs(t, r, count, cclInt32, cclSum, 64, inPlace));
              },
              [&](int r) {
                return testing::RankBuffers{send[r].data(), inPlace ? send[r].data() + r * count : recv[r].data()};
              });
          for (int r = 0; r < n; ++r) {
            const int32_t* got = inPlace ? send[r].data() + r * count : recv[r].data();
            ASSERT_EQ(Ints(got, got + count), Ints(want.begin() + r * count, want.begin() + (r + 1) * count))
                << t.describe() << " count " << count << " rank " << r << (inPlace ? " in place" : "");
          }
          ++ran;
        }
      }
    }
  }
  EXPECT_GT(ran, atLeast(700));

  for (cclRedOp_t op : {cclSum, cclAvg}) {
    const int sizes[] = {2, 3};
    const Topology t = Topology::blocks(sizes);
    const int n = t.nranks();
    const size_t count = 1200;
    const auto in = gaussian(n, count * n, 23);
    std::vector<Vec> out(n, Vec(count, -1.0f)), residual(n);
    auto argsOf = [&](int r) {
      CollArgs a = hierArgs(t, r, count, cclFloat32, op, 1 << 18, false);
      a.codec = codec::defaultParams(cclCodecInt8);
      a.feedback = true;
      return a;
    };
    for (int r = 0; r < n; ++r) residual[r].assign(feedbackFloats(Coll::kReduceScatter, argsOf(r)), 0.0f);
    testing::runPlans(
        n, [&](int r) { return planCollective(Coll::kReduceScatter, argsOf(r)); },
        [&](int r) {
          return testing::RankBuffers{in[r].data(), out[r].data(), residual[r].data()};
        });
    const codec::Params p = codec::defaultParams(cclCodecInt8);
    for (int r = 0; r < n; ++r) {
      // Per other node: its sum of block r, quantized once in its own blocks.
      for (size_t i = 0; i < count; ++i) {
        double want = 0, bound = 1e-4;
        for (int m = 0; m < t.nodes(); ++m) {
          double nodeSum = 0, m0 = 0;
          for (int q : t.members[m]) nodeSum += in[q][r * count + i];
          want += nodeSum;
          if (m == t.nodeOf[r]) continue;
          for (size_t j = 0; j < count; ++j) {
            double s = 0;
            for (int q : t.members[m]) s += in[q][r * count + j];
            m0 = std::max(m0, std::fabs(s));
          }
          bound += codec::errorBound(p, std::fabs(nodeSum), m0, 1);
        }
        if (op == cclAvg) {
          want /= n;
          bound /= n;
        }
        ASSERT_LE(std::fabs(out[r][i] - want), bound) << "op " << op << " rank " << r << " element " << i;
      }
    }
  }
}

// All-to-all aggregated per pair of nodes: exact for every split of 2-8 ranks, in and out of
// place; with a codec, each block between nodes within one quantization (of the aggregate it
// crossed in), blocks inside a node exact.
TEST(HierarchicalAlltoAll, ExactForEverySplitAndOneQuantizationBetweenNodes) {
  int ran = 0;
  for (int n = 2; n <= 8; ++n) {
    for (const std::vector<int>& sizes : splits(n)) {
      const Topology t = Topology::blocks(sizes);
      for (size_t count : {size_t{0}, size_t{1}, size_t{77}}) {
        for (bool inPlace : {false, true}) {
          std::vector<Ints> send(n, Ints(count * n)), recv(n, Ints(count * n, -99));
          for (int r = 0; r < n; ++r)
            for (size_t i = 0; i < count * n; ++i) {
              send[r][i] = value(r, i);
              if (inPlace) recv[r][i] = send[r][i];
            }
          testing::runPlans(
              n,
              [&](int r) {
                return planCollective(Coll::kAlltoAll, hierArgs(t, r, count, cclInt32, cclSum, 64, inPlace));
              },
              [&](int r) {
                return testing::RankBuffers{inPlace ? static_cast<const void*>(recv[r].data()) : send[r].data(),
                                            recv[r].data()};
              });
          for (int r = 0; r < n; ++r)
            for (int s = 0; s < n; ++s)
              for (size_t i = 0; i < count; ++i)
                ASSERT_EQ(recv[r][s * count + i], value(s, r * count + i))
                    << t.describe() << " count " << count << " rank " << r << " from " << s
                    << (inPlace ? " in place" : "");
          ++ran;
        }
      }
    }
  }
  EXPECT_GT(ran, atLeast(700));

  const int sizes[] = {2, 1, 3};
  const Topology t = Topology::blocks(sizes);
  const int n = t.nranks();
  const size_t count = 700;
  const auto in = gaussian(n, count * n, 29);
  std::vector<Vec> out(n, Vec(count * n, -1.0f));
  testing::runPlans(
      n,
      [&](int r) {
        CollArgs a = hierArgs(t, r, count, cclFloat32, cclSum, 1 << 18, false);
        a.codec = codec::defaultParams(cclCodecInt8);
        return planCollective(Coll::kAlltoAll, a);
      },
      [&](int r) {
        return testing::RankBuffers{in[r].data(), out[r].data()};
      });
  const codec::Params p = codec::defaultParams(cclCodecInt8);
  for (int r = 0; r < n; ++r)
    for (int s = 0; s < n; ++s) {
      double m = 0;  // the largest value of the aggregate the block crossed in: every block s's node sends r's node
      for (int q : t.members[t.nodeOf[s]])
        for (int d : t.members[t.nodeOf[r]])
          for (size_t i = 0; i < count; ++i) m = std::max(m, double(std::fabs(in[q][d * count + i])));
      for (size_t i = 0; i < count; ++i) {
        const float want = in[s][r * count + i], got = out[r][s * count + i];
        if (t.nodeOf[s] == t.nodeOf[r])
          ASSERT_EQ(got, want) << "inside a node, rank " << r << " from " << s;
        else
          ASSERT_LE(std::fabs(got - want), codec::errorBound(p, std::fabs(want), m, 1) + 1e-6)
              << "rank " << r << " from " << s << " element " << i;
      }
    }
}

// ---- 65,536 ranks: every algorithm's plans tagged so every message pairs with one receive ----

// (from, to, tag) of a transfer step.
using Message = std::tuple<int, int, uint32_t>;

// Builds the plans of a few ranks of an `n`-rank communicator and of peers they talk to, and
// checks, for every pair of those ranks, that each message from one has exactly one receive
// of the same tag at the other, and that no tag reaches the signature's. (A flat algorithm's
// plan has O(n) steps: all 65,536 plans would be 2^32 steps; the pairs checked cover every
// kind of step of every stage.)
void checkPairs(const std::function<Plan(int)>& planOf, const std::set<int>& seeds, size_t* steps) {
  // With each seed rank: its first two peers and six more spread over the rest, in the order
  // its steps name them (an all-to-all talks to everyone; a hierarchical plan's peers inside
  // the node come first, then those across nodes).
  std::set<int> ranks = seeds;
  for (int r : seeds) {
    std::vector<int> peers;
    std::set<int> seen;
    for (const Step& s : planOf(r).steps)
      if (s.peer >= 0 && seen.insert(s.peer).second) peers.push_back(s.peer);
    for (size_t i = 0; i < peers.size() && i < 2; ++i) ranks.insert(peers[i]);
    for (size_t k = 1; k <= 6 && peers.size() > 2; ++k) ranks.insert(peers[2 + (peers.size() - 3) * k / 6]);
  }
  std::vector<Message> sends, recvs;
  for (int r : ranks) {
    const Plan p = planOf(r);
    *steps += p.steps.size();
    for (const Step& s : p.steps) {
      if (s.kind != StepKind::kSend && s.kind != StepKind::kRecv) continue;
      ASSERT_LT(s.tag >> tags::kStepShift, tags::kSignatureTag >> tags::kStepShift) << "a tag reaches the signature's";
      if (!ranks.count(s.peer)) continue;
      (s.kind == StepKind::kSend ? sends : recvs)
          .push_back(s.kind == StepKind::kSend ? Message{r, s.peer, s.tag} : Message{s.peer, r, s.tag});
    }
  }
  std::sort(sends.begin(), sends.end());
  std::sort(recvs.begin(), recvs.end());
  ASSERT_TRUE(std::adjacent_find(sends.begin(), sends.end()) == sends.end()) << "a tag used twice between one pair";
  ASSERT_TRUE(std::adjacent_find(recvs.begin(), recvs.end()) == recvs.end()) << "a tag received twice from one peer";
  std::vector<Message> unmatched;
  std::set_symmetric_difference(sends.begin(), sends.end(), recvs.begin(), recvs.end(), std::back_inserter(unmatched));
  if (!unmatched.empty()) {
    const auto [from, to, tag] = unmatched[0];
    FAIL() << unmatched.size() << " messages without their other end, e.g. rank " << from << " -> " << to << " tag "
           << tag;
  }
  EXPECT_FALSE(sends.empty());
}

TEST(Tags, PlansOfEveryAlgorithmAt65536RanksPairEveryMessage) {
#if defined(__SANITIZE_THREAD__)
  // One thread building plans: nothing for TSan to find, and 80 s of its instrumentation
  // (the main build and ASan run it).
  GTEST_SKIP() << "single-threaded: run by the main and ASan builds";
#endif
  constexpr int n = 65536;
  const std::vector<int> sizes(n / 8, 8);  // 8,192 nodes of 8 ranks
  const Topology t = Topology::blocks(sizes);
  // Under a sanitizer (ten times slower) one seed rank, in the middle of a node.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  const std::set<int> seeds{12345};
#else
  const std::set<int> seeds{0, 12345, n - 1};
#endif
  const auto start = std::chrono::steady_clock::now();
  size_t steps = 0;
  int cases = 0;
  ccltest::Shard shard = ccltest::Shard::fromEnv();  // a sharded build: its share of the algorithms
  for (int c = 0; c < kNumColls; ++c) {
    const Coll coll = static_cast<Coll>(c);
    const CollInfo& info = collInfo(coll);
    if (info.pointToPoint) continue;
    std::vector<std::pair<Algo, cclCodec_t>> algos{{Algo::kAuto, cclCodecNone}};
    if (coll == Coll::kAllReduce)
      algos = {{Algo::kRing, cclCodecNone},   {Algo::kTree, cclCodecNone},    {Algo::kDirect, cclCodecNone},
               {Algo::kHier, cclCodecNone},   {Algo::kTwoShot, cclCodecInt8}, {Algo::kRing, cclCodecInt8},
               {Algo::kSparse, cclCodecTopK}, {Algo::kHier, cclCodecInt8}};
    else if (info.compressible)
      algos.push_back({Algo::kAuto, cclCodecInt8});
    if (coll == Coll::kBroadcast) algos.push_back({Algo::kHier, cclCodecInt8});
    if (coll == Coll::kReduce) algos.push_back({Algo::kHier, cclCodecNone});
    if (coll == Coll::kAllGather || coll == Coll::kReduceScatter || coll == Coll::kAlltoAll) {
      algos.push_back({Algo::kHier, cclCodecNone});
      algos.push_back({Algo::kHier, cclCodecInt8});
    }
    for (auto [algo, codec] : algos) {
      if (!shard.next()) continue;
      SCOPED_TRACE(std::string(info.name) + " " + algoName(algo) + " " + cclCodecName(codec));
      // One element per rank (more for the rooted and per-rank collectives would only repeat
      // the same steps): the step fields reach their largest values.
      auto planOf = [&](int r) {
        CollArgs a;
        a.rank = r;
        a.nranks = n;
        a.count = algo == Algo::kDirect ? 1 : n;
        a.root = n - 2;
        a.algo = algo;
        a.codec = codec::defaultParams(codec);
        a.topo = algo == Algo::kHier ? &t : nullptr;  // the others flat: auto would take hier
        return planCollective(coll, a);
      };
      checkPairs(planOf, seeds, &steps);
      ++cases;
      // The wave schedule of a seed rank, as a device call makes it: from one rank's or one
      // node's plans where the plans are shifts of each other (planShifts), else from every
      // rank's (trees and roots, whose plans are small). Not under a sanitizer (a minute
      // more there; wave_schedule_test runs the same code at small scale).
      CollArgs seed;
      seed.rank = *seeds.begin();
      seed.nranks = n;
      seed.count = algo == Algo::kDirect ? 1 : n;
      seed.root = n - 2;
      seed.algo = algo;
      seed.codec = codec::defaultParams(codec);
      seed.topo = algo == Algo::kHier ? &t : nullptr;
      const Shifts shifts = planShifts(coll, seed);
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
      continue;
#endif
      const auto begun = std::chrono::steady_clock::now();
      const Schedule s = scheduleWaves(planOf, shifts, seed.rank);
      EXPECT_EQ(s.level.size(), planOf(seed.rank).steps.size());
      std::printf("  %s %s %s: %zu waves, from %d plans, in %.2f s\n", info.name,
                  algoName(chooseAlgorithm(coll, seed).algo), cclCodecName(codec), s.waves.size(), shifts.size,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - begun).count());
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%d plans of 65,536 ranks: %zu steps built and paired, and scheduled, in %.1f s\n", cases, steps, secs);
}

}  // namespace
}  // namespace ccl::coll

namespace ccl::coll {
namespace {
// A measurement, not a check (run with --gtest_also_run_disabled_tests): the wave schedule
// from every rank's plan grows with the steps of all ranks together; from one block of plans
// (planShifts) with one rank's or one node's (perf/README.md, "Topology").
TEST(Tags, DISABLED_WaveScheduleTime) {
  for (int n : {256, 512, 1024, 2048}) {
    const std::vector<int> sizes(n / 8, 8);
    const Topology t = Topology::blocks(sizes);
    for (Algo algo : {Algo::kRing, Algo::kHier}) {
      auto planOf = [&](int r) {
        CollArgs a;
        a.rank = r;
        a.nranks = n;
        a.count = n;
        a.algo = algo;
        a.topo = &t;
        return planCollective(Coll::kAllReduce, a);
      };
      const auto start = std::chrono::steady_clock::now();
      const Schedule s = scheduleWaves(planOf, n, 0);
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("n %d %s: %zu waves, %.2f s\n", n, algoName(algo), s.waves.size(), secs);
      const auto again = std::chrono::steady_clock::now();
      CollArgs a0;
      a0.nranks = n;
      a0.count = n;
      a0.algo = algo;
      a0.topo = &t;
      const Schedule one = scheduleWaves(planOf, planShifts(Coll::kAllReduce, a0), 0);
      EXPECT_EQ(one.waves, s.waves);
      std::printf("  from one block of plans: %.3f s\n",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - again).count());
    }
  }
}
}  // namespace
}  // namespace ccl::coll

namespace ccl::coll {
namespace {

// fp16 or bf16 inputs near 31000 (fp16's largest finite value is 65504), as the caller's
// buffers hold them, and their values.
struct NarrowInputs {
  std::vector<std::vector<uint16_t>> bits;
  std::vector<Vec> values;
};
NarrowInputs narrowNear31000(cclDataType_t dtype, int n, size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(30000.0f, 32000.0f);
  NarrowInputs in{std::vector<std::vector<uint16_t>>(n, std::vector<uint16_t>(count)), std::vector<Vec>(n, Vec(count))};
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) {
      const float v = dist(rng);
      in.bits[r][i] = dtype == cclFloat16 ? fp::floatToHalf(v) : fp::floatToBf16(v);
      in.values[r][i] = dtype == cclFloat16 ? fp::halfToFloat(in.bits[r][i]) : fp::bf16ToFloat(in.bits[r][i]);
    }
  return in;
}
float narrowValue(cclDataType_t dtype, uint16_t b) {
  return dtype == cclFloat16 ? fp::halfToFloat(b) : fp::bf16ToFloat(b);
}

// A compressed fp16 or bf16 average (ccl.h: compressed averages divide in fp32, and do not
// overflow): a node's sum of values near 31000 exceeds fp16's range, so stage 0 keeps it in
// fp32 and divides it there before it crosses nodes. Every rank gets the same bits, finite,
// within the codec's error of the average; with the codec inside the nodes too.
TEST(HierarchicalAllReduce, CompressedNarrowAveragesKeepNodeSumsInFp32) {
  for (cclDataType_t dtype : {cclFloat16, cclBfloat16})
    for (cclCodec_t intra : {cclCodecNone, cclCodecInt8})
      for (const std::vector<int>& sizes : std::vector<std::vector<int>>{{4, 4}, {2, 2, 2, 2}, {3, 2}, {1, 3}}) {
        const Topology t = Topology::blocks(sizes);
        const int n = t.nranks();
        const size_t count = 1000;
        const NarrowInputs in = narrowNear31000(dtype, n, count, 5 + n);
        std::vector<std::vector<uint16_t>> out(n, std::vector<uint16_t>(count));
        testing::runPlans(
            n,
            [&](int r) {
              CollArgs a = hierArgs(t, r, count, dtype, cclAvg, 512, false);
              a.codec = codec::defaultParams(cclCodecInt8);
              a.intraCodec = codec::defaultParams(intra);
              return planCollective(Coll::kAllReduce, a);
            },
            [&](int r) {
              return testing::RankBuffers{in.bits[r].data(), out[r].data()};
            });
        const std::string what =
            std::string(dataTypeName(dtype)) + " " + t.describe() + " intra " + cclCodecName(intra);
        for (int r = 1; r < n; ++r) ASSERT_EQ(out[r], out[0]) << what << " rank " << r;
        for (size_t i = 0; i < count; ++i) {
          double want = 0;
          for (int r = 0; r < n; ++r) want += in.values[r][i];
          want /= n;
          // int8 at most twice per value (three times with the codec inside nodes), each
          // within half a step of 32000 / 127, and the result's rounding.
          const double bound = 3 * 32000.0 / 127 / 2 + want / 128;
          const float got = narrowValue(dtype, out[0][i]);
          ASSERT_TRUE(std::isfinite(got)) << what << " element " << i;
          ASSERT_LE(std::fabs(got - want), bound) << what << " element " << i;
        }
      }
}

}  // namespace
}  // namespace ccl::coll

namespace ccl::coll {
namespace {

// The compressed reduce-scatter's fp16 or bf16 average likewise: each owner sums its node's
// contributions to a block in fp32, encodes that sum from fp32, and the block's rank divides
// in fp32: finite and within one quantization per other node of the average.
TEST(HierarchicalReduceScatter, CompressedNarrowAveragesKeepNodeSumsInFp32) {
  for (cclDataType_t dtype : {cclFloat16, cclBfloat16})
    for (const std::vector<int>& sizes : std::vector<std::vector<int>>{{4, 4}, {3, 2}, {1, 3}}) {
      const Topology t = Topology::blocks(sizes);
      const int n = t.nranks();
      const size_t count = 300;
      const NarrowInputs in = narrowNear31000(dtype, n, count * n, 17 + n);
      for (bool inPlace : {false, true}) {
        std::vector<std::vector<uint16_t>> send = in.bits, out(n, std::vector<uint16_t>(count));
        testing::runPlans(
            n,
            [&](int r) {
              CollArgs a = hierArgs(t, r, count, dtype, cclAvg, 1 << 18, inPlace);
              a.codec = codec::defaultParams(cclCodecInt8);
              return planCollective(Coll::kReduceScatter, a);
            },
            [&](int r) {
              return testing::RankBuffers{send[r].data(), inPlace ? send[r].data() + r * count : out[r].data()};
            });
        for (int r = 0; r < n; ++r) {
          const uint16_t* got = inPlace ? send[r].data() + r * count : out[r].data();
          for (size_t i = 0; i < count; ++i) {
            double want = 0;
            for (int q = 0; q < n; ++q) want += in.values[q][r * count + i];
            want /= n;
            const double bound = (t.nodes() - 1) * 4 * 32000.0 / 127 / 2 / n + want / 128;
            const float v = narrowValue(dtype, got[i]);
            ASSERT_TRUE(std::isfinite(v)) << dataTypeName(dtype) << " " << t.describe() << " rank " << r << " " << i;
            ASSERT_LE(std::fabs(v - want), bound) << dataTypeName(dtype) << " " << t.describe() << " rank " << r
                                                  << " element " << i << (inPlace ? " in place" : "");
          }
        }
      }
    }
}

}  // namespace
}  // namespace ccl::coll
