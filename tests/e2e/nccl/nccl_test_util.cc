// SPDX-License-Identifier: BSD-3-Clause
#include "nccl_test_util.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "rank_threads.h"

namespace nccl_test {

void runThreads(int n, const std::function<void(int)>& body) { ccltest::expectNoneThrew(ccltest::runRanks(n, body)); }

void runRanks(int n, const std::function<void(int, ncclComm_t)>& body, ncclConfig_t* config) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  runThreads(n, [&](int rank) {
    ncclComm_t comm = nullptr;
    ncclResult_t r = config ? ncclCommInitRankConfig(&comm, n, id, rank, config) : ncclCommInitRank(&comm, n, id, rank);
    if (r == ncclInProgress) r = waitReady(comm);
    ASSERT_EQ(r, ncclSuccess) << "rank " << rank << ": " << ncclGetLastError(nullptr);
    body(rank, comm);
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess) << ncclGetLastError(nullptr);
  });
}

ncclResult_t waitReady(ncclComm_t comm) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  ncclResult_t state = ncclInProgress;
  while (state == ncclInProgress && std::chrono::steady_clock::now() < deadline) {
    ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) return r;
    if (state == ncclInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return state;
}

}  // namespace nccl_test
