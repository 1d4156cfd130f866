// SPDX-License-Identifier: BSD-3-Clause
// Ranks as fork()ed processes: the bootstrap and UCX across address spaces. Children report
// through their exit code; the parent never waits past a deadline.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
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

// A receive whose message stops arriving because its sender died in the middle of it fails
// soon after the death is known, instead of waiting 30 s for UCX to release it: UCX had
// matched its first fragments, so cancelling it stops nothing, and nothing more can arrive.
// Messages below UCX's rendezvous threshold go as such fragments; an infinite threshold makes
// this one (64 MiB) go so too.
TEST(UcxFork, AReceiveWhoseSenderDiedInTheMiddleFailsPromptly) {
  constexpr size_t kBytes = size_t{64} << 20;
  // Far below the 30 s it took, far above the time to learn of the death (a reset, or the
  // process watched every 100 ms).
  constexpr auto kBound = std::chrono::seconds(10);
  auto codes = forkRanks(
      2,
      [&](int rank, const cclUniqueId& id) {
        setenv("UCX_RNDV_THRESH", "inf", 1);  // before this process's UCX context is made
        auto bs = Bootstrap::connect(id, rank, 2, kJoinTimeout);
        auto t = transport::createUcxTransport(*bs);
        std::vector<int> pids(2);
        pids[rank] = getpid();
        bs->allGather(pids.data(), sizeof(int));
        if (rank == 1) {
          std::vector<uint8_t> out(kBytes, 7);
          bs->barrier();  // rank 0's receive is posted
          auto s = t->isend(0, 5, out.data(), kBytes);
          for (;;) t->progress();  // until rank 0 kills it
        }
        std::vector<uint8_t> in(kBytes, 0);
        auto r = t->irecv(1, 5, in.data(), kBytes);
        bs->barrier();
        // The first fragment is here, far from the last one: the sender dies.
        while (in[0] == 0) {
          if (r->test()) return int{kWrongData};
          t->progress();
        }
        kill(pids[1], SIGKILL);
        const auto killed = std::chrono::steady_clock::now();
        try {
          waitFor(*t, *r);
          return int{kWrongData};
        } catch (const Error& e) {
          const auto took = std::chrono::steady_clock::now() - killed;
          fprintf(stderr, "rank 0: failed %lld ms after the kill: %s\n",
                  static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()),
                  e.what());
          if (e.code() != cclRemoteError) return int{kError};
          return int(took < kBound ? kOk : kError);
        }
      },
      std::chrono::seconds(90));
  EXPECT_EQ(codes[0], kOk);
  EXPECT_EQ(codes[1], -1);  // killed
}

}  // namespace
}  // namespace ccl::test
