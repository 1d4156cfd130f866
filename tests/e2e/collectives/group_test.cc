// SPDX-License-Identifier: BSD-3-Clause
// Group semantics: one thread driving several communicators, nesting, several operations
// queued on one communicator, and point-to-point exchanges that only a group can complete.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "world.h"

namespace ccltest {
namespace {

// Element j of rank r's data: small integers, so float sums are exact.
float value(int r, size_t j) { return static_cast<float>(static_cast<int>((j * 7 + r * 3) % 23) - 11); }

float sumOverRanks(int n, size_t j) {
  float s = 0;
  for (int r = 0; r < n; ++r) s += value(r, j);
  return s;
}

// Compares a float buffer with want(j); reports the first mismatch only.
template <typename Want>
void expectFloats(const std::vector<float>& got, Want want, const std::string& what) {
  size_t bad = 0, first = 0;
  for (size_t j = 0; j < got.size(); ++j)
    if (got[j] != want(j) && bad++ == 0) first = j;
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " wrong, first at " << first << ": got " << (bad ? got[first] : 0.f)
                     << " want " << (bad ? want(first) : 0.f);
}

class InitAllGroupTest : public ::testing::TestWithParam<int> {};

TEST_P(InitAllGroupTest, OneThreadDrivesEveryCommunicatorInOneGroup) {
  const int n = GetParam();
  const size_t count = 10007;
  runWithDeadline(
      [&] {
        std::vector<cclComm_t> comms(n, nullptr);
        ASSERT_CCL_OK(cclCommInitAll(comms.data(), n, nullptr));
        std::vector<std::vector<float>> send(n, std::vector<float>(count)), recv(n, std::vector<float>(count, -99));
        for (int r = 0; r < n; ++r)
          for (size_t j = 0; j < count; ++j) send[r][j] = value(r, j);
        for (int r = 0; r < n; ++r) {
          int rank = -1, size = -1;
          EXPECT_CCL_OK(cclCommUserRank(comms[r], &rank));
          EXPECT_CCL_OK(cclCommCount(comms[r], &size));
          EXPECT_EQ(rank, r);
          EXPECT_EQ(size, n);
        }
        EXPECT_CCL_OK(cclGroupStart());
        for (int r = 0; r < n; ++r)
          EXPECT_CCL_OK(cclAllReduce(send[r].data(), recv[r].data(), count, cclFloat32, cclSum, comms[r], nullptr));
        EXPECT_CCL_OK(cclGroupEnd());
        for (int r = 0; r < n; ++r)
          expectFloats(
              recv[r], [&](size_t j) { return sumOverRanks(n, j); }, std::string("comm ") + std::to_string(r));
        for (cclComm_t c : comms)
          if (c) EXPECT_CCL_OK(cclCommDestroy(c));
      },
      "cclCommInitAll + grouped allreduce");
}

INSTANTIATE_TEST_SUITE_P(Group, InitAllGroupTest, ::testing::Values(1, 2, 3, 4, 8),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return std::string("r") + std::to_string(i.param);
                         });

TEST(Group, NestedGroupsRunAtTheOutermostEnd) {
  const int n = 4;
  const size_t count = 1001;
  World& w = World::get(n);
  ASSERT_TRUE(w.ready());
  w.run([&](int rank, cclComm_t comm) {
    std::vector<float> send(count), sum(count, -99), ring(count, -99), bcast(count);
    for (size_t j = 0; j < count; ++j) send[j] = bcast[j] = value(rank, j);
    EXPECT_CCL_OK(cclGroupStart());
    EXPECT_CCL_OK(cclGroupStart());
    EXPECT_CCL_OK(cclAllReduce(send.data(), sum.data(), count, cclFloat32, cclSum, comm, nullptr));
    EXPECT_CCL_OK(cclGroupEnd());
    // Only the outermost cclGroupEnd runs the queued work.
    EXPECT_EQ(sum[0], -99) << "rank " << rank << ": the allreduce ran at an inner cclGroupEnd";
    EXPECT_CCL_OK(cclSend(send.data(), count, cclFloat32, (rank + 1) % n, comm, nullptr));
    EXPECT_CCL_OK(cclRecv(ring.data(), count, cclFloat32, (rank + n - 1) % n, comm, nullptr));
    EXPECT_CCL_OK(cclGroupStart());
    EXPECT_CCL_OK(cclBcast(bcast.data(), count, cclFloat32, 2, comm, nullptr));
    EXPECT_CCL_OK(cclGroupEnd());
    EXPECT_CCL_OK(cclGroupEnd());
    expectFloats(
        sum, [&](size_t j) { return sumOverRanks(n, j); }, std::string("allreduce rank ") + std::to_string(rank));
    expectFloats(
        ring, [&](size_t j) { return value((rank + n - 1) % n, j); }, std::string("ring rank ") + std::to_string(rank));
    expectFloats(
        bcast, [&](size_t j) { return value(2, j); }, std::string("bcast rank ") + std::to_string(rank));
  });
}

TEST(Group, SeveralCollectivesQueuedOnOneCommunicator) {
  const int n = 5;
  const size_t count = 4099;
  World& w = World::get(n);
  ASSERT_TRUE(w.ready());
  w.run([&](int rank, cclComm_t comm) {
    std::vector<float> a(count), sum(count), maxv(count), gathered(count * n), scattered(count), rsIn(count * n);
    for (size_t j = 0; j < count; ++j) a[j] = value(rank, j);
    for (size_t j = 0; j < count * n; ++j) rsIn[j] = value(rank, j);
    std::vector<float> bcast = a;
    EXPECT_CCL_OK(cclGroupStart());
    EXPECT_CCL_OK(cclAllReduce(a.data(), sum.data(), count, cclFloat32, cclSum, comm, nullptr));
    EXPECT_CCL_OK(cclAllReduce(a.data(), maxv.data(), count, cclFloat32, cclMax, comm, nullptr));
    EXPECT_CCL_OK(cclBroadcast(bcast.data(), bcast.data(), count, cclFloat32, n - 1, comm, nullptr));
    EXPECT_CCL_OK(cclAllGather(a.data(), gathered.data(), count, cclFloat32, comm, nullptr));
    EXPECT_CCL_OK(cclReduceScatter(rsIn.data(), scattered.data(), count, cclFloat32, cclSum, comm, nullptr));
    EXPECT_CCL_OK(cclGroupEnd());
    const std::string who = std::string(" rank ") + std::to_string(rank);
    expectFloats(
        sum, [&](size_t j) { return sumOverRanks(n, j); }, "sum" + who);
    expectFloats(
        maxv,
        [&](size_t j) {
          float m = value(0, j);
          for (int r = 1; r < n; ++r) m = std::max(m, value(r, j));
          return m;
        },
        "max" + who);
    expectFloats(
        bcast, [&](size_t j) { return value(n - 1, j); }, "broadcast" + who);
    expectFloats(
        gathered, [&](size_t j) { return value(static_cast<int>(j / count), j % count); }, "allgather" + who);
    expectFloats(
        scattered, [&](size_t j) { return sumOverRanks(n, rank * count + j); }, "reducescatter" + who);
  });
}

// Every rank first posts all its sends, then all its receives: large messages that could not
// complete one by one, so only the group makes progress.
TEST(Group, MutuallyDependentSendRecvCompleteInAGroup) {
  const int n = 4;
  const size_t count = 262147;
  World& w = World::get(n);
  ASSERT_TRUE(w.ready());
  w.run([&](int rank, cclComm_t comm) {
    std::vector<std::vector<float>> out(n, std::vector<float>(count)), in(n, std::vector<float>(count, -99));
    for (int p = 0; p < n; ++p)
      for (size_t j = 0; j < count; ++j) out[p][j] = value(rank * n + p, j);
    EXPECT_CCL_OK(cclGroupStart());
    for (int p = 0; p < n; ++p)
      if (p != rank) EXPECT_CCL_OK(cclSend(out[p].data(), count, cclFloat32, p, comm, nullptr));
    for (int p = 0; p < n; ++p)
      if (p != rank) EXPECT_CCL_OK(cclRecv(in[p].data(), count, cclFloat32, p, comm, nullptr));
    EXPECT_CCL_OK(cclGroupEnd());
    for (int p = 0; p < n; ++p)
      if (p != rank)
        expectFloats(
            in[p], [&](size_t j) { return value(p * n + rank, j); },
            std::string("rank ") + std::to_string(rank) + " from " + std::to_string(p));
  });
}

// Messages between one pair match in call order, even when sizes differ.
TEST(Group, SendRecvMatchInCallOrderPerPair) {
  World& w = World::get(2);
  ASSERT_TRUE(w.ready());
  w.run([&](int rank, cclComm_t comm) {
    std::vector<float> first(100), second(3000);
    for (size_t j = 0; j < first.size(); ++j) first[j] = value(rank, j);
    for (size_t j = 0; j < second.size(); ++j) second[j] = value(rank + 10, j);
    std::vector<float> got1(first.size(), -99), got2(second.size(), -99);
    const int peer = 1 - rank;
    EXPECT_CCL_OK(cclGroupStart());
    EXPECT_CCL_OK(cclSend(first.data(), first.size(), cclFloat32, peer, comm, nullptr));
    EXPECT_CCL_OK(cclSend(second.data(), second.size(), cclFloat32, peer, comm, nullptr));
    EXPECT_CCL_OK(cclRecv(got1.data(), got1.size(), cclFloat32, peer, comm, nullptr));
    EXPECT_CCL_OK(cclRecv(got2.data(), got2.size(), cclFloat32, peer, comm, nullptr));
    EXPECT_CCL_OK(cclGroupEnd());
    expectFloats(
        got1, [&](size_t j) { return value(peer, j); }, "first message");
    expectFloats(
        got2, [&](size_t j) { return value(peer + 10, j); }, "second message");
  });
}

TEST(Group, SendRecvToSelf) {
  World& w = World::get(3);
  ASSERT_TRUE(w.ready());
  w.run([&](int rank, cclComm_t comm) {
    std::vector<float> out(777), in(777, -99);
    for (size_t j = 0; j < out.size(); ++j) out[j] = value(rank, j);
    EXPECT_CCL_OK(cclGroupStart());
    EXPECT_CCL_OK(cclSend(out.data(), out.size(), cclFloat32, rank, comm, nullptr));
    EXPECT_CCL_OK(cclRecv(in.data(), in.size(), cclFloat32, rank, comm, nullptr));
    EXPECT_CCL_OK(cclGroupEnd());
    expectFloats(
        in, [&](size_t j) { return value(rank, j); }, std::string("rank ") + std::to_string(rank));
  });
}

// A blocking send/recv pair outside a group, in an order that cannot deadlock.
TEST(Group, UngroupedSendRecvInSafeOrder) {
  World& w = World::get(2);
  ASSERT_TRUE(w.ready());
  w.run([&](int rank, cclComm_t comm) {
    std::vector<float> out(50001), in(50001, -99);
    for (size_t j = 0; j < out.size(); ++j) out[j] = value(rank, j);
    if (rank == 0) {
      EXPECT_CCL_OK(cclSend(out.data(), out.size(), cclFloat32, 1, comm, nullptr));
      EXPECT_CCL_OK(cclRecv(in.data(), in.size(), cclFloat32, 1, comm, nullptr));
    } else {
      EXPECT_CCL_OK(cclRecv(in.data(), in.size(), cclFloat32, 0, comm, nullptr));
      EXPECT_CCL_OK(cclSend(out.data(), out.size(), cclFloat32, 0, comm, nullptr));
    }
    expectFloats(
        in, [&](size_t j) { return value(1 - rank, j); }, std::string("rank ") + std::to_string(rank));
  });
}

}  // namespace
}  // namespace ccltest
