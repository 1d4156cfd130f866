// SPDX-License-Identifier: BSD-3-Clause
// The runner itself: concurrency, one persistent thread per rank, what ranks throw, and the
// deadline that ends the process instead of hanging the suite.
#include "rank_threads.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

namespace ccltest {
namespace {

TEST(RankThreads, RunsEveryRankConcurrently) {
  for (int n = 1; n <= 8; ++n) {
    std::atomic<int> arrived{0};
    std::atomic<int> sawAll{0};
    const auto errors = runRanks(n, [&](int) {
      // Only concurrent ranks can all see each other arrive.
      arrived.fetch_add(1);
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (arrived.load() < n && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (arrived.load() == n) sawAll.fetch_add(1);
    });
    EXPECT_EQ(errors.size(), static_cast<size_t>(n));
    EXPECT_EQ(sawAll.load(), n) << n << " ranks";
  }
}

// World relies on it: a rank's communicator is driven by the thread that made it.
TEST(RankThreads, EachRankKeepsItsThreadAcrossRuns) {
  RankThreads pool(3);
  EXPECT_EQ(pool.size(), 3);
  std::vector<std::thread::id> first(3), second(3);
  pool.run([&](int rank) { first[rank] = std::this_thread::get_id(); });
  pool.run([&](int rank) { second[rank] = std::this_thread::get_id(); });
  EXPECT_EQ(first, second);
  EXPECT_NE(first[0], first[1]);
  EXPECT_NE(first[0], std::this_thread::get_id());
}

TEST(RankThreads, CollectsWhatEachRankThrew) {
  RankThreads pool(4);
  auto errors = pool.run([](int rank) {
    if (rank == 1) throw std::runtime_error("boom");
    if (rank == 3) throw 42;
  });
  ASSERT_EQ(errors.size(), 4u);
  EXPECT_FALSE(errors[0]);
  EXPECT_EQ(describeException(errors[1]), "boom");
  EXPECT_FALSE(errors[2]);
  EXPECT_EQ(describeException(errors[3]), "a non-standard exception");
  EXPECT_EQ(describeException(nullptr), "");
  // A later run starts clean.
  errors = pool.run([](int) {});
  for (const auto& e : errors) EXPECT_FALSE(e);
}

TEST(RankThreads, ExpectNoneThrewFailsOncePerThrowingRank) {
  const auto errors = runRanks(3, [](int rank) {
    if (rank != 1) throw std::runtime_error("rank failed");
  });
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ALL_THREADS, &results);
    expectNoneThrew(errors);
  }
  ASSERT_EQ(results.size(), 2);
  EXPECT_NE(std::string(results.GetTestPartResult(0).message()).find("rank 0 threw: rank failed"), std::string::npos);
  EXPECT_NE(std::string(results.GetTestPartResult(1).message()).find("rank 2 threw: rank failed"), std::string::npos);
}

// gtest runs the statement in a re-executed child; the stuck rank ends it with exit code 3.
TEST(RankThreadsDeathTest, StuckRankExitsNamingIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(runRanks(
                  3,
                  [](int rank) {
                    if (rank == 2) std::this_thread::sleep_for(std::chrono::seconds(5));
                  },
                  std::chrono::seconds(1)),
              ::testing::ExitedWithCode(3), "ranks 2 of 3 did not return within 1 s");
}

}  // namespace
}  // namespace ccltest
