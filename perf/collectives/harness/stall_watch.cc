// SPDX-License-Identifier: BSD-3-Clause
#include "harness/stall_watch.h"

#include <dirent.h>
#include <execinfo.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace cclperf {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<long long> lastProgress{0};  // steady-clock milliseconds
std::atomic<int> dumped{0};              // threads that finished their dump
std::atomic<bool> started{false};
std::atomic<int> checking{0};  // ranks filling or checking buffers on the host now

long long nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch()).count();
}

// Async-signal-safe enough: backtrace() was called once before (it loads libgcc then), and
// backtrace_symbols_fd writes straight to the descriptor.
void dumpSelf(int) {
  void* frames[64];
  const int n = backtrace(frames, 64);
  char head[96];
  const int len = std::snprintf(head, sizeof head, "--- thread %ld\n", static_cast<long>(syscall(SYS_gettid)));
  if (len > 0) (void)!write(STDERR_FILENO, head, size_t(len));
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  dumped.fetch_add(1, std::memory_order_release);
}

std::string threadName(const std::string& tid) {
  std::string name;
  if (FILE* f = std::fopen(("/proc/self/task/" + tid + "/comm").c_str(), "r")) {
    char buf[64] = {};
    if (std::fgets(buf, sizeof buf, f)) name = buf;
    std::fclose(f);
  }
  while (!name.empty() && name.back() == '\n') name.pop_back();
  return name;
}

void dumpAll(int seconds) {
  std::fprintf(stderr, "stall: no call enqueued or finished for %d s; every thread of process %d:\n", seconds,
               int(getpid()));
  const long me = static_cast<long>(syscall(SYS_gettid));
  std::vector<std::string> tids;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') tids.emplace_back(e->d_name);
    closedir(d);
  }
  for (const std::string& tid : tids) {
    if (std::atol(tid.c_str()) == me) continue;
    std::fprintf(stderr, "--- %s is %s\n", tid.c_str(), threadName(tid).c_str());
    std::fflush(stderr);
    const int before = dumped.load(std::memory_order_acquire);
    if (syscall(SYS_tgkill, getpid(), std::atol(tid.c_str()), SIGUSR2) != 0) continue;
    // One thread at a time, so the stacks do not interleave; a thread that cannot take the
    // signal (blocked in the kernel with it masked) is skipped after a second.
    for (int i = 0; i < 1000 && dumped.load(std::memory_order_acquire) == before; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::fprintf(stderr, "stall: end of stacks\n");
  std::fflush(stderr);
}

}  // namespace

void noteProgress() {
  // Without --stall_dump no clock is read: the harness's own cost stays out of a call's time.
  if (started.load(std::memory_order_relaxed)) lastProgress.store(nowMs(), std::memory_order_relaxed);
}

HostWork::HostWork() { checking.fetch_add(1, std::memory_order_relaxed); }
HostWork::~HostWork() {
  noteProgress();
  checking.fetch_sub(1, std::memory_order_relaxed);
}

void startStallWatch(int seconds) {
  if (seconds <= 0 || started.exchange(true)) return;
  void* warm[2];
  backtrace(warm, 2);
  struct sigaction sa {};
  sa.sa_handler = dumpSelf;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR2, &sa, nullptr);
  noteProgress();
  std::thread([seconds] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      if (checking.load(std::memory_order_relaxed) > 0) {
        noteProgress();  // the harness's own work on the host, not the library's
        continue;
      }
      if (nowMs() - lastProgress.load(std::memory_order_relaxed) < seconds * 1000LL) continue;
      dumpAll(seconds);
      return;  // once: the library's time-out follows
    }
  }).detach();
}

}  // namespace cclperf
