// SPDX-License-Identifier: BSD-3-Clause
// Helpers of the NCCL-ABI tests. These tests include only NVIDIA's nccl.h: they are what a
// program written for NCCL sees, whichever library serves the calls.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "nccl_elements.h"

namespace nccl_test {

// Runs body(rank, comm) on `n` threads, each a rank of one new communicator made with
// ncclCommInitRankConfig(config) (NULL: ncclCommInitRank); destroys the communicators after.
// Threads, deadline and failures as in runThreads.
void runRanks(int n, const std::function<void(int rank, ncclComm_t comm)>& body, ncclConfig_t* config = nullptr);

// Runs body(rank) on `n` threads and waits (ccltest::runRanks): what a rank throws fails
// the test, and a rank stuck past the harness's deadline fails it and ends the process.
void runThreads(int n, const std::function<void(int rank)>& body);

// Waits, with a deadline, until the non-blocking communicator is ready; returns its state.
ncclResult_t waitReady(ncclComm_t comm);

}  // namespace nccl_test
