// SPDX-License-Identifier: BSD-3-Clause
// Ranks as fork()ed processes for the transport tests: each child runs body(rank, id) and
// reports through its exit code; the parent never waits past a deadline.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "transport_test_util.h"

namespace ccl::test {

enum ChildExit { kOk = 0, kWrongData = 3, kError = 4, kUnexpectedError = 5 };

// Forks one child per rank running body(rank, id) -> exit code. Returns the exit codes (-1 for
// a child killed at the deadline or by a signal).
inline std::vector<int> forkRanks(int n, const std::function<int(int, const cclUniqueId&)>& body,
                                  std::chrono::seconds limit) {
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

}  // namespace ccl::test
