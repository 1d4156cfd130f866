// SPDX-License-Identifier: BSD-3-Clause
// The launcher of a build with MPI.
#include <mpi.h>

#include <stdexcept>
#include <string>

#include "launch.h"

namespace gpt {

void runRanks(int* argc, char*** argv, int threads, const std::function<void(cclComm_t, int)>& fn) {
  if (!launchedByMpi()) return runThreadRanks(threads, fn);
  if (threads != 1) throw std::invalid_argument("--ranks counts processes under an MPI launcher: leave it at 1");
  MPI_Init(argc, argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  cclUniqueId id{};
  if (rank == 0 && cclGetUniqueId(&id) != cclSuccess) MPI_Abort(MPI_COMM_WORLD, 1);
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  cclComm_t comm = nullptr;
  if (cclCommInitRank(&comm, size, id, rank) != cclSuccess) {
    const std::string why = cclGetLastError(nullptr);
    MPI_Finalize();
    throw std::runtime_error("cclCommInitRank: " + why);
  }
  try {
    fn(comm, rank);
  } catch (...) {
    cclCommAbort(comm);
    MPI_Finalize();
    throw;
  }
  cclCommDestroy(comm);
  MPI_Finalize();
}

}  // namespace gpt
