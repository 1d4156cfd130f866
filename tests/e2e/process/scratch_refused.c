/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A rank that cannot get the scratch memory of a call tells its peers. Two ranks as
 * processes; rank 1 limits its address space (RLIMIT_AS) to what it uses plus a margin, then
 * both call an fp16 average reduce-scatter, whose input is scaled into scratch as large as
 * the send buffer (256 MiB): rank 1's allocation fails before its part of the call starts.
 * Its call must fail (cclSystemError), and so must rank 0's, at once, not after CCL_TIMEOUT
 * (60 s here): rank 0 must return within 30 s with an error, while rank 1 stays alive (a
 * rank that exits is seen gone at once without its word). Exit status 0 when both did.
 * Not under a sanitizer: they reserve address space beyond any such limit.
 */
#define _POSIX_C_SOURCE 200809L

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ccl/ccl.h>

#include "fork_ranks.h"

#define NRANKS 2
#define VICTIM 1
#define COUNT ((size_t)64 << 20) /* fp16 elements of the result: 128 MiB; the input 256 MiB */
#define PROMPT_SECONDS 30
#define DEADLINE_SECONDS 100

/* This process's address space in bytes (/proc/self/statm's first field, in pages). */
static size_t address_space(void) {
  unsigned long pages = 0;
  FILE* f = fopen("/proc/self/statm", "r");
  if (!f) return 0;
  if (fscanf(f, "%lu", &pages) != 1) pages = 0;
  fclose(f);
  return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

static int run_rank(cclUniqueId id, int rank, void* unused) {
  (void)unused;
  cclComm_t comm;
  cclResult_t r;
  struct timespec t0, t1;
  double seconds;
  uint16_t* send = malloc(COUNT * NRANKS * sizeof(uint16_t));
  uint16_t* recv = malloc(COUNT * sizeof(uint16_t));
  size_t i;
  if (!send || !recv) {
    fprintf(stderr, "rank %d: no memory for the buffers\n", rank);
    return 2;
  }
  for (i = 0; i < COUNT * NRANKS; ++i) send[i] = 0x3c00; /* 1.0 */
  if (cclCommInitRank(&comm, NRANKS, id, rank) != cclSuccess) {
    fprintf(stderr, "rank %d: cclCommInitRank: %s\n", rank, cclGetLastError(NULL));
    return 2;
  }
  if (rank == VICTIM) {
    struct rlimit limit;
    limit.rlim_cur = limit.rlim_max = address_space() + ((size_t)48 << 20);
    if (setrlimit(RLIMIT_AS, &limit) != 0) {
      perror("setrlimit");
      return 2;
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &t0);
  r = cclReduceScatter(send, recv, COUNT, cclFloat16, cclAvg, comm, NULL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  fprintf(stderr, "rank %d: %s after %.2f s: %s\n", rank, cclGetErrorString(r), seconds,
          r == cclSuccess ? "" : cclGetLastError(comm));
  if (r == cclSuccess) {
    fprintf(stderr, "rank %d: the call succeeded; the limit did not refuse the scratch\n", rank);
    return 1;
  }
  if (seconds > PROMPT_SECONDS) {
    fprintf(stderr, "rank %d: the error came after the peers' timeout, not from the failed rank\n", rank);
    return 1;
  }
  if (rank == VICTIM) {
    /* Alive until the parent ends it: a rank that exits is seen gone at once, which would
     * tell the peer without this rank's word. */
    fflush(stderr);
    sleep(DEADLINE_SECONDS);
    return 1;
  }
  cclCommAbort(comm);
  return 0;
}

int main(void) {
  cclUniqueId id;
  pid_t pids[NRANKS];
  int status = 0, result = 0;
  setenv("CCL_TIMEOUT", "60", 1);
  if (cclGetUniqueId(&id) != cclSuccess) {
    fprintf(stderr, "cclGetUniqueId: %s\n", cclGetLastError(NULL));
    return 1;
  }
  if (fork_ranks(id, NRANKS, run_rank, NULL, pids) != NRANKS) {
    end_ranks(pids, NRANKS);
    return 1;
  }
  /* Rank 0's verdict; the victim must still be alive then (it exits early only on failure). */
  if (!wait_until(pids[0], time(NULL) + DEADLINE_SECONDS, &status)) {
    fprintf(stderr, "rank 0: no exit within %d s\n", DEADLINE_SECONDS);
    result = 1;
  } else {
    pids[0] = 0;
    if (!exited_cleanly(status)) result = 1;
  }
  if (waitpid(pids[VICTIM], &status, WNOHANG) == pids[VICTIM]) {
    fprintf(stderr, "rank %d exited before rank 0's call ended\n", VICTIM);
    pids[VICTIM] = 0;
    result = 1;
  }
  end_ranks(pids, NRANKS);
  return result;
}
