// SPDX-License-Identifier: BSD-3-Clause
// Calls that disagree across ranks fail on every rank instead of hanging or corrupting
// memory (DESIGN.md section 6: mismatches are reported as cclInvalidUsage).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <vector>

#include "scoped_env.h"
#include "world.h"

namespace ccltest {
namespace {

// Large calls exchange a digest of the call; the smallest go in one round to every rank
// and are caught by size. Either way every rank fails with cclInvalidUsage, long before
// the timeout.
void expectCountMismatchFailsEverywhere(int n, size_t count, size_t otherCount) {
  ScopedEnv timeout("CCL_TIMEOUT", "30");
  World w(n);
  ASSERT_TRUE(w.ready());
  std::atomic<int> invalidUsage{0};
  const auto start = std::chrono::steady_clock::now();
  w.run([&](int rank, cclComm_t comm) {
    const size_t mine = rank == 0 ? otherCount : count;
    std::vector<float> in(std::max(count, otherCount), 1.f), out(in.size(), 0.f);
    const cclResult_t r = cclAllReduce(in.data(), out.data(), mine, cclFloat32, cclSum, comm, nullptr);
    if (r == cclInvalidUsage) invalidUsage.fetch_add(1);
    std::printf("rank %d (count %zu): %s\n", rank, mine, describeResult(r).c_str());
  });
  EXPECT_EQ(invalidUsage.load(), n) << "every rank should report the mismatch as cclInvalidUsage";
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(25)) << "a rank waited for the timeout";
}

TEST(Mismatch, DifferentCountsFailOnEveryRank) { expectCountMismatchFailsEverywhere(2, 2000, 1000); }
TEST(Mismatch, DifferentSmallCountsFailOnEveryRank) { expectCountMismatchFailsEverywhere(3, 20, 10); }
TEST(Mismatch, OneRankOfFourDiffersInALargeCall) { expectCountMismatchFailsEverywhere(4, 1 << 18, (1 << 18) + 1); }

TEST(Mismatch, SendLongerThanRecvFails) {
  ScopedEnv timeout("CCL_TIMEOUT", "5");
  World w(2);
  ASSERT_TRUE(w.ready());
  w.run([&](int rank, cclComm_t comm) {
    std::vector<int32_t> buf(4096, rank);
    const cclResult_t r = rank == 0 ? cclSend(buf.data(), 4096, cclInt32, 1, comm, nullptr)
                                    : cclRecv(buf.data(), 1024, cclInt32, 0, comm, nullptr);
    if (rank == 1) {
      EXPECT_NE(r, cclSuccess) << "a receive of 1024 elements accepted a 4096-element message";
      for (size_t j = 1024; j < buf.size(); ++j)
        ASSERT_EQ(buf[j], 1) << "the receive wrote past its count at element " << j;
    }
    std::printf("rank %d: %s\n", rank, describeResult(r).c_str());
  });
}

}  // namespace
}  // namespace ccltest
