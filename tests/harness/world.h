// Ranks as threads: a World owns n communicators of one clique, each driven by its own
// persistent thread, and runs a function on every rank at once. Failures inside rank
// threads are ordinary gtest failures of the running test.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "ccl/ccl.h"

namespace ccltest {

using RankFn = std::function<void(int rank, cclComm_t comm)>;

// Last-resort deadline of one World::run. The library's own CCL_TIMEOUT (set lower by the
// test main) should turn a stuck collective into an error first.
inline constexpr std::chrono::seconds kRunDeadline{90};

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

  // Runs fn(rank, comm) on every rank thread concurrently and waits. When a rank does not
  // return within `deadline` the test fails and the process exits: a rank still inside the
  // library may touch the caller's buffers, so the test cannot safely go on.
  void run(const RankFn& fn, std::chrono::seconds deadline = kRunDeadline);

  // The communicator of `rank` was freed by the test (cclCommAbort, cclCommDestroy).
  void forgetComm(int rank);

  // Shared with the rank threads, which may outlive a World only when the process exits.
  struct State;

 private:
  std::shared_ptr<State> state_;
  bool tainted_ = false;
};

// Runs fn on a fresh thread and waits; a missed deadline fails the test and exits the
// process, for the same reason as World::run.
void runWithDeadline(const std::function<void()>& fn, const char* what, std::chrono::seconds deadline = kRunDeadline);

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
