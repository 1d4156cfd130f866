// SPDX-License-Identifier: BSD-3-Clause
// The ranks of one launch: under an MPI launcher one rank per process (the unique id goes
// out by MPI_Bcast), otherwise `threads` ranks as threads of this process
// (cclCommInitAll). Either way fn(comm, rank) runs once per rank of this process.
#pragma once

#include <functional>

#include "ccl/ccl.h"

namespace gpt {

// True when this process was started by an MPI launcher with more than one process.
bool launchedByMpi();

// Runs fn on this process's ranks and returns once all have returned. An exception from
// any rank is rethrown after every rank has finished (the others' collectives fail too,
// since the failing rank aborts its communicator). With MPI, MPI_Init/Finalize happen here.
void runRanks(int* argc, char*** argv, int threads, const std::function<void(cclComm_t comm, int rank)>& fn);

// The ranks-as-threads half of runRanks, which both launchers share (launch_common.cc).
void runThreadRanks(int threads, const std::function<void(cclComm_t comm, int rank)>& fn);

}  // namespace gpt
