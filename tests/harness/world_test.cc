// SPDX-License-Identifier: BSD-3-Clause
// The harness itself: every rank runs, concurrently, on its own communicator.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "world.h"

namespace ccltest {
namespace {

TEST(World, RunsEveryRankConcurrentlyOnItsOwnCommunicator) {
  for (int n = 1; n <= 8; ++n) {
    World& w = World::get(n);
    ASSERT_TRUE(w.ready()) << n << " ranks";
    std::atomic<int> arrived{0};
    std::atomic<int> sawAll{0};
    w.run([&](int rank, cclComm_t comm) {
      EXPECT_EQ(comm, w.comm(rank));
      int count = -1, me = -1;
      EXPECT_CCL_OK(cclCommCount(comm, &count));
      EXPECT_CCL_OK(cclCommUserRank(comm, &me));
      EXPECT_EQ(count, n);
      EXPECT_EQ(me, rank);
      // Only concurrent ranks can all see each other arrive.
      arrived.fetch_add(1);
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (arrived.load() < n && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (arrived.load() == n) sawAll.fetch_add(1);
    });
    EXPECT_EQ(sawAll.load(), n) << n << " ranks";
  }
}

TEST(World, CachedWorldsAreReused) {
  World& a = World::get(4);
  World& b = World::get(4);
  EXPECT_EQ(&a, &b);
  std::set<cclComm_t> comms;
  for (int r = 0; r < 4; ++r) comms.insert(a.comm(r));
  EXPECT_EQ(comms.size(), 4u);
}

TEST(World, ExceptionInRankBecomesFailureNotCrash) {
  World w(2);
  ASSERT_TRUE(w.ready());
  int failuresSeen = 0;
  {
    ::testing::TestPartResultArray results;
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ALL_THREADS, &results);
    w.run([](int rank, cclComm_t) {
      if (rank == 1) throw std::runtime_error("boom");
    });
    failuresSeen = results.size();
  }
  EXPECT_EQ(failuresSeen, 1);
}

// A stuck rank ends the process with a failure instead of hanging the suite (gtest runs the
// statement in a re-executed child).
TEST(WorldDeathTest, StuckRankFailsInsteadOfHanging) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        World w(2);
        w.run(
            [](int rank, cclComm_t) {
              if (rank == 1) std::this_thread::sleep_for(std::chrono::seconds(5));
            },
            std::chrono::seconds(1));
      },
      ::testing::ExitedWithCode(3), "ranks 1 of 2 did not return within 1 s");
}

TEST(WorldDeathTest, StuckCallFailsInsteadOfHanging) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(runWithDeadline([] { std::this_thread::sleep_for(std::chrono::seconds(5)); }, "a sleeping call",
                              std::chrono::seconds(1)),
              ::testing::ExitedWithCode(3), "a sleeping call did not return within 1 s");
}

}  // namespace
}  // namespace ccltest
