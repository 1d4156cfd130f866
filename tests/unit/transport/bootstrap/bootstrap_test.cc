// SPDX-License-Identifier: BSD-3-Clause
#include "transport/bootstrap/bootstrap.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "common/tags.h"
#include "transport/bootstrap/wire.h"
#include "transport_test_util.h"

namespace ccl::test {
namespace {

using bootstrap::Bootstrap;

// A byte that depends on who wrote it, so misplaced slots are caught.
uint8_t pattern(int rank, size_t i) { return static_cast<uint8_t>(rank * 31 + i * 7 + 1); }

class BootstrapRanks : public ::testing::TestWithParam<int> {};

TEST_P(BootstrapRanks, AllGatherBarrierBroadcast) {
  const int n = GetParam();
  cclUniqueId id = newId();
  auto errors = runRanks(n, [&](int rank) {
    auto bs = Bootstrap::connect(id, rank, n, kJoinTimeout);
    ASSERT_EQ(bs->rank(), rank);
    ASSERT_EQ(bs->size(), n);
    for (size_t bytes : {size_t{1}, size_t{13}, size_t{70000}}) {
      std::vector<uint8_t> data(bytes * n, 0);
      for (size_t i = 0; i < bytes; ++i) data[rank * bytes + i] = pattern(rank, i);
      bs->allGather(data.data(), bytes);
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(data[r * bytes + i], pattern(r, i)) << "slot " << r;
    }
    bs->barrier();
    for (int root = 0; root < n; ++root) {
      std::vector<uint8_t> data(1000, 0);
      if (rank == root)
        for (size_t i = 0; i < data.size(); ++i) data[i] = pattern(root, i);
      bs->broadcast(data.data(), data.size(), root);
      for (size_t i = 0; i < data.size(); ++i) ASSERT_EQ(data[i], pattern(root, i));
    }
    bs->barrier();
  });
  expectAllSucceeded(errors);
}

INSTANTIATE_TEST_SUITE_P(Ranks, BootstrapRanks, ::testing::Range(1, 9));

TEST(Bootstrap, ConcurrentUniqueIds) {
  constexpr int kComms = 3, kRanks = 3;
  std::vector<cclUniqueId> ids;
  for (int c = 0; c < kComms; ++c) ids.push_back(newId());
  auto errors = runRanks(kComms * kRanks, [&](int t) {
    const int comm = t % kComms, rank = t / kComms;
    auto bs = Bootstrap::connect(ids[comm], rank, kRanks, kJoinTimeout);
    std::vector<int> data(kRanks, -1);
    data[rank] = comm * 100 + rank;
    bs->allGather(data.data(), sizeof(int));
    for (int r = 0; r < kRanks; ++r) ASSERT_EQ(data[r], comm * 100 + r);
    bs->barrier();
  });
  expectAllSucceeded(errors);
}

TEST(Bootstrap, WrongSecretIsRefused) {
  cclUniqueId id = newId();
  cclUniqueId bad = id;
  bad.internal[8] ^= 0x5a;  // first byte of the secret (after the 8-byte magic)
  std::atomic<bool> badDone{false};
  auto errors = runRanks(3, [&](int t) {
    if (t == 2) {
      // Claims a real rank with the wrong secret; must neither join nor disturb the others.
      try {
        Bootstrap::connect(bad, 1, 2, std::chrono::seconds(10));
      } catch (...) {
        badDone = true;
        throw;
      }
      return;
    }
    // Let the impostor reach the root first.
    if (t == 1)
      for (int i = 0; i < 200 && !badDone; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    auto bs = Bootstrap::connect(id, t, 2, kJoinTimeout);
    std::vector<int> data(2, -1);
    data[t] = t + 40;
    bs->allGather(data.data(), sizeof(int));
    ASSERT_EQ(data[0], 40);
    ASSERT_EQ(data[1], 41);
  });
  EXPECT_EQ(codeOf(errors[0]), cclSuccess);
  EXPECT_EQ(codeOf(errors[1]), cclSuccess);
  EXPECT_NE(codeOf(errors[2]), cclSuccess) << "a rank with the wrong secret joined";
}

TEST(Bootstrap, NranksMismatchIsAnError) {
  cclUniqueId id = newId();
  auto errors = runRanks(2, [&](int rank) { Bootstrap::connect(id, rank, rank == 0 ? 2 : 3, kJoinTimeout); });
  EXPECT_EQ(codeOf(errors[0]), cclInvalidUsage);
  EXPECT_EQ(codeOf(errors[1]), cclInvalidUsage);
}

TEST(Bootstrap, DuplicateRankIsAnError) {
  cclUniqueId id = newId();
  auto errors = runRanks(2, [&](int) { Bootstrap::connect(id, 0, 2, kJoinTimeout); });
  EXPECT_EQ(codeOf(errors[0]), cclInvalidUsage);
  EXPECT_EQ(codeOf(errors[1]), cclInvalidUsage);
}

TEST(Bootstrap, InvalidArguments) {
  cclUniqueId zero;
  std::memset(&zero, 0, sizeof(zero));
  EXPECT_EQ(codeOf(runRanks(1, [&](int) { Bootstrap::connect(zero, 0, 1, kJoinTimeout); })[0]), cclInvalidArgument);
  cclUniqueId id = newId();
  EXPECT_EQ(codeOf(runRanks(1, [&](int) { Bootstrap::connect(id, 2, 2, kJoinTimeout); })[0]), cclInvalidArgument);
  EXPECT_EQ(codeOf(runRanks(1, [&](int) { Bootstrap::connect(id, 0, 0, kJoinTimeout); })[0]), cclInvalidArgument);
}

TEST(Bootstrap, MissingRankTimesOut) {
  cclUniqueId id = newId();
  auto errors = runRanks(1, [&](int) { Bootstrap::connect(id, 0, 2, std::chrono::milliseconds(300)); });
  EXPECT_EQ(codeOf(errors[0]), cclSystemError);
}

TEST(Bootstrap, AllGatherSizeMismatchIsAnError) {
  cclUniqueId id = newId();
  auto errors = runRanks(3, [&](int rank) {
    auto bs = Bootstrap::connect(id, rank, 3, kJoinTimeout);
    std::vector<char> data(3 * 16);
    bs->allGather(data.data(), rank == 1 ? 16 : 8);
  });
  for (int r = 0; r < 3; ++r) EXPECT_NE(codeOf(errors[r]), cclSuccess) << "rank " << r;
  EXPECT_EQ(codeOf(errors[1]), cclInvalidUsage);
}

TEST(Bootstrap, AbortUnblocksBarrier) {
  cclUniqueId id = newId();
  std::vector<std::unique_ptr<Bootstrap>> comms(2);
  expectAllSucceeded(runRanks(2, [&](int rank) { comms[rank] = Bootstrap::connect(id, rank, 2, kJoinTimeout); }));
  ASSERT_TRUE(comms[0] && comms[1]);
  EXPECT_FALSE(comms[0]->peerClosed());
  EXPECT_FALSE(comms[1]->peerClosed());
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    comms[0]->abort();
  });
  std::string what;
  // Rank 1 never enters: without the abort this would wait for CCL_TIMEOUT.
  std::exception_ptr e;
  try {
    comms[0]->barrier();
  } catch (...) {
    e = std::current_exception();
  }
  aborter.join();
  EXPECT_EQ(codeOf(e, &what), cclRemoteError);
  EXPECT_NE(what.find("abort"), std::string::npos) << what;
  // The peer sees the closed ring instead of waiting for its timeout.
  bool closed = false;
  for (int i = 0; i < 400 && !closed; ++i) {
    closed = comms[1]->peerClosed();
    if (!closed) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(closed);
  try {
    comms[1]->barrier();
    ADD_FAILURE() << "barrier succeeded after the peer aborted";
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), cclRemoteError);
  }
}

TEST(Bootstrap, InterfaceFromEnvironment) {
  setenv("CCL_SOCKET_IFNAME", "lo", 1);
  cclUniqueId id = newId();
  auto errors = runRanks(2, [&](int rank) {
    auto bs = Bootstrap::connect(id, rank, 2, kJoinTimeout);
    bs->barrier();
  });
  setenv("CCL_SOCKET_IFNAME", "no-such-interface0", 1);
  cclUniqueId unused;
  std::string what;
  std::exception_ptr failure;
  try {
    bootstrap::createUniqueId(&unused);
  } catch (...) {
    failure = std::current_exception();
  }
  unsetenv("CCL_SOCKET_IFNAME");
  expectAllSucceeded(errors);
  EXPECT_EQ(codeOf(failure, &what), cclSystemError);
  EXPECT_NE(what.find("no-such-interface0"), std::string::npos) << what;
}

// Sends one hello with the id's secret claiming `nranks` (listening at `listen`) and reads
// the root's reply; the connection to the root stays open in `root`.
bootstrap::Reply hello(const cclUniqueId& id, int rank, int nranks, const bootstrap::WireAddr& listen,
                       bootstrap::Socket& root) {
  bootstrap::IdLayout layout;
  std::memcpy(&layout, id.internal, sizeof(layout));
  const auto deadline = bootstrap::deadlineAfter(std::chrono::seconds(10));
  root = bootstrap::Socket::connectTo(layout.root, deadline);
  bootstrap::Hello h{};
  h.magic = bootstrap::kHelloMagic;
  std::memcpy(h.secret, layout.secret, bootstrap::kSecretBytes);
  h.rank = rank;
  h.nranks = nranks;
  h.listen = listen;
  root.sendAll(&h, sizeof(h), deadline);
  bootstrap::Reply r{};
  root.recvAll(&r, sizeof(r), deadline);
  r.message[sizeof(r.message) - 1] = '\0';
  return r;
}

bootstrap::Reply helloClaiming(const cclUniqueId& id, int rank, int nranks) {
  bootstrap::Socket root;
  return hello(id, rank, nranks, bootstrap::WireAddr{}, root);
}

// Hellos that hold the secret (a rank of another job from the same id, or a faulty one) and
// claim 2^30 ranks arrive before any rank: each is refused with a message, the root keeps
// no table of that size, and the real ranks then join. Before the root was bounded, the
// first such hello sized its table by 2^30 and the rendezvous died.
TEST(Bootstrap, HelloFloodClaimingAHugeCommunicatorIsRefused) {
  cclUniqueId id = newId();
  for (int i = 0; i < 64; ++i) {
    const bootstrap::Reply r = helloClaiming(id, i * 16769023 % (1 << 30), 1 << 30);
    ASSERT_EQ(r.status, cclInvalidUsage) << "hello " << i;
    ASSERT_NE(std::string(r.message).find("at most " + std::to_string(tags::kMaxRanks)), std::string::npos)
        << r.message;
  }
  auto errors = runRanks(2, [&](int rank) {
    auto bs = Bootstrap::connect(id, rank, 2, kJoinTimeout);
    bs->barrier();
  });
  expectAllSucceeded(errors);
}

// Once the id's creator has joined with its size, a hello claiming any other size (within
// the bound) is refused alone, with a message naming the creator's size, and the ranks that
// agree with the creator go on.
TEST(Bootstrap, HellosDisagreeingWithTheCreatorAreRefusedAlone) {
  cclUniqueId id = newId();
  bootstrap::IdLayout layout;
  std::memcpy(&layout, id.internal, sizeof(layout));
  bootstrap::noteCreatorRanks(layout.secret, 3);  // what the creator's Bootstrap::connect does first
  for (int i = 0; i < 32; ++i) {
    const bootstrap::Reply r = helloClaiming(id, i % 7, 7 + i);
    ASSERT_EQ(r.status, cclInvalidUsage) << "hello " << i;
    ASSERT_NE(std::string(r.message).find("has 3 ranks"), std::string::npos) << r.message;
  }
  auto errors = runRanks(3, [&](int rank) {
    auto bs = Bootstrap::connect(id, rank, 3, kJoinTimeout);
    bs->barrier();
  });
  expectAllSucceeded(errors);
}

// A hello admitted before the creator's init, under a size the creator's init then
// contradicts, is told so when the creator joins; the creator's ranks complete.
TEST(Bootstrap, RanksAdmittedBeforeTheCreatorUnderAnotherSizeAreToldSo) {
  cclUniqueId id = newId();
  std::thread early([&] {
    const bootstrap::Reply r = helloClaiming(id, 4, 5);
    EXPECT_EQ(r.status, cclInvalidUsage);
    EXPECT_NE(std::string(r.message).find("has 3 ranks"), std::string::npos) << r.message;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // admitted first (if not, refused at once: the same)
  auto errors = runRanks(3, [&](int rank) {
    auto bs = Bootstrap::connect(id, rank, 3, kJoinTimeout);
    bs->barrier();
  });
  early.join();
  expectAllSucceeded(errors);
}

// Rank 1 of 4 passes the rendezvous and is gone before it connects its ring (its listener
// closed, as a killed process's is). The rank after it learns so from its listener's
// refusals, not at the init's deadline, and says which rank; the rank after that hears it
// on the ring. Before the probes, rank 2 waited for the whole timeout (cclSystemError).
TEST(Bootstrap, ARankGoneAfterTheRendezvousIsNamedBeforeTheDeadline) {
  constexpr int n = 4, gone = 1;
  cclUniqueId id = newId();
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r) {
    if (r == gone) continue;
    ranks.emplace_back([&, r] {
      try {
        Bootstrap::connect(id, r, n, kJoinTimeout)->barrier();
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  {
    bootstrap::Socket listener = bootstrap::Socket::listenOn(bootstrap::pickLocalAddress()), root;
    const bootstrap::Reply reply = hello(id, gone, n, listener.localAddr(), root);
    EXPECT_EQ(reply.status, cclSuccess) << reply.message;
    std::vector<bootstrap::WireAddr> table(n);
    if (reply.status == cclSuccess)
      root.recvAll(table.data(), table.size() * sizeof(bootstrap::WireAddr), bootstrap::deadlineAfter(kJoinTimeout));
  }  // gone: its listener and its connection to the root close here
  for (std::thread& t : ranks) t.join();
  std::string what;
  EXPECT_EQ(codeOf(errors[2], &what), cclRemoteError) << what;
  EXPECT_NE(what.find("rank 1, the previous one in the ring, never connected"), std::string::npos) << what;
  EXPECT_NE(codeOf(errors[3], &what), cclSuccess);
  EXPECT_NE(what.find("rank 1 is gone"), std::string::npos) << what;
  // Rank 0's connection to rank 1 was refused, or made before the listener closed and reset
  // after: either way it fails (which words it finds first is a race).
  EXPECT_NE(codeOf(errors[0], &what), cclSuccess);
}

TEST(Bootstrap, MoreRanksThanTheTagsHoldAreRefusedAtInit) {
  cclUniqueId id = newId();
  std::string what;
  auto errors = runRanks(1, [&](int) { Bootstrap::connect(id, 0, tags::kMaxRanks + 1, kJoinTimeout); });
  EXPECT_EQ(codeOf(errors[0], &what), cclInvalidArgument);
  EXPECT_NE(what.find("at most"), std::string::npos) << what;
}

// A process whose rendezvous is still waiting for ranks exits normally: the service thread
// neither keeps it alive nor crashes it during exit.
TEST(Bootstrap, PendingRendezvousDoesNotBlockExit) {
  pid_t pid = fork();
  if (pid == 0) {
    cclUniqueId id;
    bootstrap::createUniqueId(&id);
    std::exit(7);  // runs static destructors while the service thread waits in poll()
  }
  ASSERT_GT(pid, 0);
  int status = 0;
  pid_t got = 0;
  for (int i = 0; i < 2000 && got == 0; ++i) {
    got = waitpid(pid, &status, WNOHANG);
    if (got == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (got == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "the process did not exit";
  }
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 7);
}

}  // namespace
}  // namespace ccl::test
