// SPDX-License-Identifier: BSD-3-Clause
// Ranks as threads, the one runner of every test folder: runs fn(rank) on n threads at once,
// waits with a deadline and collects what each rank threw. It includes neither ccl.h nor a
// library header, so the NCCL-ABI tests (which see only nccl.h) use it too.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ccltest {

using RankBody = std::function<void(int rank)>;

// Last-resort deadline of one run. The library's own CCL_TIMEOUT (set lower by the test
// mains) should turn a stuck collective into an error first.
inline constexpr std::chrono::seconds kRunDeadline{90};

// n persistent threads, one per rank. Keeping them lets a caller (World) drive each rank's
// communicator from the same thread for its whole life.
class RankThreads {
 public:
  explicit RankThreads(int n);
  ~RankThreads();  // joins the threads; none is running a job by then (see run)
  RankThreads(const RankThreads&) = delete;
  RankThreads& operator=(const RankThreads&) = delete;

  int size() const;

  // Runs fn(rank) on every thread concurrently and waits. Returns one entry per rank: null
  // when fn returned normally, otherwise what it threw. When a rank does not return within
  // `deadline` the running test fails, naming the stuck ranks (or `what`, when given), and
  // the process exits: a stuck rank may still write to the test's buffers, so the test
  // cannot safely go on.
  std::vector<std::exception_ptr> run(const RankBody& fn, std::chrono::seconds deadline = kRunDeadline,
                                      const char* what = nullptr);

  // Shared with the threads, which outlive the pool only when the process exits.
  struct State;

 private:
  std::shared_ptr<State> state_;
};

// RankThreads::run on n fresh threads, for tests that need no thread to outlive the call.
std::vector<std::exception_ptr> runRanks(int n, const RankBody& fn, std::chrono::seconds deadline = kRunDeadline);

// Runs fn on a fresh thread and waits; what it throws fails the test, and a missed deadline
// fails it and exits the process, as in RankThreads::run. `what` names fn in the failure.
void runWithDeadline(const std::function<void()>& fn, const char* what, std::chrono::seconds deadline = kRunDeadline);

// Ranks as processes: forks n children, which start together once all exist; child r runs
// body(r) and exits (_exit) with what it returns. Waits for them at most `deadline`, killing
// those left. Returns each child's exit status (-1: killed or ended by a signal). Call it
// before the process has threads it needs in the children (a fork copies only the caller).
std::vector<int> runRankProcesses(int n, const std::function<int(int rank)>& body, std::chrono::seconds deadline);

// The message of what a rank threw: what() of a std::exception (ccl::Error is one), "" for
// null.
std::string describeException(const std::exception_ptr& e);

// Fails the running test once for every rank that threw, with its message.
void expectNoneThrew(const std::vector<std::exception_ptr>& errors);

}  // namespace ccltest
