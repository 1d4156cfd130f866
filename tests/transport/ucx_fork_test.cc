// SPDX-License-Identifier: BSD-3-Clause
// Ranks as fork()ed processes: the bootstrap and UCX across address spaces. Children report
// through their exit code; the parent never waits past a deadline.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "transport/ucx/ucx_transport.h"
#include "transport_test_util.h"

namespace ccl::test {
namespace {

using bootstrap::Bootstrap;

enum ChildExit { kOk = 0, kWrongData = 3, kError = 4, kUnexpectedError = 5 };

// Forks one child per rank running body(rank, id) -> exit code. Returns the exit codes (-1 for
// a child killed at the deadline or by a signal).
std::vector<int> forkRanks(int n, const std::function<int(int, const cclUniqueId&)>& body, std::chrono::seconds limit) {
  // Children start only once all are forked: a fork() while the rendezvous thread of this
  // process serves an earlier child could copy a lock held by that thread (malloc, or the
  // mmap hooks of UCX's libucm) into the new child, which would then deadlock.
  int gate[2];
  if (pipe(gate) != 0) ADD_FAILURE() << "pipe failed: " << std::strerror(errno);
  // The id, and with it the rendezvous thread, is made by child 0 after the forks: a thread
  // of this process could hold the (sanitizer's) allocator lock at the moment of a fork, and
  // the child's UCX thread would then block on that lock forever.
  int idPipe[2];
  if (pipe(idPipe) != 0) ADD_FAILURE() << "pipe failed: " << std::strerror(errno);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      close(gate[1]);
      char c;
      while (read(gate[0], &c, 1) < 0 && errno == EINTR) {
      }
      int code = kUnexpectedError;
      try {
        cclUniqueId id{};
        if (r == 0) {
          id = newId();
          for (int k = 1; k < n; ++k)  // one record per child; writes below PIPE_BUF are atomic
            if (write(idPipe[1], &id, sizeof(id)) != static_cast<ssize_t>(sizeof(id))) _exit(kError);
        } else if (read(idPipe[0], &id, sizeof(id)) != static_cast<ssize_t>(sizeof(id))) {
          _exit(kError);
        }
        code = body(r, id);
      } catch (const std::exception& e) {
        fprintf(stderr, "rank %d: %s\n", r, e.what());
        code = kError;
      }
      _exit(code);  // no gtest teardown or atexit handlers in the child
    }
    if (pid < 0) ADD_FAILURE() << "fork failed: " << std::strerror(errno);
    pids.push_back(pid);
  }
  close(idPipe[0]);
  close(idPipe[1]);
  close(gate[0]);
  close(gate[1]);  // releases the children
  std::vector<int> codes(n, -1);
  auto deadline = std::chrono::steady_clock::now() + limit;
  int left = n;
  while (left > 0) {
    for (int r = 0; r < n; ++r) {
      if (pids[r] <= 0) continue;
      int status = 0;
      pid_t got = waitpid(pids[r], &status, WNOHANG);
      if (got == pids[r] || got < 0) {
        codes[r] = (got > 0 && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
        pids[r] = 0;
        --left;
      }
    }
    if (left > 0 && std::chrono::steady_clock::now() > deadline) {
      for (pid_t p : pids)
        if (p > 0) kill(p, SIGKILL), waitpid(p, nullptr, 0);
      ADD_FAILURE() << "child ranks did not finish within " << limit.count() << " s";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return codes;
}

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
