// SPDX-License-Identifier: BSD-3-Clause
// cclCommAbort: a collective blocked on an aborted communicator, or on a peer that aborted,
// returns an error instead of hanging. CCL_TIMEOUT is lowered for these communicators so
// that the library's deadline, not the harness, is what guarantees the return.
#include <gtest/gtest.h>

#include <barrier>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "scoped_env.h"
#include "world.h"

namespace ccltest {
namespace {

constexpr char kTimeoutSeconds[] = "5";

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(Abort, PeerAbortFailsABlockedAllReduce) {
  ScopedEnv timeout("CCL_TIMEOUT", kTimeoutSeconds);
  World w(2);
  ASSERT_TRUE(w.ready());
  cclResult_t blocked = cclSuccess;
  double elapsed = 0;
  w.run(
      [&](int rank, cclComm_t comm) {
        if (rank == 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          EXPECT_CCL_OK(cclCommAbort(comm));
          return;
        }
        std::vector<float> in(1000, 1.f), out(1000);
        const auto start = std::chrono::steady_clock::now();
        blocked = cclAllReduce(in.data(), out.data(), in.size(), cclFloat32, cclSum, comm, nullptr);
        elapsed = secondsSince(start);
        std::string message = cclGetLastError(comm);
        ASSERT_NE(blocked, cclSuccess) << "allreduce with an aborted peer succeeded";
        EXPECT_EQ(blocked, cclRemoteError)
            << "peers of an aborted rank see cclRemoteError; got " << describeResult(blocked, comm);
        EXPECT_NE(message, "");
      },
      std::chrono::seconds(60));
  w.forgetComm(0);
  RecordProperty("blocked_rank_seconds", std::to_string(elapsed));
  std::printf("blocked rank returned %s after %.2f s (CCL_TIMEOUT=%s)\n", cclGetErrorString(blocked), elapsed,
              kTimeoutSeconds);
}

TEST(Abort, AbortFromAnotherThreadUnblocksALocalCall) {
  ScopedEnv timeout("CCL_TIMEOUT", kTimeoutSeconds);
  World w(2);
  ASSERT_TRUE(w.ready());
  cclResult_t blocked = cclSuccess;
  double elapsed = 0;
  const cclComm_t victim = w.comm(1);
  w.run(
      [&](int rank, cclComm_t comm) {
        if (rank == 0) {  // never joins the allreduce; aborts rank 1's communicator instead
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          EXPECT_CCL_OK(cclCommAbort(victim));
          return;
        }
        std::vector<float> in(1000, 1.f), out(1000);
        const auto start = std::chrono::steady_clock::now();
        blocked = cclAllReduce(in.data(), out.data(), in.size(), cclFloat32, cclSum, comm, nullptr);
        elapsed = secondsSince(start);
        ASSERT_NE(blocked, cclSuccess) << "allreduce on an aborted communicator succeeded";
        EXPECT_TRUE(blocked == cclInvalidUsage || blocked == cclRemoteError)
            << "a call blocked on an aborted communicator returns cclInvalidUsage or cclRemoteError; got "
            << describeResult(blocked);
      },
      std::chrono::seconds(60));
  w.forgetComm(1);
  std::printf("blocked rank returned %s after %.2f s (CCL_TIMEOUT=%s)\n", cclGetErrorString(blocked), elapsed,
              kTimeoutSeconds);
}

TEST(Abort, AbortOfIdleCommunicatorsSucceeds) {
  World w(3);
  ASSERT_TRUE(w.ready());
  // A rank that returned from the allreduce may abort while a peer still waits for its last
  // message, which fails that peer legitimately; the barrier makes every rank idle first.
  std::barrier allDone(3);
  w.run([&](int rank, cclComm_t comm) {
    int32_t in = rank, out = -1;
    EXPECT_CCL_OK(cclAllReduce(&in, &out, 1, cclInt32, cclSum, comm, nullptr));
    EXPECT_EQ(out, 3);
    allDone.arrive_and_wait();
    EXPECT_CCL_OK(cclCommAbort(comm));
  });
  for (int r = 0; r < 3; ++r) w.forgetComm(r);
}

// A watchdog thread aborts a communicator while the thread that owns it has an operation of
// it queued in its open group: the abort returns at once, and the owner's cclGroupEnd drops
// the group with cclInvalidUsage, reading nothing freed (under ASan, a use-after-free before).
TEST(Abort, AnAbortFromAnotherThreadDropsWhatTheOwnersGroupHolds) {
  World w(2);
  ASSERT_TRUE(w.ready());
  const cclComm_t victim = w.comm(0);
  std::barrier queued(2), aborted(2);
  w.run([&](int rank, cclComm_t comm) {
    if (rank == 1) {  // the watchdog of rank 0's communicator
      queued.arrive_and_wait();
      EXPECT_CCL_OK(cclCommAbort(victim));
      aborted.arrive_and_wait();
      return;
    }
    std::vector<float> in(1000, 1.f), out(1000, -1.f);
    ASSERT_CCL_OK(cclGroupStart());
    EXPECT_CCL_OK(cclAllReduce(in.data(), out.data(), in.size(), cclFloat32, cclSum, comm, nullptr));
    queued.arrive_and_wait();
    aborted.arrive_and_wait();
    const cclResult_t end = cclGroupEnd();
    EXPECT_EQ(end, cclInvalidUsage) << describeResult(end);
    EXPECT_NE(std::string(cclGetLastError(nullptr)).find("destroyed or aborted"), std::string::npos)
        << cclGetLastError(nullptr);
    EXPECT_EQ(out[0], -1.f) << "the dropped group wrote the output";
  });
  w.forgetComm(0);
}

// A watchdog aborts a communicator while its owner's cclCommDestroy waits for an operation
// queued on a host stream (a peer never joins it): the abort brings the destroy out, and the
// communicator is freed once, after both (under ASan, each freed it before).
TEST(Abort, AnAbortWhileADestroyWaitsFreesTheCommunicatorOnce) {
  ScopedEnv timeout("CCL_TIMEOUT", kTimeoutSeconds);
  World w(2);
  ASSERT_TRUE(w.ready());
  const cclComm_t victim = w.comm(0);
  cclStream_t stream = nullptr;
  ASSERT_CCL_OK(cclHostStreamCreate(&stream));
  std::vector<float> in(1000, 1.f), out(1000);
  // Rank 1 never calls: the allreduce waits on the stream until the abort.
  ASSERT_CCL_OK(cclAllReduce(in.data(), out.data(), in.size(), cclFloat32, cclSum, victim, stream));
  cclResult_t destroyed = cclInternalError, aborted = cclInternalError;
  std::thread owner([&] { destroyed = cclCommDestroy(victim); });
  // The destroy waits for the stream's operation by now (the order only decides which call
  // meets which: a destroy already done would make the abort a use of a freed handle).
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::thread watchdog([&] { aborted = cclCommAbort(victim); });
  watchdog.join();
  owner.join();
  EXPECT_EQ(aborted, cclSuccess) << describeResult(aborted);
  EXPECT_EQ(destroyed, cclSuccess) << describeResult(destroyed);
  EXPECT_NE(cclHostStreamSynchronize(stream), cclSuccess) << "the aborted allreduce succeeded";
  EXPECT_CCL_OK(cclHostStreamDestroy(stream));
  w.forgetComm(0);
}

// A host stream destroyed by another thread while this thread's open group holds a call for
// it: the group's end refuses the group instead of enqueuing on freed memory (ASan: a
// use-after-free before), and the communicator goes on.
TEST(Abort, AStreamDestroyedBeforeTheGroupsEndDropsTheGroup) {
  World w(1);
  ASSERT_TRUE(w.ready());
  cclStream_t stream = nullptr;
  ASSERT_CCL_OK(cclHostStreamCreate(&stream));
  std::barrier queued(2), destroyed(2);
  std::vector<float> in(1000, 1.f), out(1000, -1.f);
  cclResult_t end = cclSuccess;
  std::thread owner([&] {
    cclComm_t comm = w.comm(0);
    EXPECT_CCL_OK(cclGroupStart());
    EXPECT_CCL_OK(cclAllReduce(in.data(), out.data(), in.size(), cclFloat32, cclSum, comm, stream));
    queued.arrive_and_wait();
    destroyed.arrive_and_wait();
    end = cclGroupEnd();
    EXPECT_NE(std::string(cclGetLastError(nullptr)).find("host stream was destroyed"), std::string::npos)
        << cclGetLastError(nullptr);
    // The communicator goes on: the dropped call gave its sequence number back.
    EXPECT_CCL_OK(cclAllReduce(in.data(), out.data(), in.size(), cclFloat32, cclSum, comm, nullptr));
  });
  queued.arrive_and_wait();
  EXPECT_CCL_OK(cclHostStreamDestroy(stream));
  destroyed.arrive_and_wait();
  owner.join();
  EXPECT_EQ(end, cclInvalidUsage) << describeResult(end);
  EXPECT_EQ(out[0], 1.f);
}

// cclCommRevoke on one rank brings out ranks stuck in different calls (an allreduce and a
// receive, neither of which can complete), well before CCL_TIMEOUT; later calls fail on every
// rank; once every rank has revoked, a split among those that go on gives a working
// communicator.
TEST(Revoke, RanksInDifferentCallsAllComeOutAndASplitGoesOn) {
  ScopedEnv timeout("CCL_TIMEOUT", "30");
  World w(3);
  ASSERT_TRUE(w.ready());
  std::vector<cclResult_t> stuck(3, cclSuccess);
  std::vector<double> elapsed(3, 0);
  std::barrier revokedEverywhere(3);
  w.run(
      [&](int rank, cclComm_t comm) {
        std::vector<float> in(1000, 1.f), out(1000);
        const auto start = std::chrono::steady_clock::now();
        if (rank == 0) {
          stuck[0] = cclAllReduce(in.data(), out.data(), in.size(), cclFloat32, cclSum, comm, nullptr);
        } else if (rank == 1) {
          stuck[1] = cclRecv(out.data(), out.size(), cclFloat32, 2, comm, nullptr);
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          EXPECT_CCL_OK(cclCommRevoke(comm, 0));
          EXPECT_EQ(cclCommRevoke(comm, 0), cclSuccess) << "revoking twice";
          EXPECT_EQ(cclCommRevoke(comm, 1), cclInvalidArgument) << "flags other than 0";
        }
        elapsed[rank] = secondsSince(start);
        // Every later call fails: on the revoking rank as a usage error.
        const cclResult_t later = cclAllReduce(in.data(), out.data(), in.size(), cclFloat32, cclSum, comm, nullptr);
        EXPECT_NE(later, cclSuccess) << "rank " << rank << ": a call after the revoke succeeded";
        if (rank == 2) {
          EXPECT_EQ(later, cclInvalidUsage) << describeResult(later, comm);
        }
        EXPECT_CCL_OK(cclCommRevoke(comm, 0));
        revokedEverywhere.arrive_and_wait();
        cclComm_t next = nullptr;
        EXPECT_CCL_OK(cclCommSplit(comm, rank == 1 ? CCL_SPLIT_NOCOLOR : 0, rank, &next, nullptr));
        EXPECT_CCL_OK(cclCommDestroy(comm));
        if (rank == 1) {
          EXPECT_EQ(next, nullptr);
          return;
        }
        ASSERT_NE(next, nullptr);
        int32_t one = 1, sum = 0;
        EXPECT_CCL_OK(cclAllReduce(&one, &sum, 1, cclInt32, cclSum, next, nullptr));
        EXPECT_EQ(sum, 2);
        EXPECT_CCL_OK(cclCommDestroy(next));
      },
      std::chrono::seconds(60));
  for (int r = 0; r < 3; ++r) w.forgetComm(r);
  for (int r : {0, 1}) {
    EXPECT_NE(stuck[r], cclSuccess) << "rank " << r << " completed a call that could not complete";
    EXPECT_LT(elapsed[r], 10.0) << "rank " << r << " came out after " << elapsed[r] << " s, not promptly";
  }
  std::printf("stuck ranks returned %s, %s after %.2f, %.2f s (the revoke came at 0.3 s; CCL_TIMEOUT=30)\n",
              cclGetErrorString(stuck[0]), cclGetErrorString(stuck[1]), elapsed[0], elapsed[1]);
}

// Two nodes: an abort on one node reaches a rank of the other that waits only on its own
// node's peer, which never joins (the pairs inside a node are on the shared-memory channel,
// those across on UCX: an abort learned through either is the communicator's). Without the
// abort, only CCL_TIMEOUT (30 s) would end the wait.
TEST(Abort, AnAbortAcrossNodesReachesAWaitInsideANode) {
  ScopedEnv timeout("CCL_TIMEOUT", "30");
  const char* hosts[] = {"abort-node-0", "abort-node-0", "abort-node-1", "abort-node-1"};
  cclUniqueId id{};
  ASSERT_CCL_OK(cclGetUniqueId(&id));
  std::vector<cclComm_t> comms(4, nullptr);
  std::vector<double> waited(4, 0);
  std::vector<cclResult_t> got(4, cclSuccess);
  expectNoneThrew(runRanks(4, [&](int r) {
    cclConfig_t config = CCL_CONFIG_INITIALIZER;
    config.hostId = hosts[r];
    ASSERT_CCL_OK(cclCommInitRankConfig(&comms[static_cast<size_t>(r)], 4, id, r, &config));
    cclComm_t comm = comms[static_cast<size_t>(r)];
    int32_t x = 1, y = 0;
    const auto start = std::chrono::steady_clock::now();
    if (r == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      EXPECT_CCL_OK(cclCommAbort(comm));
      comms[0] = nullptr;
      return;
    }
    if (r == 2) {  // waits for rank 3 alone, on its node, which waits for rank 2 in turn
      got[2] = cclRecv(&y, 1, cclInt32, 3, comm, nullptr);
    } else if (r == 3) {
      got[3] = cclRecv(&y, 1, cclInt32, 2, comm, nullptr);
    } else {
      got[1] = cclRecv(&y, 1, cclInt32, 0, comm, nullptr);
    }
    (void)x;
    waited[static_cast<size_t>(r)] = secondsSince(start);
  }));
  for (int r = 1; r < 4; ++r) {
    EXPECT_NE(got[r], cclSuccess) << "rank " << r;
    EXPECT_LT(waited[r], 10.0) << "rank " << r << " waited " << waited[r] << " s for an aborted communicator";
    if (comms[static_cast<size_t>(r)]) EXPECT_CCL_OK(cclCommAbort(comms[static_cast<size_t>(r)]));
  }
  std::printf("ranks 1-3 returned after %.2f, %.2f, %.2f s (the abort came at 0.3 s)\n", waited[1], waited[2],
              waited[3]);
}

// A rank whose communicator is gone without a goodbye (aborted here; a dead process's
// connections close the same way) is found by its idle peers' watcher: their asynchronous
// error turns to cclRemoteError with no call made, and their next call names the lost rank,
// on its ring neighbours (0 and 2) and on the ranks the news reached round the ring (3, 4).
// CCL_TIMEOUT is 60 s, so only the watcher can have told them. Before that call,
// cclGetLastError(comm) already names the lost rank (the watcher's news, recorded on its
// thread), and cclGetLastError(NULL) does not (this thread's own last failure).
TEST(Watch, IdleRanksLearnOfALostPeerWithoutACall) {
  ScopedEnv timeout("CCL_TIMEOUT", "60");
  constexpr int kRanks = 5;
  World w(kRanks);
  ASSERT_TRUE(w.ready());
  std::vector<double> found(kRanks, -1);
  std::vector<std::string> said(kRanks), news(kRanks), own(kRanks);
  w.run(
      [&](int rank, cclComm_t comm) {
        if (rank == 1) {
          EXPECT_CCL_OK(cclCommAbort(comm));
          return;
        }
        const auto start = std::chrono::steady_clock::now();
        cclResult_t state = cclSuccess;
        while (secondsSince(start) < 30) {
          EXPECT_CCL_OK(cclCommGetAsyncError(comm, &state));
          if (state != cclSuccess) break;
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        found[rank] = secondsSince(start);
        EXPECT_EQ(state, cclRemoteError) << "rank " << rank << " never learned of the lost rank while idle";
        news[rank] = cclGetLastError(comm);
        own[rank] = cclGetLastError(nullptr);
        int32_t x = 1, y = 0;
        EXPECT_EQ(cclAllReduce(&x, &y, 1, cclInt32, cclSum, comm, nullptr), cclRemoteError);
        said[rank] = cclGetLastError(comm);
      },
      std::chrono::seconds(60));
  w.forgetComm(1);
  for (int r : {0, 2, 3, 4}) {
    EXPECT_NE(said[r].find("rank 1 is gone"), std::string::npos) << "rank " << r << ": " << said[r];
    EXPECT_NE(news[r].find("rank 1 is gone"), std::string::npos) << "rank " << r << " before its call: " << news[r];
    EXPECT_EQ(own[r].find("rank 1 is gone"), std::string::npos) << "rank " << r << ", NULL: " << own[r];
  }
  std::printf("idle ranks 0, 2, 3, 4 learned of the lost rank after %.3f, %.3f, %.3f, %.3f s\n", found[0], found[2],
              found[3], found[4]);
}

// Communicators destroyed at different times (one rank leaves early, as NCCL programs may)
// are not taken for lost ranks: the leaving rank says goodbye.
TEST(Watch, ADestroyedPeerIsNotALostOne) {
  World w(2);
  ASSERT_TRUE(w.ready());
  w.run(
      [&](int rank, cclComm_t comm) {
        if (rank == 0) {
          EXPECT_CCL_OK(cclCommDestroy(comm));
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // five looks of the watcher
        cclResult_t state = cclInProgress;
        EXPECT_CCL_OK(cclCommGetAsyncError(comm, &state));
        EXPECT_EQ(state, cclSuccess) << "a peer that destroyed its communicator was taken for a lost one";
      },
      std::chrono::seconds(60));
  w.forgetComm(0);
}

// config->timeoutMs is the deadline of every blocking wait, a split's exchange over the
// bootstrap among them, not only of the init's: a split whose peer never comes fails after
// the config's second, not after CCL_TIMEOUT (which it waited for before).
TEST(Abort, ASplitWaitsForItsPeerOnlyTheConfigsTimeout) {
  ScopedEnv timeout("CCL_TIMEOUT", "30");
  cclUniqueId id;
  ASSERT_CCL_OK(cclGetUniqueId(&id));
  cclComm_t comms[2] = {};
  cclResult_t split = cclSuccess;
  double elapsed = 0;
  std::barrier made(2), splitDone(2);
  std::thread ranks[2];
  for (int r = 0; r < 2; ++r)
    ranks[r] = std::thread([&, r] {
      cclConfig_t config = CCL_CONFIG_INITIALIZER;
      config.timeoutMs = 1000;
      EXPECT_CCL_OK(cclCommInitRankConfig(&comms[r], 2, id, r, &config));
      made.arrive_and_wait();
      if (r == 0 && comms[0]) {  // rank 1 never joins the split
        cclComm_t sub = nullptr;
        const auto start = std::chrono::steady_clock::now();
        split = cclCommSplit(comms[0], 0, 0, &sub, nullptr);
        elapsed = secondsSince(start);
      }
      splitDone.arrive_and_wait();
      if (comms[r]) EXPECT_CCL_OK(cclCommAbort(comms[r]));
    });
  for (auto& t : ranks) t.join();
  EXPECT_EQ(split, cclSystemError) << cclGetErrorString(split);
  EXPECT_LT(elapsed, 15.0) << "the split waited for CCL_TIMEOUT (30 s), not the config's 1 s";
  std::printf("the split without its peer failed after %.2f s (timeoutMs 1000, CCL_TIMEOUT 30)\n", elapsed);
}

// No abort at all: only the deadline ends the wait, so it is kept short.
TEST(Abort, SilentPeerTimesOut) {
  ScopedEnv timeout("CCL_TIMEOUT", "2");
  World w(2);
  ASSERT_TRUE(w.ready());
  w.run(
      [&](int rank, cclComm_t comm) {
        if (rank == 0) return;  // never calls the collective
        std::vector<float> in(1000, 1.f), out(1000);
        const auto start = std::chrono::steady_clock::now();
        const cclResult_t r = cclAllReduce(in.data(), out.data(), in.size(), cclFloat32, cclSum, comm, nullptr);
        EXPECT_NE(r, cclSuccess) << "allreduce without its peer succeeded";
        std::printf("silent peer: %s after %.2f s\n", cclGetErrorString(r), secondsSince(start));
      },
      std::chrono::seconds(60));
}

}  // namespace
}  // namespace ccltest
