/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ccl under an MPI launcher: rank 0 creates the unique id, MPI_Bcast hands it to every
 * rank, then each joins the communicator and checks an allreduce. Exit status 0 on every
 * rank means pass.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include <ccl/ccl.h>

#define COUNT 1001

int main(int argc, char** argv) {
  int rank = 0, size = 0, failures = 0, total = 0;
  size_t i;
  cclUniqueId id;
  cclComm_t comm = NULL;
  float* in = malloc(COUNT * sizeof(float));
  float* out = malloc(COUNT * sizeof(float));
  int32_t mine, biggest = -1;

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank == 0 && cclGetUniqueId(&id) != cclSuccess) {
    fprintf(stderr, "cclGetUniqueId: %s\n", cclGetLastError(NULL));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  if (cclCommInitRank(&comm, size, id, rank) != cclSuccess) {
    fprintf(stderr, "rank %d: cclCommInitRank: %s\n", rank, cclGetLastError(NULL));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  for (i = 0; i < COUNT; ++i) in[i] = (float)(rank + 1) * (float)(i % 13);
  if (cclAllReduce(in, out, COUNT, cclFloat32, cclSum, comm, NULL) != cclSuccess) {
    fprintf(stderr, "rank %d: cclAllReduce: %s\n", rank, cclGetLastError(NULL));
    ++failures;
  } else {
    const float ranksSum = (float)(size * (size + 1) / 2);
    for (i = 0; i < COUNT; ++i)
      if (out[i] != ranksSum * (float)(i % 13)) {
        if (failures++ < 5)
          fprintf(stderr, "rank %d: element %zu = %g, want %g\n", rank, i, out[i], ranksSum * (float)(i % 13));
      }
  }
  mine = 100 + rank;
  if (cclAllReduce(&mine, &biggest, 1, cclInt32, cclMax, comm, NULL) != cclSuccess || biggest != 100 + size - 1) {
    fprintf(stderr, "rank %d: int32 max allreduce gave %d, want %d\n", rank, biggest, 100 + size - 1);
    ++failures;
  }
  cclCommDestroy(comm);
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("%s: %d rank(s), %d failure(s)\n", total ? "FAIL" : "PASS", size, total);
  free(in);
  free(out);
  MPI_Finalize();
  return total ? 1 : 0;
}
