// SPDX-License-Identifier: BSD-3-Clause
// The thread ranks of this process, and collective host-side operations over every rank
// of the run (threads here, then processes through the ProcessGroup).
#pragma once

#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "harness/options.h"
#include "harness/process_group.h"

namespace cclperf {

// Thrown in the threads still waiting when another rank of the process has failed.
class TeamAborted : public std::runtime_error {
 public:
  TeamAborted() : std::runtime_error("another rank of this process failed") {}
};

class Team {
 public:
  Team(int nthreads, ProcessGroup& processes);

  // Every rank of the run waits for all others.
  void barrier(int thread);
  // Combines one value per rank; every rank gets the result.
  double reduce(int thread, double value, Reduction op);
  long long sum(int thread, long long value);
  // The time per rank combined as -a asks: rank 0's value, the mean, min or max.
  double combineTime(int thread, double seconds, TimeAverage how);

  // Wakes and fails every thread waiting now or later.
  void abort();

 private:
  // Runs `combine` once, on the last thread to arrive, with every thread's slot filled.
  template <typename Combine>
  double rendezvous(int thread, double value, Combine combine);

  int nthreads_;
  ProcessGroup& processes_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0;
  unsigned long long generation_ = 0;
  bool aborted_ = false;
  std::vector<double> slots_;
  double result_ = 0;
};

}  // namespace cclperf
