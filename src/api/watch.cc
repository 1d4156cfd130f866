// SPDX-License-Identifier: BSD-3-Clause
#include "api/watch.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/comm.h"
#include "common/log.h"

namespace ccl::api {
namespace {

// Never destroyed: the detached watcher may run while the process exits.
struct Watched {
  std::mutex mu;  // comms, and a look at them (destroyComm waits for one to end)
  std::vector<cclComm_t> comms;
  // Bootstraps of communicators still being made: only their pulses are sent and drained, so
  // that a rank stopped during the rest of the init is told from a slow one (quietNeighbour).
  std::vector<bootstrap::Bootstrap*> starting;
  int wake = -1;         // an eventfd: the set of communicators changed
  bool running = false;  // the watcher thread of this process exists
};
Watched& watched() {
  static Watched* w = new Watched;
  return *w;
}

// A communicator that failed is still watched: its error may be a lost rank's, which the
// watcher names and passes on.
bool watchable(cclComm_t comm) { return !comm->life.aborted.load() && !comm->life.revoked.load(); }

// declareLost with the watcher's lock held.
bool declareLostLocked(cclComm_t comm, int lost, const char* why) {
  int none = -1;
  if (!comm->life.lostRank.compare_exchange_strong(none, lost)) return false;
  cclResult_t ok = cclSuccess;
  const std::string news = "rank " + std::to_string(lost) + " is gone (" + why + ")";
  if (comm->life.asyncError.compare_exchange_strong(ok, cclRemoteError)) recordAsyncMessage(comm, news);
  CCL_WARN("comm %p rank %d: %s", static_cast<void*>(comm), comm->rank, news.c_str());
  comm->links.bootstrap->relayLost(lost);
  // Calls in progress here, and the peers', fail now rather than at CCL_TIMEOUT. (A device
  // call waiting on NCCL is left to NCCL: comm->nccl may be replaced while the watcher looks.)
  comm->links.transport->peerLost(lost);
  comm->links.transport->abort();
  return true;
}

// Looks at one communicator; false when it must be looked at again later without waiting on
// its connections (one ended behind bytes still to be read, so poll would not sleep).
bool lookAt(cclComm_t comm) {
  if (!watchable(comm)) return true;
  const int lost = comm->links.bootstrap->lostNeighbour();
  if (lost == bootstrap::Bootstrap::kUndecided) return false;
  if (lost >= 0)
    declareLostLocked(comm, lost, "its process exited, it aborted the communicator or its host went silent");
  return true;
}

void run() {
  Watched& w = watched();
  std::vector<pollfd> fds;
  std::vector<cclComm_t> later;                       // undecided at the last look: looked at again, not waited on
  std::chrono::milliseconds pulseDue = kWatchPeriod;  // the soonest pulse any communicator owes
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(w.mu);
      fds.assign(1, pollfd{w.wake, POLLIN, 0});
      for (cclComm_t comm : w.comms)
        if (watchable(comm) && std::find(later.begin(), later.end(), comm) == later.end()) {
          for (int fd : comm->links.bootstrap->ringFds()) fds.push_back({fd, POLLRDHUP, 0});
          for (int fd : comm->links.bootstrap->pulseFds()) fds.push_back({fd, POLLIN, 0});
        }
      for (bootstrap::Bootstrap* b : w.starting)
        for (int fd : b->pulseFds()) fds.push_back({fd, POLLIN, 0});
    }
    // A descriptor closed meanwhile (its communicator destroyed) wakes nobody; the wake
    // eventfd rebuilds the set.
    const auto wait = later.empty() ? pulseDue : std::min(pulseDue, kUndecidedPeriod);
    if (::poll(fds.data(), fds.size(), static_cast<int>(wait.count())) > 0 && fds[0].revents) {
      uint64_t drained;
      [[maybe_unused]] ssize_t n = ::read(w.wake, &drained, sizeof drained);
    }
    std::lock_guard<std::mutex> lock(w.mu);
    later.clear();
    pulseDue = kWatchPeriod;
    auto pulse = [&](bootstrap::Bootstrap* b) {
      const auto due = b->pulse();
      if (due.count() > 0) pulseDue = std::min(pulseDue, due);
    };
    // A rank whose call timed out asked for a quiet neighbour (Bootstrap::askQuiet): one of
    // this rank's is declared lost, which names it on every rank.
    for (cclComm_t comm : w.comms) {
      if (!lookAt(comm)) later.push_back(comm);
      if (!watchable(comm)) continue;
      pulse(comm->links.bootstrap.get());
      const int quiet = comm->links.bootstrap->answerAsked();
      if (quiet >= 0) declareLostLocked(comm, quiet, bootstrap::Bootstrap::kQuietReason);
    }
    for (bootstrap::Bootstrap* b : w.starting) pulse(b);
  }
}

void wakeWatcher(Watched& w) {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(w.wake, &one, sizeof one);
}

// A process that exits with communicators alive leaves its goodbyes: its peers' watchers
// must not take a finished program for a lost rank.
void goodbyeAtExit() {
  Watched& w = watched();
  std::lock_guard<std::mutex> lock(w.mu);
  for (cclComm_t comm : w.comms) comm->links.bootstrap->goodbye();
}

// fork(): the child has no watcher thread, and the lock must not be inherited held.
void beforeFork() { watched().mu.lock(); }
void afterForkParent() { watched().mu.unlock(); }
void afterForkChild() {
  Watched& w = watched();
  // The eventfd is the parent's too: the child wakes its own watcher only.
  ::close(w.wake);
  w.wake = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  w.running = false;
  w.comms.clear();  // the parent's communicators are not the child's to watch
  w.starting.clear();
  w.mu.unlock();
}

// The process's first use of the watcher (once, whichever kind of work comes first).
void setUpOnce(Watched& w) {
  static std::once_flag once;
  std::call_once(once, [&] {
    w.wake = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_atfork(beforeFork, afterForkParent, afterForkChild);
    std::atexit(goodbyeAtExit);
  });
}

// Adds to the watcher's work (under its lock), starting its thread when there is none.
template <typename F>
void addWork(F&& add) {
  Watched& w = watched();
  setUpOnce(w);
  if (w.wake < 0) return;  // no eventfd: between calls, losses are found by the next call
  std::lock_guard<std::mutex> lock(w.mu);
  add(w);
  if (!w.running) {
    std::thread(run).detach();
    w.running = true;
  }
  wakeWatcher(w);
}

// Removes `item` from one of the watcher's lists (under its lock) and wakes it to make its
// set of descriptors again.
template <typename T>
void dropWork(std::vector<T> Watched::*list, T item) {
  Watched& w = watched();
  std::lock_guard<std::mutex> lock(w.mu);
  std::vector<T>& v = w.*list;
  const auto it = std::remove(v.begin(), v.end(), item);
  if (it == v.end()) return;
  v.erase(it, v.end());
  wakeWatcher(w);
}

}  // namespace

void watch(cclComm_t comm) {
  addWork([&](Watched& w) { w.comms.push_back(comm); });
}

void pulseWhileStarting(bootstrap::Bootstrap* b) {
  addWork([&](Watched& w) { w.starting.push_back(b); });
}

void stopPulsing(bootstrap::Bootstrap* b) { dropWork(&Watched::starting, b); }

bool declareLost(cclComm_t comm, int lost, const char* why) {
  std::lock_guard<std::mutex> lock(watched().mu);
  return declareLostLocked(comm, lost, why);
}

int lostRankSoon(cclComm_t comm, std::chrono::milliseconds wait) {
  const auto until = std::chrono::steady_clock::now() + wait;
  int lost = comm->life.lostRank.load();
  while (lost < 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    lost = comm->life.lostRank.load();
  }
  return lost;
}

void unwatch(cclComm_t comm) { dropWork(&Watched::comms, comm); }

}  // namespace ccl::api
