/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Ranks as processes: the parent creates one cclUniqueId, forks 4 ranks that each join the
 * communicator and run every collective with odd counts on int32 and float data, checking
 * exact results that every rank can compute on its own. The parent kills ranks that miss
 * the deadline; the exit status is 0 only when every rank passed. With an argument L, rank r
 * sets CCL_HOST_ID to "node<r / L>" before it joins: nodes of L ranks, so every collective
 * that has a hierarchical algorithm runs it (CCL_ALGO=auto), between processes.
 * The ranks run with CCL_TIMEOUT at a third of the deadline (unless set): a wait that stalls
 * reports itself, saying what it waited for, before the parent kills anything. A rank that
 * still misses the deadline has each of its threads' kernel state printed (/proc) first.
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

#include <dirent.h>

#include <ccl/ccl.h>

#include "fork_ranks.h"

#define NRANKS 4
#define DEADLINE_SECONDS 60

static const size_t kCounts[] = {1, 7, 1001, 100003};
#define NUM_COUNTS (sizeof(kCounts) / sizeof(kCounts[0]))

/* Failures of this rank; each is printed once with enough context to reproduce it. */
static int g_failures = 0;
static int g_rank = -1;

static void fail(const char* what, size_t count, size_t index, double got, double want) {
  if (g_failures < 20)
    fprintf(stderr, "rank %d: %s count %zu element %zu: got %.9g want %.9g\n", g_rank, what, count, index, got, want);
  ++g_failures;
}

static int ok(cclResult_t r, const char* what, size_t count) {
  if (r == cclSuccess) return 1;
  fprintf(stderr, "rank %d: %s count %zu -> %s: %s\n", g_rank, what, count, cclGetErrorString(r),
          cclGetLastError(NULL));
  ++g_failures;
  return 0;
}

/* Element i of rank r's int32 input: small, so every sum, product and average is exact. */
static int32_t ival(int r, size_t i) { return (int32_t)((i * 7 + (size_t)r * 13) % 101) - 50; }
static int32_t pval(int r, size_t i) { return (int32_t)((i + (size_t)r) % 3 == 0 ? 2 : 1); }
static float fval(int r, size_t i) { return (float)((int)((i * 5 + (size_t)r * 3) % 17) - 8); }

static void check_int(const char* what, const int32_t* got, size_t count, size_t n, int32_t (*want)(size_t, void*),
                      void* ctx) {
  size_t i;
  for (i = 0; i < n; ++i) {
    int32_t w = want(i, ctx);
    if (got[i] != w) fail(what, count, i, got[i], w);
  }
}

struct RedCtx {
  cclRedOp_t op;
  size_t base;
};

static int32_t int_reduced(size_t i, void* p) {
  const struct RedCtx* c = (const struct RedCtx*)p;
  int64_t acc = c->op == cclProd ? pval(0, c->base + i) : ival(0, c->base + i);
  int r;
  for (r = 1; r < NRANKS; ++r) {
    int32_t x = c->op == cclProd ? pval(r, c->base + i) : ival(r, c->base + i);
    switch (c->op) {
      case cclSum:
      case cclAvg:
        acc += x;
        break;
      case cclProd:
        acc *= x;
        break;
      case cclMax:
        if (x > acc) acc = x;
        break;
      case cclMin:
        if (x < acc) acc = x;
        break;
      default:
        break;
    }
  }
  if (c->op == cclAvg) acc /= NRANKS; /* C division truncates toward zero, as the library's */
  return (int32_t)acc;
}

static float float_sum(size_t i) {
  float s = 0;
  int r;
  for (r = 0; r < NRANKS; ++r) s += fval(r, i);
  return s;
}

static void allreduce_all_ops(cclComm_t comm, int rank, size_t count) {
  static const cclRedOp_t ops[] = {cclSum, cclProd, cclMax, cclMin, cclAvg};
  static const char* names[] = {"allreduce int32 sum", "allreduce int32 prod", "allreduce int32 max",
                                "allreduce int32 min", "allreduce int32 avg"};
  int32_t* in = malloc(count * sizeof(int32_t));
  int32_t* out = malloc(count * sizeof(int32_t));
  float* fin = malloc(count * sizeof(float));
  float* fout = malloc(count * sizeof(float));
  size_t k, i;
  for (k = 0; k < 5; ++k) {
    struct RedCtx ctx;
    ctx.op = ops[k];
    ctx.base = 0;
    for (i = 0; i < count; ++i) in[i] = ops[k] == cclProd ? pval(rank, i) : ival(rank, i);
    if (ok(cclAllReduce(in, out, count, cclInt32, ops[k], comm, NULL), names[k], count))
      check_int(names[k], out, count, count, int_reduced, &ctx);
  }
  for (i = 0; i < count; ++i) fin[i] = fval(rank, i);
  if (ok(cclAllReduce(fin, fout, count, cclFloat32, cclSum, comm, NULL), "allreduce float sum", count))
    for (i = 0; i < count; ++i)
      if (fout[i] != float_sum(i)) fail("allreduce float sum", count, i, fout[i], float_sum(i));
  if (ok(cclAllReduce(fin, fout, count, cclFloat32, cclAvg, comm, NULL), "allreduce float avg", count))
    for (i = 0; i < count; ++i) /* a sum of integers over 4 ranks divides exactly */
      if (fout[i] != float_sum(i) / NRANKS) fail("allreduce float avg", count, i, fout[i], float_sum(i) / NRANKS);
  free(in);
  free(out);
  free(fin);
  free(fout);
}

static void rooted_and_gathers(cclComm_t comm, int rank, size_t count) {
  const size_t total = count * NRANKS;
  float* f = malloc(total * sizeof(float));
  float* g = malloc(total * sizeof(float));
  int32_t* a = malloc(total * sizeof(int32_t));
  int32_t* b = malloc(total * sizeof(int32_t));
  size_t i;
  struct RedCtx ctx;

  for (i = 0; i < count; ++i) f[i] = fval(rank, i);
  if (ok(cclBroadcast(f, g, count, cclFloat32, NRANKS - 1, comm, NULL), "broadcast float", count))
    for (i = 0; i < count; ++i)
      if (g[i] != fval(NRANKS - 1, i)) fail("broadcast float", count, i, g[i], fval(NRANKS - 1, i));

  for (i = 0; i < count; ++i) a[i] = ival(rank, i);
  ctx.op = cclMax;
  ctx.base = 0;
  if (ok(cclReduce(a, b, count, cclInt32, cclMax, 2, comm, NULL), "reduce int32 max", count) && rank == 2)
    check_int("reduce int32 max", b, count, count, int_reduced, &ctx);

  for (i = 0; i < count; ++i) f[i] = fval(rank, i);
  if (ok(cclAllGather(f, g, count, cclFloat32, comm, NULL), "allgather float", count))
    for (i = 0; i < total; ++i)
      if (g[i] != fval((int)(i / count), i % count))
        fail("allgather float", count, i, g[i], fval((int)(i / count), i % count));

  for (i = 0; i < total; ++i) a[i] = ival(rank, i);
  ctx.op = cclSum;
  ctx.base = (size_t)rank * count;
  if (ok(cclReduceScatter(a, b, count, cclInt32, cclSum, comm, NULL), "reducescatter int32 sum", count))
    check_int("reducescatter int32 sum", b, count, count, int_reduced, &ctx);

  /* alltoall: block j of rank r holds ival(r, j*count + i); rank r receives block r of each. */
  for (i = 0; i < total; ++i) a[i] = ival(rank, i);
  if (ok(cclAlltoAll(a, b, count, cclInt32, comm, NULL), "alltoall int32", count))
    for (i = 0; i < total; ++i) {
      int32_t w = ival((int)(i / count), (size_t)rank * count + i % count);
      if (b[i] != w) fail("alltoall int32", count, i, b[i], w);
    }

  for (i = 0; i < count; ++i) a[i] = ival(rank, i);
  if (ok(cclGather(a, b, count, cclInt32, 0, comm, NULL), "gather int32", count) && rank == 0)
    for (i = 0; i < total; ++i)
      if (b[i] != ival((int)(i / count), i % count))
        fail("gather int32", count, i, b[i], ival((int)(i / count), i % count));

  for (i = 0; i < total; ++i) f[i] = fval(rank + 10, i);
  if (ok(cclScatter(f, g, count, cclFloat32, 1, comm, NULL), "scatter float", count))
    for (i = 0; i < count; ++i) {
      float w = fval(1 + 10, (size_t)rank * count + i);
      if (g[i] != w) fail("scatter float", count, i, g[i], w);
    }
  free(f);
  free(g);
  free(a);
  free(b);
}

static void sendrecv_ring(cclComm_t comm, int rank, size_t count) {
  const int next = (rank + 1) % NRANKS, prev = (rank + NRANKS - 1) % NRANKS;
  int32_t* out = malloc(count * sizeof(int32_t));
  int32_t* in = malloc(count * sizeof(int32_t));
  cclResult_t first = cclSuccess, r;
  size_t i;
  for (i = 0; i < count; ++i) out[i] = ival(rank, i);
  first = cclGroupStart();
  r = cclSend(out, count, cclInt32, next, comm, NULL);
  if (first == cclSuccess) first = r;
  r = cclRecv(in, count, cclInt32, prev, comm, NULL);
  if (first == cclSuccess) first = r;
  r = cclGroupEnd();
  if (first == cclSuccess) first = r;
  if (ok(first, "send/recv ring int32", count))
    for (i = 0; i < count; ++i)
      if (in[i] != ival(prev, i)) fail("send/recv ring int32", count, i, in[i], ival(prev, i));
  free(out);
  free(in);
}

static int run_rank(cclUniqueId id, int rank, void* arg) {
  const int local = *(const int*)arg;
  cclComm_t comm = NULL;
  size_t c;
  g_rank = rank;
  if (local > 0) {
    char host[32];
    snprintf(host, sizeof host, "node%d", rank / local);
    setenv("CCL_HOST_ID", host, 1);
  }
  if (!ok(cclCommInitRank(&comm, NRANKS, id, rank), "cclCommInitRank", 0)) return 1;
  for (c = 0; c < NUM_COUNTS; ++c) {
    allreduce_all_ops(comm, rank, kCounts[c]);
    rooted_and_gathers(comm, rank, kCounts[c]);
    sendrecv_ring(comm, rank, kCounts[c]);
  }
  ok(cclCommDestroy(comm), "cclCommDestroy", 0);
  if (g_failures) fprintf(stderr, "rank %d: %d failure(s)\n", rank, g_failures);
  return g_failures ? 1 : 0;
}

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* What each thread of a stuck rank is doing, as the kernel sees it: its name, state and wait. */
static void print_threads(pid_t pid) {
  char path[320], line[256]; /* room for any d_name */
  DIR* tasks;
  struct dirent* t;
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  tasks = opendir(path);
  if (!tasks) return;
  while ((t = readdir(tasks)) != NULL) {
    const char* fields[] = {"comm", "wchan", "syscall"};
    size_t k;
    if (t->d_name[0] == '.') continue;
    fprintf(stderr, "  thread %s:", t->d_name);
    for (k = 0; k < sizeof fields / sizeof fields[0]; ++k) {
      FILE* f;
      snprintf(path, sizeof path, "/proc/%d/task/%s/%s", (int)pid, t->d_name, fields[k]);
      f = fopen(path, "r");
      if (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        fprintf(stderr, " %s=%s", fields[k], line);
      }
      if (f) fclose(f);
    }
    fprintf(stderr, "\n");
  }
  closedir(tasks);
}

/* Waits for the ranks until the deadline, then kills the rest; returns the number that passed. */
static int wait_ranks(pid_t* pids, int* passed) {
  const double deadline = now_seconds() + DEADLINE_SECONDS;
  const struct timespec nap = {0, 20 * 1000 * 1000};
  int left = NRANKS, r, good = 0;
  while (left > 0 && now_seconds() < deadline) {
    for (r = 0; r < NRANKS; ++r) {
      int status = 0;
      if (pids[r] <= 0 || waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      passed[r] = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (!passed[r]) fprintf(stderr, "rank %d ended with status 0x%x\n", r, status);
      good += passed[r];
      pids[r] = 0;
      --left;
    }
    if (left > 0) nanosleep(&nap, NULL);
  }
  for (r = 0; r < NRANKS; ++r) {
    if (pids[r] <= 0) continue;
    fprintf(stderr, "rank %d missed the %d s deadline; killing it. Its threads:\n", r, DEADLINE_SECONDS);
    print_threads(pids[r]);
    kill(pids[r], SIGKILL);
    waitpid(pids[r], NULL, 0);
  }
  return good;
}

int main(int argc, char** argv) {
  const int local = argc > 1 ? atoi(argv[1]) : 0;
  cclUniqueId id;
  pid_t pids[NRANKS];
  int passed[NRANKS] = {0};
  int good;
  char timeout[16];
  snprintf(timeout, sizeof timeout, "%d", DEADLINE_SECONDS / 3);
  setenv("CCL_TIMEOUT", timeout, 0);
  if (cclGetUniqueId(&id) != cclSuccess) {
    fprintf(stderr, "cclGetUniqueId: %s\n", cclGetLastError(NULL));
    return 1;
  }
  fork_ranks(id, NRANKS, run_rank, (void*)&local, pids);
  good = wait_ranks(pids, passed);
  printf("%d passed, %d failed\n", good, NRANKS - good);
  return good == NRANKS ? 0 : 1;
}
