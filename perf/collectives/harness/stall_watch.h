// SPDX-License-Identifier: BSD-3-Clause
// A stall names itself: with --stall_dump S, a watchdog thread prints every thread's stack
// of this process to stderr once no rank has enqueued or finished a call for S seconds (set
// it under the library's CCL_TIMEOUT, so the stacks show where each thread waits before the
// time-out unwinds them). Frames are printed as module(+offset): resolve them with addr2line
// against the unstripped build of the same commit.
#pragma once

namespace cclperf {

// Starts the watchdog (seconds <= 0: does nothing). Idempotent.
void startStallWatch(int seconds);
// Called on every rank's progress: a call enqueued or a stream synchronised.
void noteProgress();

// While one lives, the harness works on the host (filling inputs, checking a result: seconds
// at 1 GiB), and no stall is reported.
struct HostWork {
  HostWork();
  ~HostWork();
  HostWork(const HostWork&) = delete;
  HostWork& operator=(const HostWork&) = delete;
};

}  // namespace cclperf
