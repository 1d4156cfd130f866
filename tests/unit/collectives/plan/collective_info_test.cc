// SPDX-License-Identifier: BSD-3-Clause
// The table of collectives (collective_info.h): buffer counts and in-place rules as NCCL defines
// them, and compressed plans exactly for the collectives the table calls compressible.
#include <gtest/gtest.h>

#include "collectives/algorithms/algorithms.h"
#include "collectives/plan/collective_info.h"

namespace ccl {
namespace {

TEST(CollectiveTable, FactsAsNcclDefinesThem) {
  using coll::Coll;
  EXPECT_EQ(coll::bufferCounts(Coll::kAllGather, 5, 4, false).recv, 20u);
  EXPECT_EQ(coll::bufferCounts(Coll::kReduceScatter, 5, 4, false).send, 20u);
  EXPECT_EQ(coll::bufferCounts(Coll::kGather, 5, 4, false).recv, 0u) << "only the root receives";
  EXPECT_EQ(coll::bufferCounts(Coll::kGather, 5, 4, true).recv, 20u);
  EXPECT_EQ(coll::bufferCounts(Coll::kScatter, 5, 4, false).send, 0u) << "only the root sends";
  EXPECT_EQ(coll::bufferCounts(Coll::kBroadcast, 5, 4, false).send, 0u);
  EXPECT_EQ(coll::bufferCounts(Coll::kReduce, 5, 4, false).recv, 0u);
  float buf[40];
  EXPECT_TRUE(coll::isInPlace(Coll::kAllGather, buf + 2 * 5, buf, 5 * sizeof(float), 2, false));
  EXPECT_FALSE(coll::isInPlace(Coll::kAllGather, buf, buf, 5 * sizeof(float), 2, false));
  EXPECT_TRUE(coll::isInPlace(Coll::kReduceScatter, buf, buf + 3 * 5, 5 * sizeof(float), 3, false));
  EXPECT_FALSE(coll::isInPlace(Coll::kGather, buf + 5, buf, 5 * sizeof(float), 1, false)) << "root only";
  EXPECT_TRUE(coll::isInPlace(Coll::kGather, buf + 5, buf, 5 * sizeof(float), 1, true));
  EXPECT_TRUE(coll::isInPlace(Coll::kBroadcast, buf, buf, 5 * sizeof(float), 1, false));
  EXPECT_FALSE(coll::isInPlace(Coll::kSend, buf, buf, 5 * sizeof(float), 0, false));
  coll::Coll c;
  EXPECT_TRUE(coll::collFromName("ReduceScatter", &c));
  EXPECT_EQ(c, Coll::kReduceScatter);
  EXPECT_FALSE(coll::collFromName("reduce_scatter", &c));
}

TEST(CollectiveTable, CompressedPlansExactlyForTheCompressibleCollectives) {
  for (int c = 0; c < coll::kNumColls; ++c) {
    const auto kind = static_cast<coll::Coll>(c);
    const coll::CollInfo info = coll::collInfo(kind);
    if (info.pointToPoint) continue;
    coll::CollArgs a;
    a.nranks = 3;
    a.rank = 1;
    a.root = 0;
    a.count = 1000;
    a.codec = codec::defaultParams(cclCodecInt8);
    const coll::Plan p = coll::planCollective(kind, a);
    bool usesCodec = false;  // a non-root rank of a broadcast only decodes
    for (const coll::Step& s : p.steps)
      usesCodec = usesCodec || s.kind == coll::StepKind::kEncode || s.kind == coll::StepKind::kDecode ||
                  s.kind == coll::StepKind::kDecodeAdd || s.kind == coll::StepKind::kDecodeAddEncode;
    EXPECT_EQ(usesCodec, info.compressible) << info.name;
  }
}

}  // namespace
}  // namespace ccl
