// SPDX-License-Identifier: BSD-3-Clause
// Ranks as threads: a World owns n communicators of one clique, each driven by its own
// persistent thread, and runs a function on every rank at once. Failures inside rank
// threads are ordinary gtest failures of the running test.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "ccl/ccl.h"
#include "rank_threads.h"

namespace ccltest {

using RankFn = std::function<void(int rank, cclComm_t comm)>;

class World {
 public:
  // The cached world of n ranks (1..8), created on first use and replaced after a test
  // failed on it, since a failed collective may leave its communicators out of step.
  static World& get(int n);
  // Destroys every cached world; called by the test main after the last test.
  static void destroyCached();

  // A world of its own (not cached), e.g. for tests that finalize or abort communicators.
  // `config` NULL uses cclCommInitRank, otherwise cclCommInitRankConfig.
  explicit World(int n, const cclConfig_t* config = nullptr);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int size() const;
  // Whether every rank created its communicator.
  bool ready() const;
  cclComm_t comm(int rank) const;

  // Runs fn(rank, comm) on every rank thread concurrently and waits (RankThreads::run). What
  // a rank throws fails the test; a rank that misses `deadline` fails it and ends the process.
  void run(const RankFn& fn, std::chrono::seconds deadline = kRunDeadline);

  // The communicator of `rank` was freed by the test (cclCommAbort, cclCommDestroy).
  void forgetComm(int rank);

 private:
  // Each rank's communicator is made and driven by the same thread of this pool.
  RankThreads threads_;
  mutable std::mutex mu_;  // comms_: forgetComm may be called from a rank thread
  std::vector<cclComm_t> comms_;
  bool tainted_ = false;
};

// "cclInvalidArgument (4): <last error>" for failure messages.
std::string describeResult(cclResult_t r, cclComm_t comm = nullptr);

}  // namespace ccltest

// Checks a ccl call inside a test or rank thread and reports its last-error message.
#define EXPECT_CCL_OK(call)                                                                                    \
  do {                                                                                                         \
    cclResult_t ccl_test_result_ = (call);                                                                     \
    EXPECT_EQ(ccl_test_result_, cclSuccess) << #call << " -> " << ::ccltest::describeResult(ccl_test_result_); \
  } while (0)

#define ASSERT_CCL_OK(call)                                                                                    \
  do {                                                                                                         \
    cclResult_t ccl_test_result_ = (call);                                                                     \
    ASSERT_EQ(ccl_test_result_, cclSuccess) << #call << " -> " << ::ccltest::describeResult(ccl_test_result_); \
  } while (0)
