// Calls that disagree across ranks fail on every rank instead of hanging or corrupting
// memory (DESIGN.md section 6: mismatches are reported as cclInvalidUsage).
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "scoped_env.h"
#include "world.h"

namespace ccltest {
namespace {

TEST(Mismatch, DifferentCountsFailOnEveryRank) {
  ScopedEnv timeout("CCL_TIMEOUT", "5");
  World w(2);
  ASSERT_TRUE(w.ready());
  std::atomic<int> invalidUsage{0};
  w.run([&](int rank, cclComm_t comm) {
    const size_t count = rank == 0 ? 1000 : 2000;
    std::vector<float> in(2000, 1.f), out(2000, 0.f);
    const cclResult_t r = cclAllReduce(in.data(), out.data(), count, cclFloat32, cclSum, comm, nullptr);
    EXPECT_NE(r, cclSuccess) << "rank " << rank << " allreduce with count " << count << " against a peer's "
                             << (rank == 0 ? 2000 : 1000) << " succeeded";
    if (r == cclInvalidUsage) invalidUsage.fetch_add(1);
    std::printf("rank %d (count %zu): %s\n", rank, count, describeResult(r).c_str());
  });
  EXPECT_EQ(invalidUsage.load(), 2) << "every rank should report the mismatch as cclInvalidUsage";
}

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
