// SPDX-License-Identifier: BSD-3-Clause
// The cost model (collectives/plan/cost.h): its arithmetic on hand-made plans (one message, a
// rank's port shared by two messages, compute on one lane, a dependency chain), on the ring
// allreduce whose time has a closed form, the same prediction from one block of plans as
// from every rank's, and every algorithm at 65,536 ranks in seconds.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "collectives/algorithms/algorithms.h"
#include "collectives/exec/compute_cost.h"
#include "collectives/plan/cost.h"
#include "collectives/plan/topology.h"
#include "common/error.h"
#include "shard.h"

namespace ccl::coll {
namespace {

CostModel linkOnly(double alpha, double beta) {
  CostModel m;
  m.inside = m.across = LinkCost{alpha, beta};
  return m;
}

// A codec a row of the table runs with: none for the uncompressed ones.
codec::Params codecOf(const AlgoEntry& e) {
  if (!e.compressed) return {};
  return codec::defaultParams(e.algo == Algo::kSparse    ? cclCodecTopK
                              : e.algo == Algo::kLowRank ? cclCodecPowerSgd
                                                         : cclCodecInt8);
}

TEST(CostModel, OneMessageCostsAlphaPlusBytesOverBeta) {
  auto planOf = [](int r) { return r == 0 ? planSend(1, 3, 1000) : planRecv(0, 3, 1000); };
  const Prediction p = simulate(planOf, Shifts::none(2), 0, nullptr, linkOnly(1e-6, 1e9));
  EXPECT_DOUBLE_EQ(p.seconds, 1e-6 + 1000 / 1e9);
  EXPECT_EQ(p.messages, 1u);
}

TEST(CostModel, ARanksMessagesShareItsPortAndItsComputeLane) {
  // Rank 0 sends 1000 bytes to ranks 1 and 2 at once: the second waits for the first's bytes.
  auto fanOut = [](int r) {
    if (r != 0) return planRecv(0, 0, 1000);
    Plan p;
    p.send(1, 0, {Buf::kSend, 0}, 1000);
    p.send(2, 0, {Buf::kSend, 0}, 1000);
    return p;
  };
  EXPECT_DOUBLE_EQ(simulate(fanOut, Shifts::none(3), 0, nullptr, linkOnly(1e-6, 1e9)).seconds, 1e-6 + 2e-6);
  // A message's overhead holds the port like its bytes: small messages go at a bounded rate.
  CostModel withOverhead = linkOnly(1e-6, 1e9);
  withOverhead.across.overhead = 0.5e-6;
  EXPECT_DOUBLE_EQ(simulate(fanOut, Shifts::none(3), 0, nullptr, withOverhead).seconds, 1e-6 + 2 * (0.5e-6 + 1e-6));
  // Two ranks sending to one at once: the receiver takes them one after the other.
  auto fanIn = [](int r) {
    if (r != 0) return planSend(0, 0, 1000);
    Plan p;
    p.recv(1, 0, {Buf::kRecv, 0}, 1000);
    p.recv(2, 0, {Buf::kRecv, 1000}, 1000);
    return p;
  };
  EXPECT_DOUBLE_EQ(simulate(fanIn, Shifts::none(3), 0, nullptr, linkOnly(1e-6, 1e9)).seconds, 1e-6 + 2e-6);
  // Two copies of 1000 bytes at 1e9 B/s on one lane, then a send that waits for the second.
  auto chain = [](int r) {
    if (r == 1) return planRecv(0, 0, 1000);
    Plan p;
    const StepId a = p.copy({Buf::kRecv, 0}, {Buf::kSend, 0}, 1000);
    const StepId b = p.copy({Buf::kScratch, 0}, {Buf::kSend, 0}, 1000);
    p.send(1, 0, {Buf::kRecv, 0}, 1000, {a, b});
    return p;
  };
  CostModel m = linkOnly(1e-6, 1e9);
  m.compute.copy = 1e9;
  EXPECT_DOUBLE_EQ(simulate(chain, Shifts::none(2), 0, nullptr, m).seconds, 2e-6 + 1e-6 + 1e-6);
}

TEST(CostModel, MessagesInsideANodeTakeItsLink) {
  auto planOf = [](int r) { return r == 0 ? planSend(1, 3, 1000) : planRecv(0, 3, 1000); };
  CostModel m;
  m.inside = {1e-7, 1e10};
  m.across = {1e-5, 1e8};
  const int one[] = {2}, two[] = {1, 1};
  const Topology node = Topology::blocks(one), nodes = Topology::blocks(two);
  EXPECT_DOUBLE_EQ(simulate(planOf, Shifts::none(2), 0, &node, m).seconds, 1e-7 + 1e-7);
  EXPECT_DOUBLE_EQ(simulate(planOf, Shifts::none(2), 0, &nodes, m).seconds, 1e-5 + 1e-5);
}

// The ring allreduce of n equal pieces with free compute: 2(n-1) steps, each one message of a
// piece per rank, every rank's port busy with one message at a time.
TEST(CostModel, RingAllReduceTakesItsClosedForm) {
  for (int n : {2, 3, 4, 8}) {
    CollArgs a;
    a.nranks = n;
    a.count = static_cast<size_t>(n) * 1000;
    a.algo = Algo::kRing;
    const double alpha = 2e-6, beta = 1e9;
    const Prediction p = predict(Coll::kAllReduce, a, linkOnly(alpha, beta));
    EXPECT_NEAR(p.seconds, 2 * (n - 1) * (alpha + 4000 / beta), 1e-12) << n << " ranks";
    EXPECT_NEAR(p.linkSeconds, 2 * (n - 1) * 4000 / beta, 1e-12);
  }
}

// Compressing shrinks what crosses: int8's two-shot moves about a quarter of the ring's bytes,
// and with free compute takes less time at low bandwidth; with a slow codec it takes more.
TEST(CostModel, CompressionPaysOnlyWhereTheLinkIsSlowerThanTheCodec) {
  CollArgs a;
  a.nranks = 4;
  a.count = 1 << 20;
  CollArgs q = a;
  q.codec = codec::defaultParams(cclCodecInt8);
  CostModel slow = linkOnly(5e-6, 125e6);  // 1 Gbit/s
  slow.compute.reduce = slow.compute.copy = 10e9;
  slow.compute.encode[cclCodecInt8] = slow.compute.decode[cclCodecInt8] = slow.compute.decodeAdd[cclCodecInt8] = 5e9;
  EXPECT_LT(predict(Coll::kAllReduce, q, slow).seconds * 2, predict(Coll::kAllReduce, a, slow).seconds);
  CostModel fast = slow;
  fast.across = {1e-6, 20e9};  // shared memory
  EXPECT_GT(predict(Coll::kAllReduce, q, fast).seconds, predict(Coll::kAllReduce, a, fast).seconds);
}

// A model of a 1 Gbit/s link and of a CPU whose codecs run at a few GB/s.
CostModel slowLink() {
  CostModel m = linkOnly(30e-6, 125e6);
  m.compute.copy = 10e9;
  m.compute.reduce = 5e9;
  for (int k = 1; k < cclNumCodecs; ++k) m.compute.encode[k] = m.compute.decode[k] = m.compute.decodeAdd[k] = 3e9;
  return m;
}

TEST(Choice, CompressesLargeCallsOnASlowLinkAndNothingElse) {
  const codec::Params allowed[] = {codec::defaultParams(cclCodecInt8), codec::defaultParams(cclCodecInt4)};
  CollArgs a;
  a.nranks = 4;
  a.count = 16 << 20;  // 64 MiB
  const Choice big = chooseCheapest(Coll::kAllReduce, a, allowed, slowLink());
  EXPECT_EQ(big.codec.codec, cclCodecInt4) << "the fewest bytes win on a slow link";
  EXPECT_LT(big.seconds * 4, big.uncompressed);
  a.count = 2;  // 8 bytes: the message's latency, whatever its codec
  const Choice tiny = chooseCheapest(Coll::kAllReduce, a, allowed, slowLink());
  EXPECT_EQ(tiny.codec.codec, cclCodecNone) << "within the margin the call stays exact";
  EXPECT_EQ(tiny.algo, Algo::kDirect);
  CostModel fast = slowLink();
  fast.across = {1e-6, 40e9};  // faster than the codecs
  a.count = 16 << 20;
  EXPECT_EQ(chooseCheapest(Coll::kAllReduce, a, allowed, fast).codec.codec, cclCodecNone);
}

TEST(Choice, NeverALossyCodecTheUserDidNotAllow) {
  CollArgs a;
  a.nranks = 4;
  a.count = 16 << 20;
  EXPECT_EQ(chooseCheapest(Coll::kAllReduce, a, {}, slowLink()).codec.codec, cclCodecNone);
  const codec::Params int8[] = {codec::defaultParams(cclCodecInt8)};
  for (Coll c : {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter, Coll::kBroadcast, Coll::kAlltoAll}) {
    const cclCodec_t got = chooseCheapest(c, a, int8, slowLink()).codec.codec;
    EXPECT_TRUE(got == cclCodecNone || got == cclCodecInt8) << collInfo(c).name;
  }
  // A collective that is never compressed, or integers, stay exact whatever is allowed.
  EXPECT_EQ(chooseCheapest(Coll::kReduce, a, int8, slowLink()).codec.codec, cclCodecNone);
  a.dtype = cclInt32;
  EXPECT_EQ(chooseCheapest(Coll::kAllReduce, a, int8, slowLink()).codec.codec, cclCodecNone);
}

// The choice is a function of its arguments: every rank, given the same model, chooses alike
// (each rank of 8 asks with its own rank), and a named algorithm is kept.
TEST(Choice, EveryRankChoosesAlikeAndANamedAlgorithmIsKept) {
  const codec::Params allowed[] = {codec::defaultParams(cclCodecInt8), codec::defaultParams(cclCodecFp8E4m3)};
  const int sizes[] = {4, 4};
  const Topology t = Topology::blocks(sizes);
  for (size_t count : {size_t(1) << 10, size_t(1) << 16, size_t(1) << 22, size_t(1000003)}) {
    CollArgs a;
    a.nranks = 8;
    a.count = count;
    a.topo = &t;
    CostModel m = slowLink();
    m.inside = {1e-6, 10e9};
    const Choice first = chooseCheapest(Coll::kAllReduce, a, allowed, m);
    for (int r = 1; r < 8; ++r) {
      a.rank = r;
      const Choice c = chooseCheapest(Coll::kAllReduce, a, allowed, m);
      EXPECT_EQ(c.codec.codec, first.codec.codec) << count << " rank " << r;
      EXPECT_EQ(c.algo, first.algo) << count << " rank " << r;
      EXPECT_EQ(c.seconds, first.seconds) << "the same prediction, bit for bit, whatever the rank";
      EXPECT_EQ(c.uncompressed, first.uncompressed);
    }
    a.algo = Algo::kRing;
    EXPECT_EQ(chooseCheapest(Coll::kAllReduce, a, allowed, m).algo, Algo::kRing);
  }
}

// "auto" has one chooser (chooseAlgo): the model's cheapest row where there is a model that
// timed the call's codec, the table's rules where there is none, the codec is untimed or the
// call names its algorithm. Sizes and links where the two policies part show which one chose.
TEST(Choice, AutoIsTheModelWhereItTimedTheCodecElseTheTable) {
  int parted = 0;
  for (double beta : {1e6, 10e9}) {
    CostModel m = linkOnly(50e-6, beta);
    m.compute.copy = m.compute.reduce = 10e9;
    for (size_t count : {size_t(16), size_t(4096), size_t(1) << 20}) {
      CollArgs a;
      a.nranks = 4;
      a.count = count;
      const Algo table = chooseAlgorithm(Coll::kAllReduce, a).algo;
      const Choice byModel = chooseAlgo(Coll::kAllReduce, a, &m);
      EXPECT_TRUE(modelChooses(a, &m));
      EXPECT_EQ(byModel.algo, cheapestAlgorithm(Coll::kAllReduce, a, m).algo) << count;
      EXPECT_GT(byModel.seconds, 0);
      parted += byModel.algo != table;
      const Choice noModel = chooseAlgo(Coll::kAllReduce, a, nullptr);
      EXPECT_EQ(noModel.algo, table) << count;
      EXPECT_EQ(noModel.seconds, 0);
      a.codec = codec::defaultParams(cclCodecInt8);  // its kernels untimed in m
      EXPECT_FALSE(modelChooses(a, &m));
      EXPECT_EQ(chooseAlgo(Coll::kAllReduce, a, &m).algo, chooseAlgorithm(Coll::kAllReduce, a).algo) << count;
      a.codec = {};
      a.algo = Algo::kRing;
      EXPECT_FALSE(modelChooses(a, &m));
      EXPECT_EQ(chooseAlgo(Coll::kAllReduce, a, &m).algo, Algo::kRing);
    }
  }
  EXPECT_GT(parted, 0) << "no size or link where the model and the table part: the test shows nothing";
}

// A probe's fit recovers the link that made the times it is given.
TEST(Choice, ThisCpusKernelsAreMeasured) {
  const codec::Params codecs[] = {codec::defaultParams(cclCodecInt8), codec::defaultParams(cclCodecTopK)};
  const ComputeCost c = measureComputeCost(codecs);
  EXPECT_GT(c.copy, 0);
  EXPECT_GT(c.reduce, 0);
  EXPECT_GT(c.encode[cclCodecInt8], 0);
  EXPECT_GT(c.decodeAdd[cclCodecTopK], 0);
  EXPECT_EQ(c.encode[cclCodecInt4], 0) << "a codec not asked for is not timed";
  std::printf("copy %.2f GB/s, reduce %.2f, int8 encode %.2f decode %.2f decode-add %.2f\n", c.copy / 1e9,
              c.reduce / 1e9, c.encode[cclCodecInt8] / 1e9, c.decode[cclCodecInt8] / 1e9,
              c.decodeAdd[cclCodecInt8] / 1e9);
}

// One block of plans predicts what every rank's plans do, wherever the table says the plans
// are shifts of each other (up to an element of a piece that does not divide evenly).
TEST(CostModel, OneBlockOfPlansPredictsEveryRanks) {
  CostModel m;
  m.inside = {1e-6, 20e9};
  m.across = {5e-6, 1.25e9};
  m.compute.copy = m.compute.reduce = 8e9;
  for (int k = 0; k < cclNumCodecs; ++k) m.compute.encode[k] = m.compute.decode[k] = m.compute.decodeAdd[k] = 3e9;
  size_t compared = 0;
  double worst = 0;
  for (const AlgoEntry& e : algorithmTable())
    for (int n : {4, 6, 8}) {
      const std::vector<int> sizes(static_cast<size_t>(n / 2), 2);
      const Topology t = Topology::blocks(sizes);
      CollArgs a;
      a.nranks = n;
      a.count = 100000;
      a.algo = e.algo;
      a.topo = &t;
      a.chunkBytes = 64 << 10;
      a.codec = codecOf(e);
      if (&chooseAlgorithm(e.coll, a) != &e) continue;
      const Shifts shifts = planShifts(e.coll, a);
      if (shifts.blocks == 1) continue;
      auto planOf = [&](int r) {
        CollArgs x = a;
        x.rank = r;
        return planCollective(e.coll, x);
      };
      const Prediction one = simulate(planOf, shifts, 0, &t, m), all = simulate(planOf, Shifts::none(n), 0, &t, m);
      // An approximation where the ranks' pieces differ in size, order their local work by
      // absolute rank, or meet on a port in another order: within 20 %.
      EXPECT_NEAR(one.seconds, all.seconds, 0.2 * all.seconds)
          << collInfo(e.coll).name << " " << algoName(e.algo) << " n=" << n;
      EXPECT_NEAR(one.linkSeconds, all.linkSeconds, 0.2 * all.linkSeconds);
      worst = std::max(worst, std::fabs(one.seconds / all.seconds - 1));
      ++compared;
    }
  EXPECT_GT(compared, 20u);
  std::printf("%zu calls: one block of plans within %.1f %% of every rank's\n", compared, 100 * worst);
}

// Every algorithm of the table at 65,536 ranks (8,192 nodes of 8), priced in seconds: from one
// rank's or one node's plans where they are shifts (rotations, or XORs for recursive doubling
// and a hierarchical allreduce across nodes by it), else from every rank's (the roots, whose
// plans are small). Not under a sanitizer (a minute more there).
TEST(CostModel, EveryAlgorithmAt65536RanksInSeconds) {
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "the same code runs above at small scale";
#endif
  constexpr int n = 65536;
  const std::vector<int> sizes(n / 8, 8);
  const Topology t = Topology::blocks(sizes);
  CostModel m;
  m.inside = {2e-6, 450e9};
  m.across = {5e-6, 12.5e9};
  const auto start = std::chrono::steady_clock::now();
  ccltest::Shard shard = ccltest::Shard::fromEnv();  // a sharded build: its share of the rows
  for (const AlgoEntry& e : algorithmTable()) {
    if (!shard.next()) continue;
    CollArgs a;
    a.rank = 12345;
    a.nranks = n;
    a.count = e.algo == Algo::kDirect && e.coll == Coll::kAllReduce ? 1 : n;
    a.algo = e.algo;
    a.root = n - 2;
    a.topo = &t;
    a.codec = codecOf(e);
    if (&chooseAlgorithm(e.coll, a) != &e) continue;
    const auto begun = std::chrono::steady_clock::now();
    const Prediction p = predict(e.coll, a, m);
    EXPECT_GT(p.seconds, 0) << collInfo(e.coll).name << " " << algoName(e.algo);
    std::printf("  %s %s%s: %.3g s predicted, in %.2f s\n", collInfo(e.coll).name, algoName(e.algo),
                e.compressed ? " compressed" : "", p.seconds,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - begun).count());
  }
  std::printf("every algorithm at 65,536 ranks priced in %.1f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

}  // namespace
}  // namespace ccl::coll
