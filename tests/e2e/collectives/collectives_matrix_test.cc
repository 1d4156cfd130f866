// SPDX-License-Identifier: BSD-3-Clause
// The collectives matrix. The full cross product of collective x dtype x op x count x ranks
// x in-place x root is far too big, so each instantiation covers one axis completely and
// holds the others at a few representative values.
#include <gtest/gtest.h>

#include <set>

#include "collective_case.h"
#include "dtype_ref.h"
#include "shard.h"

namespace ccltest {
namespace {

class CollectiveTest : public ::testing::TestWithParam<Case> {};

TEST_P(CollectiveTest, MatchesSerialReference) { runCase(GetParam()); }

std::string paramName(const ::testing::TestParamInfo<Case>& info) { return caseName(info.param); }

// Drops cases whose names repeat (e.g. the middle and last root of two ranks coincide).
std::vector<Case> unique(const std::vector<Case>& cases) {
  std::set<std::string> seen;
  std::vector<Case> out;
  for (const Case& c : cases)
    if (seen.insert(caseName(c)).second) out.push_back(c);
  return out;
}

struct RanksCount {
  int nranks;
  size_t count;
};

// Every collective x every dtype x (for reductions) every op, at a few shapes.
std::vector<Case> dtypeOpCases() {
  const RanksCount reductionShapes[] = {{3, 7}, {4, 1000}, {8, 31}};
  const RanksCount movementShapes[] = {{3, 7}, {4, 1000}};
  std::vector<Case> cases;
  for (Coll coll : allColls()) {
    for (cclDataType_t t : allDtypes()) {
      if (isReduction(coll)) {
        for (cclRedOp_t op : allOps())
          for (RanksCount s : reductionShapes) cases.push_back({coll, t, op, s.count, s.nranks, false, RootSel::kLast});
      } else {
        for (RanksCount s : movementShapes)
          cases.push_back({coll, t, cclSum, s.count, s.nranks, coll == kBcast, RootSel::kMiddle});
      }
    }
  }
  return unique(cases);
}

// Every collective x every count x ranks 1..8, for float32 and int32 (sum for reductions).
std::vector<Case> countRanksCases() {
  const size_t counts[] = {0, 1, 2, 7, 31, 1000, 4099, 100003};
  std::vector<Case> cases;
  for (cclDataType_t t : {cclFloat32, cclInt32})
    for (Coll coll : allColls())
      for (size_t count : counts)
        for (int n = 1; n <= 8; ++n) cases.push_back({coll, t, cclSum, count, n, coll == kBcast, RootSel::kMiddle});
  return unique(cases);
}

// In place and out of place for every collective that has both forms.
std::vector<Case> inPlaceCases() {
  const size_t counts[] = {1, 31, 4099};
  const int ranks[] = {1, 2, 3, 5, 8};
  std::vector<Case> cases;
  for (Coll coll : allColls()) {
    if (!hasInPlace(coll) || !hasOutOfPlace(coll)) continue;
    for (bool inPlace : {true, false})
      for (int n : ranks)
        for (size_t count : counts) {
          cases.push_back({coll, cclFloat32, cclSum, count, n, inPlace, RootSel::kLast});
          if (isReduction(coll)) cases.push_back({coll, cclBfloat16, cclAvg, count, n, inPlace, RootSel::kFirst});
        }
  }
  return unique(cases);
}

// Every root position of the rooted collectives, in place and out of place.
std::vector<Case> rootCases() {
  const size_t counts[] = {7, 4099};
  const int ranks[] = {2, 3, 4, 7, 8};
  std::vector<Case> cases;
  for (Coll coll : allColls()) {
    if (!isRooted(coll)) continue;
    for (RootSel root : {RootSel::kFirst, RootSel::kMiddle, RootSel::kLast})
      for (int n : ranks)
        for (size_t count : counts)
          for (bool inPlace : {false, true}) {
            if ((inPlace && !hasInPlace(coll)) || (!inPlace && !hasOutOfPlace(coll))) continue;
            const cclDataType_t t = coll == CollKind::kReduce ? cclInt64 : cclFloat32;
            cases.push_back({coll, t, coll == CollKind::kReduce ? cclMax : cclSum, count, n, inPlace, root});
          }
  }
  return unique(cases);
}

// About a million and odd, float32 only: several pipeline chunks and a ragged tail.
std::vector<Case> largeCases() {
  constexpr size_t kLarge = 1048583;
  return {
      {CollKind::kAllReduce, cclFloat32, cclSum, kLarge, 2, false, RootSel::kFirst},
      {CollKind::kAllReduce, cclFloat32, cclSum, kLarge, 5, true, RootSel::kFirst},
      {CollKind::kAllReduce, cclFloat32, cclMax, kLarge, 8, false, RootSel::kFirst},
      {CollKind::kBroadcast, cclFloat32, cclSum, kLarge, 4, false, RootSel::kLast},
      {CollKind::kReduce, cclFloat32, cclSum, kLarge, 3, false, RootSel::kMiddle},
      {CollKind::kAllGather, cclFloat32, cclSum, kLarge, 2, false, RootSel::kFirst},
      {CollKind::kReduceScatter, cclFloat32, cclSum, kLarge, 2, false, RootSel::kFirst},
      {CollKind::kAlltoAll, cclFloat32, cclSum, kLarge, 2, false, RootSel::kFirst},
      {CollKind::kGather, cclFloat32, cclSum, kLarge, 2, false, RootSel::kLast},
      {CollKind::kScatter, cclFloat32, cclSum, kLarge, 2, false, RootSel::kFirst},
      {kSendRecvRing, cclFloat32, cclSum, kLarge, 3, false, RootSel::kFirst},
  };
}

// Buffers 1, 2 and 3 bytes past an aligned address, so inside an element of every dtype
// wider than a byte: every collective and dtype (sum for reductions, and max for integers),
// in place and out of place, exact as aligned.
std::vector<Case> misalignedCases() {
  std::vector<Case> cases;
  for (Coll coll : allColls())
    for (cclDataType_t t : allDtypes())
      for (size_t at : {1, 2, 3})
        for (bool inPlace : {false, true}) {
          if ((inPlace && !hasInPlace(coll)) || (!inPlace && !hasOutOfPlace(coll))) continue;
          for (int n : {1, 3}) {
            Case c{coll, t, cclSum, n == 1 ? size_t{5} : size_t{1000}, n, inPlace, RootSel::kMiddle, at};
            cases.push_back(c);
            if (isReduction(coll) && n == 3) {
              c.op = cclMax;
              cases.push_back(c);
            }
          }
        }
  return unique(cases);
}

// Under a sanitizer or without UCX, one shard of each (harness/shard.h).
INSTANTIATE_TEST_SUITE_P(DtypeOp, CollectiveTest, ::testing::ValuesIn(Shard::fromEnv().of(dtypeOpCases())), paramName);
INSTANTIATE_TEST_SUITE_P(CountRanks, CollectiveTest, ::testing::ValuesIn(Shard::fromEnv().of(countRanksCases())),
                         paramName);
INSTANTIATE_TEST_SUITE_P(InPlace, CollectiveTest, ::testing::ValuesIn(Shard::fromEnv().of(inPlaceCases())), paramName);
INSTANTIATE_TEST_SUITE_P(Roots, CollectiveTest, ::testing::ValuesIn(Shard::fromEnv().of(rootCases())), paramName);
INSTANTIATE_TEST_SUITE_P(Large, CollectiveTest, ::testing::ValuesIn(Shard::fromEnv().of(largeCases())), paramName);
INSTANTIATE_TEST_SUITE_P(Misaligned, CollectiveTest, ::testing::ValuesIn(Shard::fromEnv().of(misalignedCases())),
                         paramName);

}  // namespace
}  // namespace ccltest

namespace ccltest {
namespace {

// The library's collective table and this test's own buffer shapes are written apart: they
// must agree for every collective (on the root, whose buffers are all in use).
TEST(Table, BufferCountsAgreeWithTheTestsShapes) {
  for (Coll coll : allColls()) {
    if (coll.form != Form::kPlain && coll.form != Form::kBcast) continue;
    for (int n : {1, 3, 8}) {
      const Case c{coll, cclFloat32, cclSum, 7, n, false, RootSel::kFirst};
      const auto counts = ccl::coll::bufferCounts(coll.kind, c.count, size_t(n), true);
      EXPECT_EQ(counts.send, sendElems(c)) << collName(coll) << " n=" << n;
      EXPECT_EQ(counts.recv, recvElems(c)) << collName(coll) << " n=" << n;
    }
  }
}

}  // namespace
}  // namespace ccltest
