// SPDX-License-Identifier: BSD-3-Clause
// cclCommShrink: the ranks that go on make a communicator without the lost ones, with no
// message over the parent (whose ring a lost rank breaks); ranks that disagree on who is
// gone form none; a listed rank that never comes is named. A lost rank is one whose
// communicator was aborted: its rendezvous listener closes, as a dead process's does.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "rank_threads.h"
#include "scoped_env.h"
#include "world.h"

namespace ccltest {
namespace {

// Makes n communicators of one id, rank r on host hosts[r] (NULL: the default identity).
std::vector<cclComm_t> makeRanks(int n, const std::vector<const char*>& hosts = {}) {
  cclUniqueId id{};
  EXPECT_CCL_OK(cclGetUniqueId(&id));
  std::vector<cclComm_t> comms(n, nullptr);
  expectNoneThrew(runRanks(n, [&](int r) {
    cclConfig_t config = CCL_CONFIG_INITIALIZER;
    config.hostId = hosts.empty() ? nullptr : hosts[static_cast<size_t>(r)];
    config.commName = "shrink-parent";
    ASSERT_CCL_OK(cclCommInitRankConfig(&comms[static_cast<size_t>(r)], n, id, r, &config));
  }));
  return comms;
}

void destroyAll(std::vector<cclComm_t>& comms) {
  for (cclComm_t& c : comms) {
    if (c) EXPECT_CCL_OK(cclCommDestroy(c));
    c = nullptr;
  }
}

// The sum of (parent rank + 1) over the ranks of `comm`, by an allreduce on it.
int32_t sumOfParentRanks(cclComm_t comm, int parentRank) {
  int32_t mine = parentRank + 1, sum = -1;
  EXPECT_CCL_OK(cclAllReduce(&mine, &sum, 1, cclInt32, cclSum, comm, nullptr));
  return sum;
}

TEST(Shrink, TheRanksThatGoOnWorkWithoutTheLostOne) {
  ScopedEnv timeout("CCL_TIMEOUT", "30");
  // Two nodes; rank 1 is lost, so node 0 keeps rank 0 alone.
  std::vector<cclComm_t> comms = makeRanks(4, {"shrink-a", "shrink-a", "shrink-b", "shrink-b"});
  ASSERT_CCL_OK(cclCommAbort(comms[1]));
  comms[1] = nullptr;
  std::vector<cclComm_t> shrunk(4, nullptr);
  std::vector<int32_t> sums(4, -1);
  expectNoneThrew(runRanks(4, [&](int r) {
    if (r == 1) return;
    // The parent fails its calls now (the lost rank's abort reached the others).
    int32_t x = 1, y = 0;
    EXPECT_NE(cclAllReduce(&x, &y, 1, cclInt32, cclSum, comms[static_cast<size_t>(r)], nullptr), cclSuccess);
    const int exclude[] = {1};
    cclComm_t& next = shrunk[static_cast<size_t>(r)];
    ASSERT_CCL_OK(cclCommShrink(comms[static_cast<size_t>(r)], exclude, 1, &next, nullptr, CCL_SHRINK_DEFAULT));
    ASSERT_NE(next, nullptr);
    sums[static_cast<size_t>(r)] = sumOfParentRanks(next, r);
  }));
  const int newRankOf[] = {0, -1, 1, 2};
  for (int r : {0, 2, 3}) {
    cclComm_t next = shrunk[static_cast<size_t>(r)];
    ASSERT_NE(next, nullptr) << "rank " << r;
    int count = 0, rank = -1, node = -1, nnodes = 0, localRank = -1, localRanks = 0;
    EXPECT_CCL_OK(cclCommCount(next, &count));
    EXPECT_CCL_OK(cclCommUserRank(next, &rank));
    EXPECT_EQ(count, 3);
    EXPECT_EQ(rank, newRankOf[r]) << "survivors keep their order";
    // The nodes are the parent's restricted to the survivors: {0} and {2, 3}.
    EXPECT_CCL_OK(cclCommTopology(next, &node, &nnodes, &localRank, &localRanks));
    EXPECT_EQ(nnodes, 2);
    EXPECT_EQ(localRanks, r == 0 ? 1 : 2) << "rank " << r;
    EXPECT_EQ(sums[static_cast<size_t>(r)], 1 + 3 + 4) << "rank " << r;
  }
  destroyAll(shrunk);
  destroyAll(comms);
}

TEST(Shrink, AliveFindsTheRanksWhoseProcessAnswersAndAbortRevokesFirst) {
  ScopedEnv timeout("CCL_TIMEOUT", "30");
  std::vector<cclComm_t> comms = makeRanks(3);
  ASSERT_CCL_OK(cclCommAbort(comms[0]));  // the lowest rank: the new root is rank 1
  comms[0] = nullptr;
  std::vector<cclComm_t> shrunk(3, nullptr);
  std::vector<int32_t> sums(3, -1);
  expectNoneThrew(runRanks(3, [&](int r) {
    if (r == 0) return;
    cclComm_t& next = shrunk[static_cast<size_t>(r)];
    ASSERT_CCL_OK(
        cclCommShrink(comms[static_cast<size_t>(r)], nullptr, 0, &next, nullptr, CCL_SHRINK_ALIVE | CCL_SHRINK_ABORT));
    sums[static_cast<size_t>(r)] = sumOfParentRanks(next, r);
    // CCL_SHRINK_ABORT revoked the parent on this rank.
    int32_t x = 1, y = 0;
    EXPECT_EQ(cclAllReduce(&x, &y, 1, cclInt32, cclSum, comms[static_cast<size_t>(r)], nullptr), cclInvalidUsage);
  }));
  for (int r : {1, 2}) {
    int count = 0;
    ASSERT_NE(shrunk[static_cast<size_t>(r)], nullptr);
    EXPECT_CCL_OK(cclCommCount(shrunk[static_cast<size_t>(r)], &count));
    EXPECT_EQ(count, 2);
    EXPECT_EQ(sums[static_cast<size_t>(r)], 2 + 3);
  }
  destroyAll(shrunk);
  destroyAll(comms);
}

// A shrunk communicator shrinks again (the second one's own listeners), and the parent can be
// shrunk twice: each shrink of a communicator is told apart from the one before.
TEST(Shrink, ShrinkingTwiceAndShrinkingAShrunkCommunicator) {
  ScopedEnv timeout("CCL_TIMEOUT", "30");
  std::vector<cclComm_t> comms = makeRanks(4);
  std::vector<cclComm_t> first(4, nullptr), second(4, nullptr), again(4, nullptr);
  std::vector<int32_t> sums(4, -1), sumsAgain(4, -1);
  expectNoneThrew(runRanks(4, [&](int r) {
    if (r == 3) return;  // left out, alive: the others drop it
    const int drop3[] = {3};
    ASSERT_CCL_OK(cclCommShrink(comms[static_cast<size_t>(r)], drop3, 1, &first[static_cast<size_t>(r)], nullptr, 0));
    if (r == 2) return;
    const int drop2[] = {2};  // rank 2 of `first` is parent rank 2
    ASSERT_CCL_OK(cclCommShrink(first[static_cast<size_t>(r)], drop2, 1, &second[static_cast<size_t>(r)], nullptr, 0));
    sums[static_cast<size_t>(r)] = sumOfParentRanks(second[static_cast<size_t>(r)], r);
    const int drop23[] = {2, 3};
    ASSERT_CCL_OK(cclCommShrink(comms[static_cast<size_t>(r)], drop23, 2, &again[static_cast<size_t>(r)], nullptr, 0));
    sumsAgain[static_cast<size_t>(r)] = sumOfParentRanks(again[static_cast<size_t>(r)], r);
  }));
  for (int r : {0, 1}) {
    EXPECT_EQ(sums[static_cast<size_t>(r)], 1 + 2);
    EXPECT_EQ(sumsAgain[static_cast<size_t>(r)], 1 + 2);
  }
  destroyAll(again);
  destroyAll(second);
  destroyAll(first);
  destroyAll(comms);
}

// Ranks meeting at the same root with different lists: every one of them fails.
TEST(Shrink, ListsThatDisagreeFailEveryRankThatMeets) {
  ScopedEnv timeout("CCL_TIMEOUT", "30");
  std::vector<cclComm_t> comms = makeRanks(4);
  std::vector<cclResult_t> got(4, cclSuccess);
  std::vector<std::string> why(4);
  expectNoneThrew(runRanks(4, [&](int r) {
    if (r == 1) return;  // alive, but dropped by some
    // Ranks 0 and 2 drop rank 1; rank 3 drops rank 2 and keeps rank 1.
    const int drop1[] = {1}, drop2[] = {2};
    cclComm_t next = nullptr;
    got[static_cast<size_t>(r)] =
        cclCommShrink(comms[static_cast<size_t>(r)], r == 3 ? drop2 : drop1, 1, &next, nullptr, 0);
    why[static_cast<size_t>(r)] = cclGetLastError(nullptr);
    EXPECT_EQ(next, nullptr);
    if (next) cclCommDestroy(next);
  }));
  for (int r : {0, 2, 3}) {
    EXPECT_EQ(got[static_cast<size_t>(r)], cclInvalidUsage) << "rank " << r << ": " << why[static_cast<size_t>(r)];
    EXPECT_NE(why[static_cast<size_t>(r)].find("disagree"), std::string::npos) << why[static_cast<size_t>(r)];
  }
  destroyAll(comms);
}

// The same when the lists differ in length too: a hello of another size fails them all at
// once (it is not refused alone while the others wait for CCL_TIMEOUT).
TEST(Shrink, ListsOfDifferentLengthsFailEveryRankAtOnce) {
  ScopedEnv timeout("CCL_TIMEOUT", "30");
  std::vector<cclComm_t> comms = makeRanks(4);
  std::vector<cclResult_t> got(4, cclSuccess);
  expectNoneThrew(runRanks(4, [&](int r) {
    if (r == 3) return;
    // Ranks 0 and 1 keep {0, 1, 2}; rank 2 keeps {0, 2}: one root, two sizes.
    const int drop3[] = {3}, drop13[] = {1, 3};
    cclComm_t next = nullptr;
    const auto start = std::chrono::steady_clock::now();
    got[static_cast<size_t>(r)] =
        cclCommShrink(comms[static_cast<size_t>(r)], r == 2 ? drop13 : drop3, r == 2 ? 2 : 1, &next, nullptr, 0);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 20.0)
        << "rank " << r << " waited for the timeout";
    EXPECT_EQ(next, nullptr);
  }));
  for (int r : {0, 1, 2}) EXPECT_EQ(got[static_cast<size_t>(r)], cclInvalidUsage) << "rank " << r;
  destroyAll(comms);
}

// Two groups that each drop the other meet at different roots: never do both form, and a
// group that does not form fails on every one of its ranks.
TEST(Shrink, TwoGroupsThatDropEachOtherNeverBothForm) {
  ScopedEnv timeout("CCL_TIMEOUT", "30");
  for (int trial = 0; trial < 3; ++trial) {
    std::vector<cclComm_t> comms = makeRanks(4);
    std::vector<cclResult_t> got(4, cclSuccess);
    std::vector<cclComm_t> next(4, nullptr);
    expectNoneThrew(runRanks(4, [&](int r) {
      const int dropHigh[] = {2, 3}, dropLow[] = {0, 1};
      got[static_cast<size_t>(r)] = cclCommShrink(comms[static_cast<size_t>(r)], r < 2 ? dropHigh : dropLow, 2,
                                                  &next[static_cast<size_t>(r)], nullptr, 0);
    }));
    const bool low = got[0] == cclSuccess && got[1] == cclSuccess;
    const bool high = got[2] == cclSuccess && got[3] == cclSuccess;
    EXPECT_FALSE(low && high) << "trial " << trial << ": both groups formed a communicator";
    EXPECT_EQ(got[0], got[1]) << "trial " << trial << ": the low group's ranks ended differently";
    EXPECT_EQ(got[2], got[3]) << "trial " << trial << ": the high group's ranks ended differently";
    std::printf("trial %d: low group %s, high group %s\n", trial, cclGetErrorString(got[0]), cclGetErrorString(got[2]));
    destroyAll(next);
    destroyAll(comms);
  }
}

// A shrink that failed is retried on the same parent: the retry forms, whatever the failed
// attempt's rendezvous (still serving on the root's listener, or failed and answering with
// its error) is doing. Three ways the first attempt fails: the lists disagree; a listed rank
// is lost, so the others give up at their config's timeout while the root's rendezvous
// would wait for CCL_TIMEOUT; a rank comes to the first attempt only after the others gave
// it up (its hello reaches the root's retry, or the first attempt's rendezvous).
TEST(Shrink, ARetriedShrinkFormsOnceTheRanksAgree) {
  ScopedEnv timeout("CCL_TIMEOUT", "30");
  enum Failure { kDisagree, kLostRank, kLateRank };
  for (Failure failure : {kDisagree, kLostRank, kLateRank, kDisagree, kLostRank, kLateRank}) {
    std::vector<cclComm_t> comms = makeRanks(4);
    if (failure == kLostRank) {
      ASSERT_CCL_OK(cclCommAbort(comms[3]));
      comms[3] = nullptr;
    }
    const std::vector<int> go = failure == kLostRank ? std::vector<int>{0, 2} : std::vector<int>{0, 2, 3};
    std::vector<cclResult_t> first(4, cclSuccess), second(4, cclInternalError);
    std::vector<std::string> why(4);
    std::vector<cclComm_t> next(4, nullptr);
    std::vector<int32_t> sums(4, -1);
    std::atomic<int> gaveUp{0};
    expectNoneThrew(runRanks(4, [&](int r) {
      if (std::find(go.begin(), go.end(), r) == go.end()) return;  // rank 1 is alive but dropped
      const size_t i = static_cast<size_t>(r);
      const int drop1[] = {1}, drop2[] = {2}, drop13[] = {1, 3};
      cclConfig_t quick = CCL_CONFIG_INITIALIZER;
      quick.timeoutMs = 500;
      if (failure == kDisagree) {
        // Rank 3 drops rank 2 and keeps rank 1: every rank that meets fails.
        first[i] = cclCommShrink(comms[i], r == 3 ? drop2 : drop1, 1, &next[i], nullptr, 0);
      } else if (failure == kLostRank) {
        first[i] = cclCommShrink(comms[i], drop1, 1, &next[i], &quick, 0);  // waits for rank 3
      } else if (r == 3) {
        while (gaveUp.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        first[i] = cclCommShrink(comms[i], drop1, 1, &next[i], nullptr, 0);
      } else {
        first[i] = cclCommShrink(comms[i], drop1, 1, &next[i], &quick, 0);  // rank 3 is late
        gaveUp.fetch_add(1);
      }
      if (next[i]) cclCommDestroy(next[i]);
      next[i] = nullptr;
      second[i] = failure == kLostRank ? cclCommShrink(comms[i], drop13, 2, &next[i], nullptr, 0)
                                       : cclCommShrink(comms[i], drop1, 1, &next[i], nullptr, 0);
      why[i] = cclGetLastError(nullptr);
      if (next[i]) sums[i] = sumOfParentRanks(next[i], r);
    }));
    int32_t expected = 0;
    for (int r : go) expected += r + 1;
    for (int r : go) {
      const size_t i = static_cast<size_t>(r);
      EXPECT_NE(first[i], cclSuccess) << "case " << failure << " rank " << r;
      EXPECT_EQ(second[i], cclSuccess) << "case " << failure << " rank " << r << ": the retry failed: " << why[i];
      EXPECT_EQ(sums[i], expected) << "case " << failure << " rank " << r;
    }
    destroyAll(next);
    destroyAll(comms);
  }
}

// A listed rank that never calls: the others fail after CCL_TIMEOUT, and the error names it
// by its rank in the parent.
TEST(Shrink, AListedRankThatNeverComesIsNamed) {
  ScopedEnv timeout("CCL_TIMEOUT", "2");
  std::vector<cclComm_t> comms = makeRanks(4);
  ASSERT_CCL_OK(cclCommAbort(comms[1]));
  comms[1] = nullptr;
  std::vector<cclResult_t> got(4, cclSuccess);
  std::vector<std::string> why(4);
  expectNoneThrew(runRanks(4, [&](int r) {
    if (r == 1 || r == 3) return;  // rank 1 is lost; rank 3 is listed but never calls
    const int drop[] = {1};
    cclComm_t next = nullptr;
    got[static_cast<size_t>(r)] = cclCommShrink(comms[static_cast<size_t>(r)], drop, 1, &next, nullptr, 0);
    why[static_cast<size_t>(r)] = cclGetLastError(nullptr);
    EXPECT_EQ(next, nullptr);
  }));
  for (int r : {0, 2}) {
    EXPECT_EQ(got[static_cast<size_t>(r)], cclSystemError) << why[static_cast<size_t>(r)];
    EXPECT_NE(why[static_cast<size_t>(r)].find("rank 3 of the parent communicator never joined"), std::string::npos)
        << "rank " << r << ": the error names the rank that never came: " << why[static_cast<size_t>(r)];
  }
  destroyAll(comms);
}

TEST(Shrink, BadArguments) {
  std::vector<cclComm_t> comms = makeRanks(2);
  expectNoneThrew(runRanks(2, [&](int r) {
    cclComm_t comm = comms[static_cast<size_t>(r)];
    cclComm_t next = reinterpret_cast<cclComm_t>(0x1);
    const int self[] = {r}, outside[] = {2}, twice[] = {1 - r, 1 - r}, other[] = {1 - r};
    EXPECT_EQ(cclCommShrink(comm, self, 1, &next, nullptr, 0), cclInvalidArgument);
    EXPECT_EQ(next, nullptr) << "a failed shrink leaves NULL";
    EXPECT_EQ(cclCommShrink(comm, outside, 1, &next, nullptr, 0), cclInvalidArgument);
    EXPECT_EQ(cclCommShrink(comm, twice, 2, &next, nullptr, 0), cclInvalidArgument);
    EXPECT_EQ(cclCommShrink(comm, nullptr, 1, &next, nullptr, 0), cclInvalidArgument);
    EXPECT_EQ(cclCommShrink(comm, other, -1, &next, nullptr, 0), cclInvalidArgument);
    EXPECT_EQ(cclCommShrink(comm, other, 1, nullptr, nullptr, 0), cclInvalidArgument);
    EXPECT_EQ(cclCommShrink(comm, other, 1, &next, nullptr, 0x2), cclInvalidArgument);
    EXPECT_EQ(cclCommShrink(comm, other, 1, &next, nullptr, CCL_SHRINK_ALIVE), cclInvalidArgument);
    EXPECT_EQ(cclCommShrink(nullptr, other, 1, &next, nullptr, 0), cclInvalidArgument);
    // The parent is still whole: nothing above touched it.
    int32_t x = 1, y = 0;
    EXPECT_CCL_OK(cclAllReduce(&x, &y, 1, cclInt32, cclSum, comm, nullptr));
    EXPECT_EQ(y, 2);
  }));
  destroyAll(comms);
}

}  // namespace
}  // namespace ccltest
