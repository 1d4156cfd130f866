// SPDX-License-Identifier: BSD-3-Clause
// The one parser of CCL_COMPRESS and CCL_FEEDBACK (used by the communicators' policy and the NCCL
// face alike) and the feedback kept by position in the step (api/compression.h).
#include <gtest/gtest.h>

#include <string>

#include "api/compression.h"
#include "collectives/plan/collective_info.h"
#include "common/error.h"

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

// Positions given back latest first (a refused group's calls) leave the step as it was: the
// learning of its length, the positions appended, and a position's tensor and generation.
TEST(AutoFeedback, PositionsGivenBackLeaveTheStepAsItWas) {
  ccl::api::Policy policy;
  policy.autoFeedback = cclFeedbackResidual;
  ccl::api::AutoFeedback fb;
  char buf[8] = {};
  auto call = [&](int b) { return fb.get(&buf[b], 100, cclFloat32, 0, policy); };
  auto giveBack = [&](std::vector<ccl::api::AutoFeedback::Slot> slots) {
    for (auto it = slots.rbegin(); it != slots.rend(); ++it) fb.giveBack(it->taken);
  };
  // While learning: a refused call of another tensor (appended a position), then one of the
  // first tensor (learned the length).
  const auto a = call(0), b = call(1);
  giveBack({call(2), call(0)});
  EXPECT_EQ(fb.positions(), 2u);
  EXPECT_EQ(fb.stepLength(), 0u);
  // Learned at the next step, and the states are kept.
  for (int step = 0; step < 2; ++step) {
    EXPECT_EQ(call(0).generation, a.generation);
    const auto s = call(1);
    EXPECT_EQ(s.state, b.state);
    EXPECT_EQ(s.generation, b.generation);
  }
  EXPECT_EQ(fb.stepLength(), 2u);
  // Once learned: a refused group of three calls, one of another tensor at b's position.
  giveBack({call(0), call(3), call(0)});
  const auto s = call(0), t = call(1);
  EXPECT_EQ(s.generation, a.generation);
  EXPECT_EQ(t.state, b.state);
  EXPECT_EQ(t.generation, b.generation) << "b's position kept the other tensor's generation";
  // No position taken (a caller's handle): nothing to give back.
  fb.giveBack(ccl::api::AutoFeedback::Taken{});
  EXPECT_EQ(call(0).generation, a.generation);
}

TEST(FeedbackKind, Names) {
  EXPECT_EQ(parseFeedbackKind(""), cclFeedbackNone);
  EXPECT_EQ(parseFeedbackKind("NONE"), cclFeedbackNone);
  EXPECT_EQ(parseFeedbackKind("ef"), cclFeedbackResidual);
  EXPECT_EQ(parseFeedbackKind("Residual"), cclFeedbackResidual);
  EXPECT_EQ(parseFeedbackKind("LoCo"), cclFeedbackLoco);
  EXPECT_THROW(parseFeedbackKind("loco2"), Error);
}

}  // namespace
}  // namespace ccl::api
