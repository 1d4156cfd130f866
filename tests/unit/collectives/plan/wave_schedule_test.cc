// SPDX-License-Identifier: BSD-3-Clause
// The wave schedule read from one block of plans (Shifts) against the schedule read from
// every rank's plan: for every row of the algorithm table whose `symmetric` says its plans
// are shifts of each other, on every rank count 2-9 and split into nodes, over counts that
// cut into unequal pieces and chunks, the two schedules are the same at every rank. A row
// that claims symmetry its plans do not have fails here, not as a hang on a device.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "collectives/algorithms/algorithms.h"
#include "collectives/exec/stream_executor.h"
#include "collectives/plan/topology.h"
#include "common/error.h"
#include "shard.h"

namespace ccl::coll {
namespace {

// Node splits of n ranks: one node, one rank per node, nodes of 2 and 3, and unequal ones.
std::vector<std::vector<int>> splitsOf(int n) {
  std::vector<std::vector<int>> out{{n}, std::vector<int>(static_cast<size_t>(n), 1)};
  for (int l : {2, 3})
    if (n % l == 0 && l < n) out.push_back(std::vector<int>(static_cast<size_t>(n / l), l));
  if (n >= 3) out.push_back({n - 1, 1});
  if (n >= 5) out.push_back({2, n - 2});
  return out;
}

cclCodec_t codecFor(const AlgoEntry& e, int variant) {
  if (!e.compressed) return cclCodecNone;
  if (e.algo == Algo::kSparse) return variant ? cclCodecRandK : cclCodecTopK;
  if (e.algo == Algo::kRing && variant) return cclCodecRandK;  // its values' ring
  return variant ? cclCodecInt4 : cclCodecInt8;
}

TEST(WaveSchedule, OneBlockOfPlansGivesEveryRanksSchedule) {
  size_t symmetric = 0, compared = 0;
  ccltest::Shard shard = ccltest::Shard::fromEnv();
  for (const AlgoEntry& e : algorithmTable()) {
    for (int n = 2; n <= 9; ++n)
      for (const auto& sizes : splitsOf(n)) {
        const Topology t = Topology::blocks(sizes);
        for (int variant = 0; variant < 2; ++variant)
          for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(1000), size_t(12345)})
            for (size_t chunk : {size_t(1) << 20, size_t(4096)}) {
              auto argsOf = [&](int r) {
                CollArgs a;
                a.rank = r;
                a.nranks = n;
                a.count = count;
                a.root = n / 2;
                a.algo = e.algo;
                a.chunkBytes = chunk;
                a.codec = codec::defaultParams(codecFor(e, variant));
                a.topo = &t;
                return a;
              };
              const CollArgs a0 = argsOf(0);
              if (&chooseAlgorithm(e.coll, a0) != &e) continue;  // another row takes this call
              const Shifts shifts = planShifts(e.coll, a0);
              if (shifts.blocks == 1 || !shard.next()) continue;
              ++symmetric;
              SCOPED_TRACE(std::string(collInfo(e.coll).name) + " " + algoName(e.algo) + " " +
                           cclCodecName(a0.codec.codec) + " n=" + std::to_string(n) + " " + t.describe() +
                           " count=" + std::to_string(count) + " chunk=" + std::to_string(chunk));
              auto planOf = [&](int r) { return planCollective(e.coll, argsOf(r)); };
              for (int r = 0; r < n; ++r) {
                EXPECT_EQ(planShifts(e.coll, argsOf(r)).blocks, shifts.blocks) << "ranks disagree on the symmetry";
                const Schedule all = scheduleWaves(planOf, n, r), one = scheduleWaves(planOf, shifts, r);
                ASSERT_EQ(one.level, all.level) << "rank " << r;
                ASSERT_EQ(one.waves, all.waves) << "rank " << r;
                ASSERT_EQ(one.postedBytes, all.postedBytes) << "rank " << r;
                ++compared;
              }
            }
      }
  }
  std::printf("%zu symmetric calls, %zu schedules compared\n", symmetric, compared);
  EXPECT_GT(symmetric, 1000u / shard.count());
}

// Every collective has a symmetric row for some call, hierarchical ones included: the fast
// schedule is not left unused by a predicate that never holds.
TEST(WaveSchedule, SymmetricRowsCoverTheFlatAndHierarchicalAlgorithms) {
  const int sizes[] = {2, 2, 2};
  const Topology t = Topology::blocks(sizes);
  CollArgs a;
  a.nranks = 6;
  a.count = 60000;  // past the latency-bound sizes: the ring across nodes, not a tree
  a.topo = &t;
  const std::pair<Coll, Algo> flatOnes[] = {{Coll::kAllReduce, Algo::kRing},
                                            {Coll::kAllGather, Algo::kRing},
                                            {Coll::kReduceScatter, Algo::kRing},
                                            {Coll::kAlltoAll, Algo::kDirect}};
  for (auto [c, algo] : flatOnes) {
    EXPECT_EQ(planShifts(c, a).blocks, 3) << collInfo(c).name << ": shifts of whole nodes";
    CollArgs flat = a;
    flat.algo = algo;
    EXPECT_EQ(planShifts(c, flat).blocks, 6) << collInfo(c).name << ": the ring's rotations";
  }
  CollArgs rooted = a;
  rooted.topo = nullptr;
  EXPECT_EQ(planShifts(Coll::kBroadcast, rooted).blocks, 1) << "a root is no shift of the others";
  const int unequal[] = {4, 2};
  const Topology u = Topology::blocks(unequal);
  a.topo = &u;
  EXPECT_EQ(planShifts(Coll::kAllReduce, a).blocks, 1) << "nodes of two sizes";
}

// Recursive doubling's plans are shifts of each other by XOR over a power of two ranks (rank
// r's partners are r ^ 2^i), and so are a hierarchical allreduce's whose stage across nodes is
// recursive doubling over a power of two nodes. (OneBlockOfPlansGivesEveryRanksSchedule
// checks their schedules against every rank's.)
TEST(WaveSchedule, RecursiveDoublingShiftsByXor) {
  CollArgs a;
  a.nranks = 8;
  a.count = 8;  // latency bound: a tree
  a.algo = Algo::kTree;
  Shifts s = planShifts(Coll::kAllReduce, a);
  EXPECT_EQ(s.blocks, 8);
  EXPECT_TRUE(s.xorBlocks);
  EXPECT_EQ(s.sourceOf(5, 6), 6) << "what block 5 sends to block 6 comes, shifted, from block 6";
  a.nranks = 6;
  EXPECT_EQ(planShifts(Coll::kAllReduce, a).blocks, 1) << "ranks fold in first: no shift";
  const int sizes[] = {2, 2, 2, 2};
  const Topology t = Topology::blocks(sizes);
  CollArgs h;
  h.nranks = 8;
  h.count = 4096;  // a shard of 8 KiB: past one round to every node, latency bound across nodes
  h.topo = &t;
  ASSERT_EQ(chooseAlgorithm(Coll::kAllReduce, h).algo, Algo::kHier);
  ASSERT_EQ(hierarchicalAllReduceAcross(h), Algo::kTree);
  s = planShifts(Coll::kAllReduce, h);
  EXPECT_EQ(s.blocks, 4) << "shifts of whole nodes";
  EXPECT_TRUE(s.xorBlocks);
  h.count = 600000;  // a ring across nodes
  s = planShifts(Coll::kAllReduce, h);
  EXPECT_EQ(s.blocks, 4);
  EXPECT_FALSE(s.xorBlocks) << "the ring's rotations";
}

// Plans that are not shifts of each other do not pair under shifts: the schedule says so
// instead of pairing messages wrongly.
TEST(WaveSchedule, ShiftsOfPlansThatDifferAreRefused) {
  // Rank 0 sends to rank 1 only: shifted, rank 1 would send to rank 0, which receives nothing.
  auto planOf = [](int r) { return r == 0 ? planSend(1, 5, 64) : planRecv(0, 5, 64); };
  EXPECT_NO_THROW(scheduleWaves(planOf, 2, 0));
  EXPECT_THROW(scheduleWaves(planOf, Shifts::ranks(2), 0), Error);
}

}  // namespace
}  // namespace ccl::coll
