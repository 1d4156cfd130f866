// SPDX-License-Identifier: BSD-3-Clause
// What the threads of this process are doing inside calls that can block: enqueuing a
// device call, a CUDA allocation, waiting for a stream. When a staged exchange times out
// because a peer of the same process never sent, the peer's thread is often stuck in one of
// these (a CUDA call that waits for the whole device while another rank's flag kernel waits
// for it); the time-out's message lists them, so a hang seen once on a GPU names its cause.
#pragma once

#include <string>

namespace ccl {

// Marks the calling thread as inside `what` (a string literal) for the scope's life; scopes
// nest (the innermost is reported with its outer ones). `rank` is the communicator rank the
// thread works for (-1: the log's rank, RankScope).
class ActivityScope {
 public:
  explicit ActivityScope(const char* what, int rank = -1);
  ~ActivityScope();
  ActivityScope(const ActivityScope&) = delete;
  ActivityScope& operator=(const ActivityScope&) = delete;

 private:
  int slot_;
};

// Activities of this process that began at least `minMillis` ago, one per thread, as
// "rank R: OUTER > INNER for S s" joined by "; " (empty when none).
std::string activitiesLongerThan(long minMillis);

}  // namespace ccl
