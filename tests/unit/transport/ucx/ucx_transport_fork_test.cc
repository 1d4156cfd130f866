// SPDX-License-Identifier: BSD-3-Clause
// Ranks as fork()ed processes: the bootstrap and UCX across address spaces. Children report
// through their exit code; the parent never waits past a deadline.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <vector>

#include "fork_ranks.h"
#include "transport/ucx/ucx_transport.h"
#include "transport_test_util.h"

namespace ccl::test {
namespace {

using bootstrap::Bootstrap;

// A ring exchange over UCX plus bootstrap collectives between 3 processes.
TEST(UcxFork, RingExchangeBetweenProcesses) {
  constexpr int n = 3;
  auto codes = forkRanks(
      n,
      [&](int rank, const cclUniqueId& id) {
        auto bs = Bootstrap::connect(id, rank, n, kJoinTimeout);
        std::vector<int> pids(n);
        pids[rank] = getpid();
        bs->allGather(pids.data(), sizeof(int));
        for (int r = 0; r < n; ++r)
          if (r != rank && pids[r] == pids[rank]) return int{kWrongData};
        auto t = transport::createUcxTransport(*bs);
        const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
        constexpr size_t kBytes = (1 << 20) + 5;
        std::vector<uint8_t> out(kBytes), in(kBytes, 0);
        for (size_t i = 0; i < kBytes; ++i) out[i] = static_cast<uint8_t>(rank + i * 13);
        auto r = t->irecv(prev, 77, in.data(), kBytes);
        auto s = t->isend(next, 77, out.data(), kBytes);
        waitFor(*t, *r);
        waitFor(*t, *s);
        bs->barrier();
        for (size_t i = 0; i < kBytes; ++i)
          if (in[i] != static_cast<uint8_t>(prev + i * 13)) return int{kWrongData};
        return int{kOk};
      },
      std::chrono::seconds(60));
  for (int r = 0; r < n; ++r) EXPECT_EQ(codes[r], kOk) << "rank " << r;
}

// A rank that dies turns a receive from it into cclRemoteError on the survivor, not a hang.
TEST(UcxFork, DeadPeerFailsPendingRecv) {
  auto codes = forkRanks(
      2,
      [&](int rank, const cclUniqueId& id) {
        auto bs = Bootstrap::connect(id, rank, 2, kJoinTimeout);
        auto t = transport::createUcxTransport(*bs);
        bs->barrier();
        if (rank == 1) kill(getpid(), SIGKILL);
        int x = 0;
        auto r = t->irecv(1, 1, &x, sizeof(x));
        try {
          waitFor(*t, *r);
        } catch (const Error& e) {
          fprintf(stderr, "rank 0 (expected failure): %s\n", e.what());
          return int(e.code() == cclRemoteError ? kOk : kError);
        }
        return int{kWrongData};
      },
      std::chrono::seconds(60));
  EXPECT_EQ(codes[0], kOk);
  EXPECT_EQ(codes[1], -1);  // killed by SIGKILL
}

}  // namespace
}  // namespace ccl::test
