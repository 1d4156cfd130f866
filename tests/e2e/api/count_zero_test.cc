// SPDX-License-Identifier: BSD-3-Clause
// Count 0 is legal for every collective and moves nothing, even with NULL buffers.
#include <gtest/gtest.h>

#include <vector>

#include "world.h"

namespace ccltest {
namespace {

void everyCallWithCountZero(int rank, cclComm_t comm, int n) {
  const int root = n - 1, peer = (rank + 1) % n, from = (rank + n - 1) % n;
  for (cclDataType_t t : {cclFloat32, cclInt8, cclFloat8e5m2}) {
    EXPECT_CCL_OK(cclAllReduce(nullptr, nullptr, 0, t, cclSum, comm, nullptr));
    EXPECT_CCL_OK(cclAllReduce(nullptr, nullptr, 0, t, cclAvg, comm, nullptr));
    EXPECT_CCL_OK(cclBroadcast(nullptr, nullptr, 0, t, root, comm, nullptr));
    EXPECT_CCL_OK(cclBcast(nullptr, 0, t, root, comm, nullptr));
    EXPECT_CCL_OK(cclReduce(nullptr, nullptr, 0, t, cclMax, root, comm, nullptr));
    EXPECT_CCL_OK(cclAllGather(nullptr, nullptr, 0, t, comm, nullptr));
    EXPECT_CCL_OK(cclReduceScatter(nullptr, nullptr, 0, t, cclMin, comm, nullptr));
    EXPECT_CCL_OK(cclAlltoAll(nullptr, nullptr, 0, t, comm, nullptr));
    EXPECT_CCL_OK(cclGather(nullptr, nullptr, 0, t, root, comm, nullptr));
    EXPECT_CCL_OK(cclScatter(nullptr, nullptr, 0, t, root, comm, nullptr));
    EXPECT_CCL_OK(cclGroupStart());
    EXPECT_CCL_OK(cclSend(nullptr, 0, t, peer, comm, nullptr));
    EXPECT_CCL_OK(cclRecv(nullptr, 0, t, from, comm, nullptr));
    EXPECT_CCL_OK(cclGroupEnd());
  }
}

TEST(CountZero, EveryCallWithNullBuffers) {
  for (int n : {1, 2, 5}) {
    World& w = World::get(n);
    ASSERT_TRUE(w.ready());
    w.run([n](int rank, cclComm_t comm) { everyCallWithCountZero(rank, comm, n); });
  }
}

TEST(CountZero, InsideAGroupWithRealWork) {
  const int n = 3;
  World& w = World::get(n);
  ASSERT_TRUE(w.ready());
  w.run([](int rank, cclComm_t comm) {
    int32_t in = rank + 1, out = 0;
    EXPECT_CCL_OK(cclGroupStart());
    EXPECT_CCL_OK(cclAllReduce(nullptr, nullptr, 0, cclInt32, cclSum, comm, nullptr));
    EXPECT_CCL_OK(cclAllReduce(&in, &out, 1, cclInt32, cclSum, comm, nullptr));
    EXPECT_CCL_OK(cclAllGather(nullptr, nullptr, 0, cclInt32, comm, nullptr));
    EXPECT_CCL_OK(cclGroupEnd());
    EXPECT_EQ(out, 6);
  });
}

TEST(CountZero, NonNullBuffersAreNotTouched) {
  World& w = World::get(2);
  ASSERT_TRUE(w.ready());
  w.run([](int rank, cclComm_t comm) {
    std::vector<int32_t> send(4, 7 + rank), recv(4, -5);
    EXPECT_CCL_OK(cclAllReduce(send.data(), recv.data(), 0, cclInt32, cclSum, comm, nullptr));
    EXPECT_CCL_OK(cclAllGather(send.data(), recv.data(), 0, cclInt32, comm, nullptr));
    EXPECT_CCL_OK(cclBroadcast(send.data(), recv.data(), 0, cclInt32, 0, comm, nullptr));
    for (int32_t v : recv) EXPECT_EQ(v, -5);
  });
}

}  // namespace
}  // namespace ccltest
