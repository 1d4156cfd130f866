// SPDX-License-Identifier: BSD-3-Clause
#include "transport/bootstrap/bootstrap.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "common/tags.h"
#include "transport/bootstrap/ring.h"
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

// An interface address as getifaddrs would list it.
bootstrap::InterfaceAddress ifaddr(const char* name, const char* address, unsigned flags = IFF_UP) {
  bootstrap::InterfaceAddress a;
  a.name = name;
  a.flags = flags;
  const bool v6 = std::strchr(address, ':') != nullptr;
  a.addr.family = v6 ? AF_INET6 : AF_INET;
  EXPECT_EQ(inet_pton(a.addr.family, address, a.addr.addr), 1) << address;
  return a;
}

// The bootstrap's interface, chosen as NCCL does by default: an interface other hosts reach
// before the host-only bridges and virtual links of containers and VMs (which getifaddrs
// often lists first, and which the first-up rule took), loopback last; a named interface
// whatever it is.
TEST(Bootstrap, InterfaceChoiceSkipsHostOnlyBridges) {
  using bootstrap::chooseInterface;
  const std::vector<bootstrap::InterfaceAddress> host = {ifaddr("lo", "127.0.0.1", IFF_UP | IFF_LOOPBACK),
                                                         ifaddr("docker0", "172.17.0.1"),
                                                         ifaddr("br-5f2a9c", "172.18.0.1"),
                                                         ifaddr("virbr0", "192.168.122.1"),
                                                         ifaddr("veth12ab", "169.254.7.7"),
                                                         ifaddr("eth0", "10.0.0.5"),
                                                         ifaddr("eth1", "10.1.0.5"),
                                                         ifaddr("lo", "::1", IFF_UP | IFF_LOOPBACK),
                                                         ifaddr("docker0", "fe80::42:1"),
                                                         ifaddr("eth0", "fe80::1"),
                                                         ifaddr("eth0", "2001:db8::5")};
  EXPECT_EQ(chooseInterface(host, AF_INET, ""), 5) << "eth0, the first interface other hosts reach";
  EXPECT_EQ(chooseInterface(host, AF_INET6, ""), 10) << "eth0's global address before its link-local one";
  // Named: that interface, a bridge or loopback included.
  EXPECT_EQ(chooseInterface(host, AF_INET, "docker0"), 1);
  EXPECT_EQ(chooseInterface(host, AF_INET, "lo"), 0);
  EXPECT_EQ(chooseInterface(host, AF_INET, "eth1"), 6);
  EXPECT_EQ(chooseInterface(host, AF_INET6, "docker0"), 8);
  EXPECT_EQ(chooseInterface(host, AF_INET, "wlan0"), -1);
  // Nothing else up: a host-only bridge before loopback (it reaches this host's containers).
  const std::vector<bootstrap::InterfaceAddress> bridgesOnly = {
      ifaddr("lo", "127.0.0.1", IFF_UP | IFF_LOOPBACK), ifaddr("eth0", "10.0.0.5", 0),
      ifaddr("virbr0", "192.168.122.1"), ifaddr("docker0", "172.17.0.1")};
  EXPECT_EQ(chooseInterface(bridgesOnly, AF_INET, ""), 2) << "eth0 is down";
  const std::vector<bootstrap::InterfaceAddress> loopbackOnly = {ifaddr("docker0", "172.17.0.1", 0),
                                                                 ifaddr("lo", "127.0.0.1", IFF_UP | IFF_LOOPBACK)};
  EXPECT_EQ(chooseInterface(loopbackOnly, AF_INET, ""), 1);
  EXPECT_EQ(chooseInterface(loopbackOnly, AF_INET6, ""), -1);
  for (const char* name : {"docker0", "docker_gwbridge", "virbr0", "virbr1-nic", "veth0a1b2c", "br-0123456789ab"})
    EXPECT_TRUE(bootstrap::hostOnlyInterface(name)) << name;
  for (const char* name : {"eth0", "ens5", "enp0s31f6", "ib0", "bond0", "wlan0", "br0", "lo"})
    EXPECT_FALSE(bootstrap::hostOnlyInterface(name)) << name;
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

// A connected pair of loopback TCP sockets.
std::array<bootstrap::Socket, 2> connectedPair() {
  bootstrap::WireAddr lo{};
  lo.family = AF_INET;
  const uint8_t loopback[4] = {127, 0, 0, 1};
  std::memcpy(lo.addr, loopback, sizeof loopback);
  bootstrap::Socket listener = bootstrap::Socket::listenOn(lo);
  const auto deadline = bootstrap::deadlineAfter(std::chrono::seconds(10));
  bootstrap::Socket a = bootstrap::Socket::connectTo(listener.localAddr(), deadline);
  return {std::move(a), listener.accept(deadline)};
}

// Rank `rank` of `n` as a ring bootstrap over the given ring connections, without a
// rendezvous; its pulse connections' far ends go to `silent` (kept open, never written).
std::unique_ptr<bootstrap::RingBootstrap> ringOver(int rank, int n, bootstrap::Socket next, bootstrap::Socket prev,
                                                   std::vector<bootstrap::Socket>& silent) {
  std::array<bootstrap::Socket, bootstrap::kChannels> nexts, prevs;
  nexts[bootstrap::kRingChannel] = std::move(next);
  prevs[bootstrap::kRingChannel] = std::move(prev);
  for (auto* s : {&nexts[bootstrap::kPulseChannel], &prevs[bootstrap::kPulseChannel]}) {
    auto pair = connectedPair();
    *s = std::move(pair[0]);
    silent.push_back(std::move(pair[1]));
  }
  return std::make_unique<bootstrap::RingBootstrap>(rank, n, std::move(nexts), std::move(prevs), bootstrap::Socket(),
                                                    std::vector<bootstrap::WireAddr>(n), bootstrap::IdLayout{},
                                                    std::chrono::milliseconds(0), std::chrono::seconds(10));
}

// A ring bootstrap whose neighbours are the test: prevEnd and nextEnd are the far ends of its
// ring connections to its previous and next rank.
struct FakeNeighbours {
  std::vector<bootstrap::Socket> silent;
  bootstrap::Socket prevEnd, nextEnd;
  std::unique_ptr<bootstrap::RingBootstrap> bs;
};

FakeNeighbours ringWithFakeNeighbours(int rank, int n) {
  FakeNeighbours f;
  auto toNext = connectedPair(), toPrev = connectedPair();
  f.nextEnd = std::move(toNext[1]);
  f.prevEnd = std::move(toPrev[1]);
  f.bs = ringOver(rank, n, std::move(toNext[0]), std::move(toPrev[0]), f.silent);
  return f;
}

// Asks lostNeighbour until it names a rank (a connection's end can take a moment to be seen);
// what it last said if it names none within 10 s.
int lostNeighbourSoon(Bootstrap& bs) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    const int lost = bs.lostNeighbour();
    if (lost >= 0 || std::chrono::steady_clock::now() > until) return lost;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// The previous rank sends its part of a broadcast and dies (its connection ends without a
// goodbye or news) before this rank reads it. The watcher's look names the previous rank,
// whatever the unread bytes hold. It took their first bytes for the end's message: a size of
// 76 ('L', then 0s) read as the news that rank 0 was lost, one of 71 ('G') as a goodbye.
TEST(BootstrapRing, UnreadBytesOfACollectiveAreNotTakenForTheEndsMessage) {
  for (uint64_t size : {uint64_t{'L'}, uint64_t{'G'}}) {
    FakeNeighbours f = ringWithFakeNeighbours(2, 4);
    std::vector<char> payload(size, 'L');
    const auto deadline = bootstrap::deadlineAfter(std::chrono::seconds(10));
    f.prevEnd.sendAll(&size, sizeof size, deadline);
    f.prevEnd.sendAll(payload.data(), payload.size(), deadline);
    f.prevEnd = bootstrap::Socket();  // rank 1 is gone
    EXPECT_EQ(lostNeighbourSoon(*f.bs), 1) << "a broadcast of " << size << " bytes";
  }
}

// The previous rank sends its part of a broadcast whose last bytes look like the news of a
// lost rank ('L' and rank 0), then dies. This rank's next collective fails naming the previous
// rank, not rank 0: the bytes were the broadcast's, read by it, and no news followed.
TEST(BootstrapRing, ACollectivesLastBytesAreNotTakenForNews) {
  FakeNeighbours f = ringWithFakeNeighbours(2, 4);
  const uint64_t size = 8;
  const char payload[8] = {0, 0, 0, 'L', 0, 0, 0, 0};
  const auto deadline = bootstrap::deadlineAfter(std::chrono::seconds(10));
  f.prevEnd.sendAll(&size, sizeof size, deadline);
  f.prevEnd.sendAll(payload, sizeof payload, deadline);
  char got[8] = {};
  f.bs->broadcast(got, sizeof got, 1);
  EXPECT_EQ(std::memcmp(got, payload, sizeof got), 0);
  f.prevEnd = bootstrap::Socket();  // rank 1 is gone
  std::string what;
  EXPECT_EQ(codeOf(runRanks(1, [&](int) { f.bs->barrier(); })[0], &what), cclRemoteError);
  EXPECT_NE(what.find("rank 1 is gone"), std::string::npos) << what;
}

// Ranks 0 and 1 of 3 as ring bootstraps; rank 2 is the test, silent. Rank 0 has sent the size
// of its part of an allGather when it learns that rank 2 is lost and tells rank 1, whose
// allGather then reads the news where it expects rank 0's data: it fails naming rank 2,
// whatever the size of its slots. (Slots the news filled completed the allGather with it.)
TEST(BootstrapRing, NewsReadAsACollectivesDataFailsIt) {
  for (size_t slot = 1; slot <= 20; ++slot) {
    std::vector<bootstrap::Socket> silent;
    auto zeroToOne = connectedPair(), oneToTwo = connectedPair(), twoToZero = connectedPair();
    auto zero = ringOver(0, 3, std::move(zeroToOne[0]), std::move(twoToZero[1]), silent);
    auto one = ringOver(1, 3, std::move(oneToTwo[0]), std::move(zeroToOne[1]), silent);
    std::vector<char> data0(3 * slot), data1(3 * slot);
    std::thread zeroGathers([&] {
      try {
        zero->allGather(data0.data(), slot);  // sends its size, then waits for rank 2's
      } catch (const Error&) {
      }
    });
    pollfd sizeSent{one->ringFds()[0], POLLIN, 0};  // rank 1's connection from rank 0
    ASSERT_EQ(::poll(&sizeSent, 1, 10000), 1);
    zero->relayLost(2);
    zeroGathers.join();
    std::string what;
    EXPECT_EQ(codeOf(runRanks(1, [&](int) { one->allGather(data1.data(), slot); })[0], &what), cclRemoteError)
        << "slots of " << slot << " bytes";
    EXPECT_NE(what.find("rank 2 is gone"), std::string::npos) << "slots of " << slot << " bytes: " << what;
  }
}

// The news of a lost rank read where a collective expects the size of the previous rank's
// part: the ring ended (cclRemoteError, naming the rank), not a disagreement on the size.
TEST(BootstrapRing, NewsReadWhereASizeIsDueIsTheRingsEnd) {
  for (bool viaBroadcast : {false, true}) {
    std::vector<bootstrap::Socket> silent;
    auto oneToTwo = connectedPair(), twoToThree = connectedPair(), zeroToOne = connectedPair();
    auto one = ringOver(1, 4, std::move(oneToTwo[0]), std::move(zeroToOne[1]), silent);
    auto two = ringOver(2, 4, std::move(twoToThree[0]), std::move(oneToTwo[1]), silent);
    one->relayLost(3);
    std::vector<char> data(4 * 4);
    std::string what;
    const auto errors = runRanks(1, [&](int) {
      if (viaBroadcast)
        two->broadcast(data.data(), 4, 1);
      else
        two->allGather(data.data(), 4);
    });
    EXPECT_EQ(codeOf(errors[0], &what), cclRemoteError) << what;
    EXPECT_NE(what.find("rank 3 is gone"), std::string::npos) << what;
  }
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
