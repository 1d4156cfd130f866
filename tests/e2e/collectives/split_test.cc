// SPDX-License-Identifier: BSD-3-Clause
// cclCommSplit: colors pick the members, keys order them, CCL_SPLIT_NOCOLOR opts out; the
// new communicators then run collectives of their own.
#include <gtest/gtest.h>

#include <vector>

#include "world.h"

namespace ccltest {
namespace {

// Checks the sub-communicator of one rank: size, rank, order of members (through an
// allgather of parent ranks) and an allreduce over the members.
void checkSubComm(cclComm_t sub, int parentRank, const std::vector<int>& members) {
  const int n = static_cast<int>(members.size());
  int count = -1, me = -1;
  EXPECT_CCL_OK(cclCommCount(sub, &count));
  EXPECT_CCL_OK(cclCommUserRank(sub, &me));
  EXPECT_EQ(count, n) << "parent rank " << parentRank;
  int expectedRank = -1;
  for (int i = 0; i < n; ++i)
    if (members[i] == parentRank) expectedRank = i;
  EXPECT_EQ(me, expectedRank) << "parent rank " << parentRank;

  std::vector<int32_t> order(n, -1);
  const int32_t mine = parentRank;
  EXPECT_CCL_OK(cclAllGather(&mine, order.data(), 1, cclInt32, sub, nullptr));
  for (int i = 0; i < n; ++i)
    EXPECT_EQ(order[i], members[i]) << "member " << i << " seen by parent rank " << parentRank;

  const size_t len = 1003;
  std::vector<double> in(len), out(len, -1);
  for (size_t j = 0; j < len; ++j) in[j] = parentRank * 1000.0 + static_cast<double>(j);
  EXPECT_CCL_OK(cclAllReduce(in.data(), out.data(), len, cclFloat64, cclSum, sub, nullptr));
  double memberSum = 0;
  for (int m : members) memberSum += m * 1000.0;
  size_t bad = 0;
  for (size_t j = 0; j < len; ++j)
    if (out[j] != memberSum + n * static_cast<double>(j)) ++bad;
  EXPECT_EQ(bad, 0u) << "allreduce on the sub-communicator of parent rank " << parentRank;
}

class SplitTest : public ::testing::TestWithParam<int> {};

TEST_P(SplitTest, EvenOddColorsWithReversedKeys) {
  const int n = GetParam();
  World& w = World::get(n);
  ASSERT_TRUE(w.ready());
  w.run([&](int rank, cclComm_t comm) {
    cclComm_t sub = nullptr;
    const cclResult_t r = cclCommSplit(comm, rank % 2, n - rank, &sub, nullptr);
    ASSERT_EQ(r, cclSuccess) << "rank " << rank << ": " << describeResult(r);
    ASSERT_NE(sub, nullptr) << "rank " << rank;
    std::vector<int> members;  // same color, descending parent rank because keys reverse
    for (int p = n - 1; p >= 0; --p)
      if (p % 2 == rank % 2) members.push_back(p);
    checkSubComm(sub, rank, members);
    EXPECT_CCL_OK(cclCommDestroy(sub));
  });
}

TEST_P(SplitTest, NoColorGivesNullAndEqualKeysKeepParentOrder) {
  const int n = GetParam();
  World& w = World::get(n);
  ASSERT_TRUE(w.ready());
  const int outside = n / 2;
  w.run([&](int rank, cclComm_t comm) {
    cclComm_t sub = reinterpret_cast<cclComm_t>(&w);  // must be overwritten
    const int color = rank == outside ? CCL_SPLIT_NOCOLOR : 7;
    const cclResult_t r = cclCommSplit(comm, color, 0, &sub, nullptr);
    ASSERT_EQ(r, cclSuccess) << "rank " << rank << ": " << describeResult(r);
    if (rank == outside) {
      EXPECT_EQ(sub, nullptr) << "CCL_SPLIT_NOCOLOR must give a NULL communicator";
      return;
    }
    ASSERT_NE(sub, nullptr);
    std::vector<int> members;
    for (int p = 0; p < n; ++p)
      if (p != outside) members.push_back(p);
    checkSubComm(sub, rank, members);
    EXPECT_CCL_OK(cclCommDestroy(sub));
  });
}

INSTANTIATE_TEST_SUITE_P(Split, SplitTest, ::testing::Values(2, 3, 4, 5, 8),
                         [](const ::testing::TestParamInfo<int>& i) {
                           std::string name = "r";  // appended: GCC 12 warns falsely on "r" + string
                           return name.append(std::to_string(i.param));
                         });

// A split of a split, then both levels used in turn.
TEST(Split, SplitOfSplitAndParentStillWorks) {
  const int n = 8;
  World& w = World::get(n);
  ASSERT_TRUE(w.ready());
  w.run([&](int rank, cclComm_t comm) {
    cclComm_t half = nullptr, quarter = nullptr;
    ASSERT_CCL_OK(cclCommSplit(comm, rank / 4, rank, &half, nullptr));
    ASSERT_CCL_OK(cclCommSplit(half, (rank % 4) / 2, 0, &quarter, nullptr));
    std::vector<int> members;
    for (int p = 0; p < n; ++p)
      if (p / 2 == rank / 2) members.push_back(p);
    checkSubComm(quarter, rank, members);
    std::vector<int> all(n);
    for (int p = 0; p < n; ++p) all[p] = p;
    checkSubComm(comm, rank, all);
    EXPECT_CCL_OK(cclCommDestroy(quarter));
    EXPECT_CCL_OK(cclCommDestroy(half));
  });
}

}  // namespace
}  // namespace ccltest
