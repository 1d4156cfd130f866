/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A stopped rank named by a rank that is not its neighbour, while its neighbours are idle.
 * Four ranks as processes (a bootstrap ring 0-1-2-3): rank 2 stops itself (SIGSTOP) after
 * the first call; ranks 1 and 3, its ring neighbours, make no call at all; rank 0 waits for
 * a message from rank 2 that never comes. Rank 0's call times out (CCL_TIMEOUT 3 s) with no
 * quiet neighbour of its own, so its error can name rank 2 only if it asks the ring and the
 * idle neighbours answer from rank 2's missing pulses. Exit status 0 when rank 0's error
 * names rank 2; the parent kills rank 2 and ends the others.
 */
#define _POSIX_C_SOURCE 200809L

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ccl/ccl.h>

#include "fork_ranks.h"

#define NRANKS 4
#define VICTIM 2
#define DEADLINE_SECONDS 40

static int run_rank(cclUniqueId id, int rank, void* unused) {
  (void)unused;
  cclComm_t comm;
  float x = 1.0f;
  cclResult_t r;
  if (cclCommInitRank(&comm, NRANKS, id, rank) != cclSuccess) {
    fprintf(stderr, "rank %d: cclCommInitRank: %s\n", rank, cclGetLastError(NULL));
    return 2;
  }
  /* Every rank is up, and has pulsed, before anything stops. */
  if (cclAllReduce(&x, &x, 1, cclFloat32, cclSum, comm, NULL) != cclSuccess) {
    fprintf(stderr, "rank %d: first allreduce: %s\n", rank, cclGetLastError(comm));
    return 2;
  }
  if (rank == VICTIM) {
    raise(SIGSTOP);
    return 0;
  }
  if (rank != 0) {
    /* The victim's neighbours: idle, never timing out themselves. */
    sleep(DEADLINE_SECONDS);
    return 0;
  }
  sleep(1); /* the victim is stopped, its pulses missing for longer than CCL_PEER_SILENCE_MS */
  r = cclRecv(&x, 1, cclFloat32, VICTIM, comm, NULL);
  if (r == cclSuccess) {
    fprintf(stderr, "rank 0: a receive from the stopped rank succeeded\n");
    return 1;
  }
  fprintf(stderr, "rank 0: %s\n", cclGetLastError(comm));
  if (!strstr(cclGetLastError(comm), "rank 2 ")) {
    fprintf(stderr, "rank 0: the error does not name rank 2\n");
    return 1;
  }
  return 0;
}

int main(void) {
  cclUniqueId id;
  pid_t pids[NRANKS];
  int status = 0, ok;
  setenv("CCL_TIMEOUT", "3", 1);
  setenv("CCL_PEER_SILENCE_MS", "500", 1);
  if (cclGetUniqueId(&id) != cclSuccess) {
    fprintf(stderr, "cclGetUniqueId: %s\n", cclGetLastError(NULL));
    return 1;
  }
  if (fork_ranks(id, NRANKS, run_rank, NULL, pids) != NRANKS) {
    end_ranks(pids, NRANKS);
    return 1;
  }
  /* Rank 0 decides; a hang past the deadline is a failure. */
  ok = wait_until(pids[0], time(NULL) + DEADLINE_SECONDS, &status);
  if (ok)
    pids[0] = 0;
  else
    fprintf(stderr, "rank 0 missed the %d s deadline\n", DEADLINE_SECONDS);
  end_ranks(pids, NRANKS);
  if (!ok || !exited_cleanly(status)) {
    printf("failed\n");
    return 1;
  }
  printf("rank 0's error names the stopped rank\n");
  return 0;
}
