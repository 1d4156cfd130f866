// SPDX-License-Identifier: BSD-3-Clause
// The public names and counts (api/names.cc) that bindings build their enums from.
#include <gtest/gtest.h>

#include <string>

#include "ccl/ccl.h"
#include "collectives/plan/call_args.h"
#include "collectives/plan/collective_info.h"

namespace ccl::api {
namespace {

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

}  // namespace
}  // namespace ccl::api
