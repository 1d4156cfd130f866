// SPDX-License-Identifier: BSD-3-Clause
// The algorithm table (algorithms.h): every row named, built and chosen as CCL_ALGO says.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collectives/algorithms/algorithms.h"
#include "collectives/plan/collective_info.h"
#include "collectives/plan/topology.h"
#include "common/error.h"

namespace ccl {
namespace {

// Every row of the algorithm table: CCL_ALGO spells its name, it builds a plan for a call of
// its collective (a layered topology for the rows that need one), CCL_ALGO naming it chooses
// it, and a row that does not apply, or does not exist, is refused with a message.
TEST(AlgorithmTable, EveryRowBuildsAndIsNamed) {
  const int sizes[] = {2, 2};
  const coll::Topology nodes = coll::Topology::blocks(sizes);
  for (const coll::AlgoEntry& e : coll::algorithmTable()) {
    SCOPED_TRACE(std::string(coll::collInfo(e.coll).name) + " " + coll::algoName(e.algo) +
                 (e.compressed ? " compressed" : ""));
    EXPECT_EQ(coll::parseAlgo(coll::algoName(e.algo)), e.algo);
    coll::CollArgs a;
    a.rank = 1;
    a.nranks = 4;
    a.count = 1000;
    a.topo = &nodes;
    a.algo = e.algo;
    if (e.compressed)
      a.codec = codec::defaultParams(e.algo == coll::Algo::kSparse    ? cclCodecTopK
                                     : e.algo == coll::Algo::kLowRank ? cclCodecPowerSgd
                                                                      : cclCodecInt8);
    ASSERT_TRUE(!e.applies || e.applies(a));
    const coll::Plan p = coll::algorithm(e.coll, e.compressed, e.algo, a).build(a);
    EXPECT_FALSE(p.steps.empty());
    // Chosen when named, or by auto for a call it is preferred for.
    EXPECT_EQ(&coll::chooseAlgorithm(e.coll, a), &e);
    if (e.applies) {
      // What it needs taken away (nodes, a middle rank, the codec's kind): one of these
      // calls it does not apply to, and it is then refused and not chosen.
      std::vector<coll::CollArgs> without(4, a);
      without[0].topo = nullptr;
      without[1].nranks = 2;
      without[2].codec = codec::defaultParams(cclCodecPowerSgd);
      without[3].codec = codec::defaultParams(cclCodecInt8);
      bool refused = false;
      for (const coll::CollArgs& w : without) {
        if (e.applies(w)) continue;
        refused = true;
        EXPECT_THROW(coll::algorithm(e.coll, e.compressed, e.algo, w), Error);
        EXPECT_NE(&coll::chooseAlgorithm(e.coll, w), &e) << "a row that does not apply is not chosen";
      }
      EXPECT_TRUE(refused) << "a row whose condition held for every call tried";
    }
  }
  // Every collective's last row takes any call: auto always finds one.
  for (int c = 0; c < coll::kNumColls; ++c) {
    const coll::CollInfo& info = coll::collInfo(static_cast<coll::Coll>(c));
    if (info.pointToPoint) continue;
    for (bool compressed : {false, true}) {
      if (compressed && !info.compressible) continue;
      const coll::AlgoEntry* last = nullptr;
      for (const coll::AlgoEntry& e : coll::algorithmTable())
        if (e.coll == static_cast<coll::Coll>(c) && e.compressed == compressed) last = &e;
      ASSERT_NE(last, nullptr) << info.name;
      EXPECT_TRUE(!last->applies && !last->preferred) << info.name << ": its last row must take every call";
    }
  }
  coll::CollArgs a;
  EXPECT_THROW(coll::algorithm(coll::Coll::kAllReduce, true, coll::Algo::kTree, a), Error);
  EXPECT_THROW(coll::parseAlgo("hierarchy"), Error);
}

}  // namespace
}  // namespace ccl
