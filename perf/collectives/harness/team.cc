// SPDX-License-Identifier: BSD-3-Clause
#include "harness/team.h"

#include <algorithm>
#include <numeric>

namespace cclperf {

Team::Team(int nthreads, ProcessGroup& processes)
    : nthreads_(nthreads), processes_(processes), slots_(size_t(nthreads), 0.0) {}

template <typename Combine>
double Team::rendezvous(int thread, double value, Combine combine) {
  std::unique_lock lock(mutex_);
  if (aborted_) throw TeamAborted();
  slots_[size_t(thread)] = value;
  const unsigned long long myGeneration = generation_;
  if (++arrived_ == nthreads_) {
    // The process-level call happens under the lock, so MPI sees one caller at a time.
    result_ = combine(slots_);
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return result_;
  }
  cv_.wait(lock, [&] { return generation_ != myGeneration || aborted_; });
  if (generation_ == myGeneration) throw TeamAborted();
  // result_ cannot change before this thread arrives at the next rendezvous.
  return result_;
}

void Team::barrier(int thread) {
  rendezvous(thread, 0.0, [&](const std::vector<double>&) {
    processes_.barrier();
    return 0.0;
  });
}

double Team::reduce(int thread, double value, Reduction op) {
  return rendezvous(thread, value, [&](const std::vector<double>& slots) {
    double local = 0;
    if (op == Reduction::kSum) local = std::accumulate(slots.begin(), slots.end(), 0.0);
    if (op == Reduction::kMin) local = *std::min_element(slots.begin(), slots.end());
    if (op == Reduction::kMax) local = *std::max_element(slots.begin(), slots.end());
    return processes_.allreduce(local, op);
  });
}

long long Team::sum(int thread, long long value) {
  // Counts stay far below 2^53, so a double slot carries them exactly.
  return static_cast<long long>(reduce(thread, double(value), Reduction::kSum));
}

double Team::combineTime(int thread, double seconds, TimeAverage how) {
  switch (how) {
    case TimeAverage::kMin:
      return reduce(thread, seconds, Reduction::kMin);
    case TimeAverage::kMax:
      return reduce(thread, seconds, Reduction::kMax);
    case TimeAverage::kRank0: {
      const bool rank0 = thread == 0 && processes_.rank() == 0;
      return reduce(thread, rank0 ? seconds : 0.0, Reduction::kSum);
    }
    default: {
      const int nranks = nthreads_ * processes_.size();
      return reduce(thread, seconds, Reduction::kSum) / nranks;
    }
  }
}

void Team::abort() {
  std::lock_guard lock(mutex_);
  aborted_ = true;
  cv_.notify_all();
}

}  // namespace cclperf
