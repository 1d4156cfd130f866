// SPDX-License-Identifier: BSD-3-Clause
// The bootstrap's ports take connections from anyone who can reach them.
// - The rendezvous port (the root's, in the unique id): idle connections (connected, nothing
//   sent) must not be kept one descriptor each until the rendezvous deadline. A thousand of
//   them would use up a process at a common soft limit, so that its ranks could not open
//   their own sockets and every init failed (and the root's thread would spin on accept()
//   failing with EMFILE). The root keeps a bounded number of connections without a complete
//   hello, dropping the longest waiting.
// - A rank's ring port (where its previous rank connects): idle connections must not hold up
//   the previous rank's proof behind them (for 10 s each, up to the init's deadline, were
//   proofs read one at a time). Every connection is read side by side.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ccl/ccl.h"
#include "fuzz_common.h"
#include "transport/bootstrap/wire.h"

namespace {

int openDescriptors() {
  int n = 0;
  for (int fd = 0; fd < 65536; ++fd) n += fcntl(fd, F_GETFD) != -1 ? 1 : 0;
  return n;
}

// A non-blocking connect, given 2 s: the connected descriptor, or -1.
int connectOnce(const ccl::bootstrap::WireAddr& w) {
  sockaddr_storage ss;
  std::memset(&ss, 0, sizeof(ss));
  socklen_t len;
  if (w.family == AF_INET6) {
    auto* s = reinterpret_cast<sockaddr_in6*>(&ss);
    s->sin6_family = AF_INET6;
    s->sin6_port = w.port;
    s->sin6_scope_id = w.scopeId;
    std::memcpy(&s->sin6_addr, w.addr, 16);
    len = sizeof(sockaddr_in6);
  } else {
    auto* s = reinterpret_cast<sockaddr_in*>(&ss);
    s->sin_family = AF_INET;
    s->sin_port = w.port;
    std::memcpy(&s->sin_addr, w.addr, 4);
    len = sizeof(sockaddr_in);
  }
  const int fd = ::socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  pollfd p{fd, POLLOUT, 0};
  int err = 0;
  socklen_t elen = sizeof(err);
  if ((::connect(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0 || errno == EINPROGRESS) && ::poll(&p, 1, 2000) == 1 &&
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) == 0 && err == 0)
    return fd;
  ::close(fd);
  return -1;
}

TEST(RendezvousFlood, IdleConnectionsFromAnotherProcessDoNotStarveTheRanks) {
  constexpr int kIdle = 1000;
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  // This process at its open descriptors plus 400: fewer than the flood.
  rlimit tight = saved;
  tight.rlim_cur = std::min<rlim_t>(saved.rlim_cur, static_cast<rlim_t>(openDescriptors()) + 400);
  ASSERT_LT(tight.rlim_cur, static_cast<rlim_t>(kIdle)) << "the flood must outnumber the descriptors left";
  cclUniqueId id;
  ASSERT_EQ(cclGetUniqueId(&id), cclSuccess);
  ccl::bootstrap::IdLayout layout;
  std::memcpy(&layout, id.internal, sizeof(layout));
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &tight), 0);
  char host[INET6_ADDRSTRLEN] = "";
  inet_ntop(layout.root.family, layout.root.addr, host, sizeof(host));
  {
    // Held by another process until the end of this block.
    fuzz::IdleProcess flood(CCL_IDLE_CONNECTIONS, host, ntohs(layout.root.port), kIdle);
    EXPECT_GT(flood.held(), static_cast<int>(tight.rlim_cur)) << "the flood did not reach the port";
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the root meets the flood first

    cclComm_t comms[2] = {};
    cclResult_t rc[2] = {cclInternalError, cclInternalError};
    std::string why[2];
    std::vector<std::thread> ranks;
    for (int r = 0; r < 2; ++r)
      ranks.emplace_back([&, r] {
        rc[r] = cclCommInitRank(&comms[r], 2, id, r);
        if (rc[r] != cclSuccess) why[r] = cclGetLastError(nullptr);
      });
    for (auto& t : ranks) t.join();
    ranks.clear();
    for (int r = 0; r < 2; ++r) EXPECT_EQ(rc[r], cclSuccess) << "rank " << r << ": " << why[r];
    if (rc[0] == cclSuccess && rc[1] == cclSuccess) {
      int32_t sums[2] = {};
      for (int r = 0; r < 2; ++r)
        ranks.emplace_back([&, r] {
          int32_t mine = r + 1;
          EXPECT_EQ(cclAllReduce(&mine, &sums[r], 1, cclInt32, cclSum, comms[r], nullptr), cclSuccess);
        });
      for (auto& t : ranks) t.join();
      EXPECT_EQ(sums[0], 3);
      EXPECT_EQ(sums[1], 3);
    }
    for (cclComm_t c : comms)
      if (c) cclCommDestroy(c);
  }
  setrlimit(RLIMIT_NOFILE, &saved);
}

TEST(RingListener, IdleConnectionsDoNotHoldUpTheInit) {
  // Long enough that waiting for it shows: before, each idle connection cost 10 s.
  const char* before = std::getenv("CCL_TIMEOUT");
  const std::string saved = before ? before : "";
  setenv("CCL_TIMEOUT", "30", 1);
  cclUniqueId id;
  ASSERT_EQ(cclGetUniqueId(&id), cclSuccess);
  ccl::bootstrap::IdLayout layout;
  std::memcpy(&layout, id.internal, sizeof(layout));
  const std::set<int> known = fuzz::listeningPorts();

  cclComm_t comms[2] = {};
  cclResult_t rc[2] = {cclInternalError, cclInternalError};
  std::thread first([&] { rc[0] = cclCommInitRank(&comms[0], 2, id, 0); });
  // Rank 0's ring port appears when it joins; three idle connections to it, then rank 1.
  std::vector<int> idle;
  for (int tries = 0; tries < 200 && idle.empty(); ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    for (const int port : fuzz::listeningPorts()) {
      if (known.count(port)) continue;
      ccl::bootstrap::WireAddr to = layout.root;
      to.port = htons(static_cast<uint16_t>(port));
      for (int k = 0; k < 3; ++k)
        if (const int fd = connectOnce(to); fd >= 0) idle.push_back(fd);
    }
  }
  EXPECT_EQ(idle.size(), 3u) << "could not reach rank 0's ring port";
  const auto start = std::chrono::steady_clock::now();
  std::thread second([&] { rc[1] = cclCommInitRank(&comms[1], 2, id, 1); });
  first.join();
  second.join();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(rc[0], cclSuccess);
  EXPECT_EQ(rc[1], cclSuccess);
  EXPECT_LT(took, 10.0) << "idle connections to a ring port held the init up";
  for (cclComm_t c : comms)
    if (c) cclCommDestroy(c);
  for (const int fd : idle) close(fd);
  if (before) {
    setenv("CCL_TIMEOUT", saved.c_str(), 1);
  } else {
    unsetenv("CCL_TIMEOUT");
  }
}

}  // namespace
