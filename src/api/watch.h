// SPDX-License-Identifier: BSD-3-Clause
// The watcher: finds a lost rank while this one is idle. One thread per process waits on
// the ring connections of every live communicator's bootstrap (api/comm.h); a neighbour's
// connection that ends without a goodbye (its process died, or it aborted the communicator)
// or that brings a neighbour's news of a lost rank fails the communicator at once: its
// asynchronous error turns to cclRemoteError, later calls name the lost rank, the news goes
// on round the ring, and the transport is aborted so that calls in progress here and on
// the peers fail instead of waiting for CCL_TIMEOUT. Calls learn of a loss through their
// transport too; the watcher covers the time between calls. A neighbour whose host goes
// silent ends no connection: the watcher also sends the bootstrap's pulses (one byte to each
// ring neighbour every quarter of CCL_PEER_SILENCE_MS) and fails the communicator when the
// kernel gives up on them (Bootstrap::pulse). It costs the hot path nothing: it sleeps in
// poll() on its own thread and wakes when a connection ends, a communicator comes or goes, or
// a pulse is due.
#pragma once

#include <chrono>

#include "ccl/ccl.h"

namespace ccl::bootstrap {
class Bootstrap;
}

namespace ccl::api {

// The longest the watcher sleeps between looks when nothing wakes it.
constexpr std::chrono::milliseconds kWatchPeriod{1000};
// How soon a connection that ended behind unread bytes is looked at again.
constexpr std::chrono::milliseconds kUndecidedPeriod{20};

// The rank the watcher found lost on `comm`, waiting up to `wait` for it (a call that failed
// on a peer's abort learns it a little before the watcher; one that timed out, a little
// before a neighbour of a stopped rank names it: kQuietRankWait); -1 if none.
constexpr std::chrono::milliseconds kLostRankWait{50};
constexpr std::chrono::milliseconds kQuietRankWait{1000};
int lostRankSoon(cclComm_t comm, std::chrono::milliseconds wait = kLostRankWait);

// Fails `comm` for the loss of rank `lost`, as the watcher does when it finds one: its
// asynchronous error turns to cclRemoteError, later calls name `lost`, the news goes round
// the ring and the transport is aborted. False when a loss was declared already. Any thread.
bool declareLost(cclComm_t comm, int lost, const char* why);

// From the end of createComm to the start of destroyComm.
void watch(cclComm_t comm);
void unwatch(cclComm_t comm);

// While a communicator is made, from its bootstrap's ring to watch(): its pulses only (sent,
// and drained, so that its neighbours and this rank can tell a stopped rank during the rest
// of the init: Bootstrap::quietNeighbour). stopPulsing before the bootstrap goes.
void pulseWhileStarting(bootstrap::Bootstrap* b);
void stopPulsing(bootstrap::Bootstrap* b);

}  // namespace ccl::api
