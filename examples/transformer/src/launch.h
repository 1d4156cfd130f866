// SPDX-License-Identifier: BSD-3-Clause
// The ranks of one launch: under an MPI launcher one rank per process (the unique id goes
// out by MPI_Bcast); started by any other launcher, one rank per process with RANK and
// WORLD_SIZE in its environment (as torchrun sets them) and the unique id passed through a
// file; otherwise `threads` ranks as threads of this process (cclCommInitAll). Either way
// fn(comm, rank) runs once per rank of this process.
#pragma once

#include <functional>
#include <string>

#include "ccl/ccl.h"

namespace gpt {

// True when this process was started by an MPI launcher with more than one process.
bool launchedByMpi();

// Runs fn on this process's ranks and returns once all have returned. An exception from
// any rank is rethrown after every rank has finished (the others' collectives fail too,
// since the failing rank aborts its communicator). With MPI, MPI_Init/Finalize happen here.
void runRanks(int* argc, char*** argv, int threads, const std::function<void(cclComm_t comm, int rank)>& fn);

// One rank per process, RANK and WORLD_SIZE from the environment: rank 0 writes a new unique
// id to `idFile` (through a temporary file and a rename), the others wait for it up to
// CCL_TIMEOUT seconds. `idFile` must not hold an earlier launch's id when the ranks start.
void runEnvironmentRank(const std::string& idFile, const std::function<void(cclComm_t comm, int rank)>& fn);

// The ranks-as-threads half of runRanks, which both launchers share (launch_common.cc).
void runThreadRanks(int threads, const std::function<void(cclComm_t comm, int rank)>& fn);

}  // namespace gpt
