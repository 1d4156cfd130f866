/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the process tests share: the parent makes one cclUniqueId, forks one child per rank
 * (child r exits with the status run_rank(id, r) returns), waits for a rank with a
 * deadline and ends the rest. C99 and POSIX, header-only (each test is one C file).
 */
#ifndef CCL_TESTS_FORK_RANKS_H
#define CCL_TESTS_FORK_RANKS_H

#include <signal.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ccl/ccl.h>

/* Forks nranks children into pids[]; child r exits with run_rank(id, r, arg). A failed fork
 * leaves pids[r] < 0 (said on stderr). Returns the number of ranks forked. */
static inline int fork_ranks(cclUniqueId id, int nranks, int (*run_rank)(cclUniqueId, int, void*), void* arg,
                             pid_t* pids) {
  int r, forked = 0;
  fflush(stdout);
  fflush(stderr);
  for (r = 0; r < nranks; ++r) {
    pids[r] = fork();
    if (pids[r] == 0) _exit(run_rank(id, r, arg));
    if (pids[r] < 0)
      perror("fork");
    else
      ++forked;
  }
  return forked;
}

/* Waits until `pid` exits (1, with its wait status in *status) or time(NULL) passes
 * `deadline` (0; the process is left running), polling every 10 ms. */
static inline int wait_until(pid_t pid, time_t deadline, int* status) {
  const struct timespec tick = {0, 10 * 1000 * 1000};
  for (;;) {
    if (waitpid(pid, status, WNOHANG) == pid) return 1;
    if (time(NULL) > deadline) return 0;
    nanosleep(&tick, NULL);
  }
}

/* Whether a wait status is a normal exit with status 0. */
static inline int exited_cleanly(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

/* Kills and reaps every process of pids[] that is still there (pid > 0); sets them to 0. */
static inline void end_ranks(pid_t* pids, int nranks) {
  int r;
  for (r = 0; r < nranks; ++r) {
    if (pids[r] <= 0) continue;
    kill(pids[r], SIGKILL);
    waitpid(pids[r], NULL, 0);
    pids[r] = 0;
  }
}

#endif
