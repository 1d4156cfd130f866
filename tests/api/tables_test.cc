// SPDX-License-Identifier: BSD-3-Clause
// The tables the api layer builds on: the one parser of CCL_COMPRESS and CCL_FEEDBACK
// (used by the communicators' policy and the NCCL face alike), the table of collectives and
// the tag layout.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api/compression.h"
#include "collectives/algorithms/algorithms.h"
#include "collectives/plan/collective_info.h"
#include "collectives/plan/topology.h"
#include "common/error.h"
#include "common/tags.h"

namespace ccl::api {
namespace {

constexpr uint32_t bit(cclOpKind_t k) { return 1u << k; }

TEST(CompressList, NamesAnyCaseAndAliases) {
  EXPECT_EQ(parseCompressList(""), 0u);
  EXPECT_EQ(parseCompressList("none"), 0u);
  EXPECT_EQ(parseCompressList("allreduce,ReduceScatter,ALLGATHER"),
            bit(cclOpAllReduce) | bit(cclOpReduceScatter) | bit(cclOpAllGather));
  EXPECT_EQ(parseCompressList("sendrecv"), bit(cclOpSend) | bit(cclOpRecv));
  EXPECT_EQ(parseCompressList("broadcast,,alltoall"), bit(cclOpBroadcast) | bit(cclOpAlltoAll));
  uint32_t compressible = 0;
  for (int c = 0; c < coll::kNumColls; ++c)
    if (coll::collInfo(static_cast<coll::Coll>(c)).compressible) compressible |= 1u << c;
  EXPECT_EQ(parseCompressList("all"), compressible);
  EXPECT_EQ(parseCompressList("All,none"), compressible);
}

TEST(CompressList, RefusesUnknownAndUncompressedCollectives) {
  for (const char* bad : {"allreduc", "reduce", "gather", "scatter", "allreduce,bogus"}) {
    try {
      parseCompressList(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), cclInvalidArgument) << bad;
      EXPECT_NE(std::string(e.what()).find("CCL_COMPRESS"), std::string::npos) << e.what();
    }
  }
}

// The public names and counts bindings build their enums from: each read from its table,
// each name parsed back to its value, and what is out of range or unknown refused.
TEST(PublicNames, EveryEnumRoundTripsThroughItsName) {
  ASSERT_EQ(cclCodecCount(), cclNumCodecs);
  for (int c = 0; c < cclCodecCount(); ++c) {
    cclCodec_t back;
    ASSERT_EQ(cclCodecFromName(cclCodecName(static_cast<cclCodec_t>(c)), &back), cclSuccess) << c;
    EXPECT_EQ(back, c);
  }
  ASSERT_EQ(cclOpKindCount(), cclNumOpKinds);
  for (int k = 0; k < cclOpKindCount(); ++k) {
    const char* name = cclOpKindName(static_cast<cclOpKind_t>(k));
    EXPECT_STREQ(name, ccl::coll::collInfo(static_cast<ccl::coll::Coll>(k)).name);
    cclOpKind_t back;
    ASSERT_EQ(cclOpKindFromName(name, &back), cclSuccess) << name;
    EXPECT_EQ(back, k);
  }
  EXPECT_STREQ(cclOpKindName(cclOpReduceScatter), "reducescatter");
  ASSERT_EQ(cclAlgorithmCount(), ccl::coll::kNumAlgos);
  for (int a = 0; a < cclAlgorithmCount(); ++a) {
    int back = -1;
    ASSERT_EQ(cclAlgorithmFromName(cclAlgorithmName(a), &back), cclSuccess) << a;
    EXPECT_EQ(back, a);
  }
  int hier = -1;
  EXPECT_EQ(cclAlgorithmFromName("hierarchical", &hier), cclSuccess) << "CCL_ALGO's other spellings";
  EXPECT_STREQ(cclAlgorithmName(hier), "hier");
  EXPECT_STREQ(cclAlgorithmName(0), "auto");
  for (int bad : {-1, cclAlgorithmCount()}) EXPECT_STREQ(cclAlgorithmName(bad), "invalid");
  ASSERT_EQ(cclUncompressedReasonCount(), cclNumUncompressedReasons);
  for (int r = 0; r < cclNumUncompressedReasons; ++r)
    EXPECT_STRNE(cclUncompressedReasonName(static_cast<cclUncompressedReason_t>(r)), "invalid") << r;
  EXPECT_STREQ(cclUncompressedReasonName(cclUncompressedNotListed), "not_listed");
  EXPECT_STREQ(cclUncompressedReasonName(cclNumUncompressedReasons), "invalid");
  EXPECT_STREQ(cclOpKindName(cclNumOpKinds), "invalid");
  EXPECT_STREQ(cclCodecName(cclNumCodecs), "invalid");
  cclOpKind_t kind;
  int algo;
  EXPECT_EQ(cclOpKindFromName("reduce_scatter", &kind), cclInvalidArgument) << "one spelling";
  EXPECT_EQ(cclOpKindFromName(nullptr, &kind), cclInvalidArgument);
  EXPECT_EQ(cclOpKindFromName("allreduce", nullptr), cclInvalidArgument);
  EXPECT_EQ(cclAlgorithmFromName("fastest", &algo), cclInvalidArgument);
  EXPECT_NE(std::string(cclGetLastError(nullptr)).find("ring"), std::string::npos) << "names the algorithms";
}

TEST(PublicNames, CompressListParseIsCclCompress) {
  unsigned mask = 0;
  ASSERT_EQ(cclCompressListParse("all", &mask), cclSuccess);
  unsigned compressible = 0;
  for (int k = 0; k < cclNumOpKinds; ++k)
    if (ccl::coll::collInfo(static_cast<ccl::coll::Coll>(k)).compressible) compressible |= 1u << k;
  EXPECT_EQ(mask, compressible) << "all: every collective that can be compressed";
  EXPECT_NE(mask, 0u);
  ASSERT_EQ(cclCompressListParse(" AllReduce , reducescatter", &mask), cclSuccess);
  EXPECT_EQ(mask, (1u << cclOpAllReduce) | (1u << cclOpReduceScatter));
  ASSERT_EQ(cclCompressListParse("", &mask), cclSuccess);
  EXPECT_EQ(mask, 0u);
  EXPECT_EQ(cclCompressListParse("reduce_scatter", &mask), cclInvalidArgument);
  const std::string why = cclGetLastError(nullptr);
  EXPECT_NE(why.find("reducescatter"), std::string::npos) << "lists the names: " << why;
  EXPECT_EQ(cclCompressListParse("reduce", &mask), cclInvalidArgument) << "never compressed";
  EXPECT_EQ(cclCompressListParse(nullptr, &mask), cclInvalidArgument);
  EXPECT_EQ(cclCompressListParse("all", nullptr), cclInvalidArgument);
}

// Feedback without a handle, by position in the step (api/compression.h, AutoFeedback).
TEST(AutoFeedback, StatesFollowThePositionsOfTheStep) {
  ccl::api::Policy policy;
  policy.autoFeedback = cclFeedbackResidual;
  ccl::api::AutoFeedback fb;
  char buf[8];
  auto call = [&](int b, size_t count) { return fb.get(&buf[b], count, cclFloat32, 0, policy); };
  // DDP: three buckets a step. The step's length is learned at the first call of step 2,
  // and each bucket keeps its state.
  std::vector<ccl::api::AutoFeedback::Slot> first;
  for (int b = 0; b < 3; ++b) first.push_back(call(b, 100 + b));
  for (int step = 0; step < 3; ++step)
    for (int b = 0; b < 3; ++b) {
      const auto s = call(b, 100 + b);
      EXPECT_EQ(s.state, first[b].state) << "step " << step << " bucket " << b;
      EXPECT_EQ(s.generation, first[b].generation) << "step " << step << " bucket " << b;
    }
  EXPECT_EQ(fb.stepLength(), 3u);
  EXPECT_EQ(fb.positions(), 3u);
  // A rebuild to two buckets, the second at bucket 0's address with its count: no state is
  // kept across it (new generations), then the new step's length is learned again and its
  // buckets keep their states.
  std::vector<ccl::api::AutoFeedback::Slot> rebuilt;
  for (int step = 0; step < 6; ++step)
    for (int b : {5, 0}) {
      const auto s = call(b, b == 0 ? 100 : 7);
      if (step == 0) {
        const size_t pos = b == 5 ? 0 : 1;
        EXPECT_NE(s.generation, first[pos].generation) << "bucket " << b << " kept position " << pos << "'s state";
      }
      if (step == 5) rebuilt.push_back(s);
    }
  EXPECT_EQ(fb.stepLength(), 2u) << "the step's length is learned again";
  for (int b : {5, 0}) {
    const auto s = call(b, b == 0 ? 100 : 7);
    EXPECT_EQ(s.generation, rebuilt[b == 5 ? 0 : 1].generation) << "bucket " << b << " after the rebuild";
    EXPECT_EQ(s.state, rebuilt[b == 5 ? 0 : 1].state);
  }
  // Calls that never repeat keep at most kMaxPositions states.
  ccl::api::AutoFeedback endless;
  std::vector<float> many(5000);
  for (size_t i = 0; i < many.size(); ++i) endless.get(&many[i], 1, cclFloat32, 0, policy);
  EXPECT_LE(endless.positions(), ccl::api::AutoFeedback::kMaxPositions);
}

TEST(FeedbackKind, Names) {
  EXPECT_EQ(parseFeedbackKind(""), cclFeedbackNone);
  EXPECT_EQ(parseFeedbackKind("NONE"), cclFeedbackNone);
  EXPECT_EQ(parseFeedbackKind("ef"), cclFeedbackResidual);
  EXPECT_EQ(parseFeedbackKind("Residual"), cclFeedbackResidual);
  EXPECT_EQ(parseFeedbackKind("LoCo"), cclFeedbackLoco);
  EXPECT_THROW(parseFeedbackKind("loco2"), Error);
}

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

TEST(Tags, StepTagsStayBelowTheSignatureAndRefuseWhatDoesNotFit) {
  const int n = tags::kMaxRanks;
  EXPECT_LT(tags::stepTag(tags::kMaxPhases - 1, n, n - 1, tags::kChunkLimit - 1), tags::kSignatureTag);
  EXPECT_THROW(tags::stepTag(tags::kMaxPhases - 1, n + 1, n, 0), Error) << "more ranks than the step field numbers";
  EXPECT_THROW(tags::stepTag(0, 4, 0, tags::kChunkLimit), Error);
  EXPECT_THROW(tags::stepTag(tags::kMaxPhases, 4, 0, 0), Error);
  // Distinct (phase, step, chunk) give distinct tags.
  EXPECT_NE(tags::stepTag(0, 8, 7, 3), tags::stepTag(1, 8, 0, 3));
  EXPECT_NE(tags::stepTag(0, 8, 1, 0), tags::stepTag(0, 8, 0, 1));
  // Collective and point-to-point bases never meet, and neither touches the source field.
  EXPECT_EQ(tags::collectiveBase(~0u) & tags::kPointToPointBit, 0u);
  EXPECT_NE(tags::pointToPointBase(0) & tags::kPointToPointBit, 0u);
  EXPECT_EQ((tags::collectiveBase(~0u) | tags::pointToPointBase(~0u) | tags::kSignatureTag) & ~tags::kCallerMask, 0u);
  EXPECT_EQ(tags::sourceOf(tags::wireTag(12345, tags::kCallerMask)), 12345);
}

}  // namespace
}  // namespace ccl::api
