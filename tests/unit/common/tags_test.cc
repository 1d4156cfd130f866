// SPDX-License-Identifier: BSD-3-Clause
// The tag layout (common/tags.h): step tags below the signature, bases that never meet.
#include <gtest/gtest.h>

#include "common/error.h"
#include "common/tags.h"

namespace ccl {
namespace {

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
}  // namespace ccl
