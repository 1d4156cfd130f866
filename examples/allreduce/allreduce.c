/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The smallest ccl program: N ranks as threads of one process, each summing a vector with
 * cclAllReduce, then the same with int8 compression (cclAllReduceEx).
 *   ./allreduce [nranks] [count]
 */
#include <ccl/ccl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

struct rank_arg {
  int rank, nranks;
  size_t count;
  cclUniqueId id;
  int failed;
};

static void* run_rank(void* p) {
  struct rank_arg* a = p;
  cclComm_t comm;
  if (cclCommInitRank(&comm, a->nranks, a->id, a->rank) != cclSuccess) {
    fprintf(stderr, "rank %d: %s\n", a->rank, cclGetLastError(NULL));
    a->failed = 1;
    return NULL;
  }
  float* x = malloc(a->count * sizeof(float));
  float* y = malloc(a->count * sizeof(float));
  for (size_t i = 0; i < a->count; ++i) x[i] = (float)(a->rank + 1) * 0.5f + (float)(i % 7);

  cclCompression_t int8 = CCL_COMPRESSION_INITIALIZER;
  int8.codec = cclCodecInt8;
  for (int compressed = 0; compressed < 2 && !a->failed; ++compressed) {
    cclResult_t r = compressed ? cclAllReduceEx(x, y, a->count, cclFloat, cclSum, comm, NULL, &int8, NULL)
                               : cclAllReduce(x, y, a->count, cclFloat, cclSum, comm, NULL);
    if (r != cclSuccess) {
      fprintf(stderr, "rank %d: %s\n", a->rank, cclGetLastError(comm));
      a->failed = 1;
      break;
    }
    double maxErr = 0;
    for (size_t i = 0; i < a->count; ++i) {
      double want = 0.25 * a->nranks * (a->nranks + 1) + (double)a->nranks * (double)(i % 7);
      maxErr = fmax(maxErr, fabs(y[i] - want));
    }
    if (a->rank == 0)
      printf("%s allreduce of %zu floats on %d ranks: max error %g\n", compressed ? "int8" : "exact", a->count,
             a->nranks, maxErr);
    if (!compressed && maxErr != 0) a->failed = 1;
  }
  free(x);
  free(y);
  cclCommDestroy(comm);
  return NULL;
}

int main(int argc, char** argv) {
  int nranks = argc > 1 ? atoi(argv[1]) : 4;
  size_t count = argc > 2 ? strtoull(argv[2], NULL, 10) : 1000000;
  if (nranks < 1 || nranks > 64) {
    fprintf(stderr, "nranks must be in [1, 64]\n");
    return 2;
  }
  cclUniqueId id;
  if (cclGetUniqueId(&id) != cclSuccess) {
    fprintf(stderr, "cclGetUniqueId: %s\n", cclGetLastError(NULL));
    return 1;
  }
  pthread_t threads[64];
  struct rank_arg args[64];
  for (int r = 0; r < nranks; ++r) {
    args[r] = (struct rank_arg){r, nranks, count, id, 0};
    pthread_create(&threads[r], NULL, run_rank, &args[r]);
  }
  int failed = 0;
  for (int r = 0; r < nranks; ++r) {
    pthread_join(threads[r], NULL);
    failed |= args[r].failed;
  }
  return failed;
}
