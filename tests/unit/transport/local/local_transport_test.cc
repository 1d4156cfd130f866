// SPDX-License-Identifier: BSD-3-Clause
// The in-process transport and the factory: messages match per (peer, tag) in posting
// order, and the failure semantics of the transport contract hold (abort from any rank, a
// mismatch abort, a peer that left, an oversized message).
#include "transport/local/local_transport.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "transport/factory.h"
#include "transport_test_util.h"

namespace ccl::test {
namespace {

using bootstrap::Bootstrap;
using transport::Transport;

// Runs fn(rank, bootstrap, transport) on n thread ranks over a fresh communicator whose
// transport the factory makes from `name`.
std::vector<std::exception_ptr> runLocal(int n, const char* name,
                                         const std::function<void(int, Bootstrap&, Transport&)>& fn) {
  cclUniqueId id = newId();
  return runRanks(n, [&](int rank) {
    auto bs = Bootstrap::connect(id, rank, n, kJoinTimeout);
    auto t = transport::createTransport(name, *bs);
    ASSERT_EQ(std::string(t->name()), "local");
    fn(rank, *bs, *t);
    bs->barrier();
  });
}

TEST(LocalTransport, EveryPairInPostingOrder) {
  const int n = 4;
  expectAllSucceeded(runLocal(n, "local", [&](int rank, Bootstrap&, Transport& t) {
    EXPECT_TRUE(t.sharedMemoryLink((rank + 1) % n));
    std::vector<std::vector<int>> got(n, std::vector<int>(3, -1));
    std::vector<std::unique_ptr<transport::Request>> reqs;
    // Receives posted first for half the peers, after the sends for the others.
    for (int p = 0; p < n; p += 2)
      for (int k = 0; k < 3; ++k) reqs.push_back(t.irecv(p, 7, &got[p][k], sizeof(int)));
    std::vector<int> mine = {rank * 10, rank * 10 + 1, rank * 10 + 2};
    for (int p = 0; p < n; ++p)
      for (int k = 0; k < 3; ++k) reqs.push_back(t.isend(p, 7, &mine[k], sizeof(int)));
    for (int p = 1; p < n; p += 2)
      for (int k = 0; k < 3; ++k) reqs.push_back(t.irecv(p, 7, &got[p][k], sizeof(int)));
    for (auto& r : reqs) waitFor(t, *r);
    for (int p = 0; p < n; ++p)
      for (int k = 0; k < 3; ++k) EXPECT_EQ(got[p][k], p * 10 + k) << "from " << p << " message " << k;
  }));
}

TEST(LocalTransport, AbortFromAnyRankFailsEveryRank) {
  for (bool mismatch : {false, true}) {
    const auto errors = runLocal(3, "local", [&](int rank, Bootstrap& bs, Transport& t) {
      int never = 0;
      auto r = t.irecv((rank + 1) % 3, 1, &never, sizeof(never));
      bs.barrier();
      if (rank == 1) mismatch ? t.abortMismatch() : t.abort();
      waitFor(t, *r);
    });
    for (int r = 0; r < 3; ++r)
      EXPECT_EQ(codeOf(errors[r]), mismatch ? cclInvalidUsage : cclRemoteError) << "rank " << r;
  }
}

TEST(LocalTransport, PeerThatLeftFailsWaitingReceivesButNotDeliveredOnes) {
  auto fabric = transport::makeFabric(2);
  auto a = transport::createLocalTransport(fabric, 0);
  auto b = transport::createLocalTransport(fabric, 1);
  int sent = 42, got = 0, never = 0;
  auto s = b->isend(0, 3, &sent, sizeof(sent));
  EXPECT_TRUE(s->test());
  b.reset();  // rank 1 leaves after sending
  auto delivered = a->irecv(1, 3, &got, sizeof(got));
  EXPECT_TRUE(delivered->test());
  EXPECT_EQ(got, 42);
  auto waiting = a->irecv(1, 3, &never, sizeof(never));
  try {
    waiting->test();
    ADD_FAILURE() << "a receive from a rank that left completed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclRemoteError);
  }
}

TEST(LocalTransport, OversizedMessageIsInvalidUsage) {
  auto fabric = transport::makeFabric(1);
  auto t = transport::createLocalTransport(fabric, 0);
  const uint64_t big = 1;
  uint8_t small = 0;
  auto s = t->isend(0, 0, &big, sizeof(big));
  auto r = t->irecv(0, 0, &small, sizeof(small));
  try {
    r->test();
    ADD_FAILURE() << "8 bytes arrived in a 1-byte receive";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclInvalidUsage);
  }
  EXPECT_THROW(t->isend(1, 0, &big, 1), Error) << "peer out of range";
  EXPECT_THROW(t->isend(0, transport::kTagMask + 1, &big, 1), Error) << "tag too wide";
}

TEST(TransportFactory, NamesAndAuto) {
  EXPECT_FALSE(transport::availableTransports().empty());
  const auto errors = runLocal(2, "bogus", [](int, Bootstrap&, Transport&) {});
  for (const auto& e : errors) EXPECT_EQ(codeOf(e), cclInvalidArgument);
  // auto makes the first transport this build has.
  cclUniqueId id = newId();
  expectAllSucceeded(runRanks(2, [&](int rank) {
    auto bs = Bootstrap::connect(id, rank, 2, kJoinTimeout);
    auto t = transport::createTransport("AUTO", *bs);
    EXPECT_EQ(transport::availableTransports().rfind(t->name(), 0), 0u) << t->name();
    bs->barrier();
  }));
}

}  // namespace
}  // namespace ccl::test
