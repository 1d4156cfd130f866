// SPDX-License-Identifier: BSD-3-Clause
#include "nccl/group.h"

#include <algorithm>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api/group.h"
#include "nccl/comm.h"
#include "nccl/face_error.h"
#include "nccl/real_nccl.h"

namespace ccl::nccl::group {
namespace {

struct State {
  int depth = 0;
  bool realOpen = false;
  int hostOps = 0;
  std::vector<std::shared_ptr<void>> kept;
  std::vector<Held> creations;
  std::vector<Held> discarded;
  std::vector<std::pair<Held, std::function<void()>>> deferred;
  // whenRun's, in issue order.
  std::vector<std::pair<Held, std::function<void()>>> prepares;
  ncclResult_t failed = ncclSuccess;  // a call of the group failed: the end runs nothing
  std::string failure;                // its message
};
thread_local State tls;

// A non-blocking real communicator whose group end said ncclInProgress takes no new call
// until it has left that state (NCCL's rule for non-blocking communicators).
void awaitReal(ncclComm_t comm) {
  for (;;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = CCL_REAL(ncclCommGetAsyncError)(comm->real, &state);
    CCL_CHECK(r == ncclSuccess, static_cast<cclResult_t>(r), "the real ncclCommGetAsyncError failed");
    if (state == ncclSuccess) return;
    CCL_CHECK(state == ncclInProgress, static_cast<cclResult_t>(state),
              std::string("the real NCCL group failed: ") + CCL_REAL(ncclGetErrorString)(state));
    std::this_thread::yield();
  }
}

// Ends the group: runs ccl's queued host operations, then the real NCCL's, then the
// compressed device calls kept for the end, then waits for communicators created in the
// group. Returns the first failure.
ncclResult_t closeOutermost(const char* fn) {
  State s = std::move(tls);
  tls = State{};
  // The host operations' inputs are written now, before ccl runs them (whenRun). One whose
  // communicator was destroyed or aborted by another thread meanwhile is not: ccl drops its
  // operation, and the caller may have freed the buffers it reads.
  for (auto& [comm, prepare] : s.prepares) {
    if (s.failed != ncclSuccess) break;
    if (comm->released.load()) continue;
    const ncclResult_t r = faceGuard(fn, prepare);
    if (r != ncclSuccess) {
      s.failed = r;
      s.failure = lastError();
    }
  }
  if (s.failed != ncclSuccess) {
    api::groupFail(static_cast<cclResult_t>(s.failed), s.failure);  // ccl's queued operations are dropped
    s.deferred.clear();
  }
  ncclResult_t result = faceGuard(fn, [&] { cclCheck(cclGroupEnd(), "running the group's host operations"); });
  if (s.failed != ncclSuccess)
    result =
        recordError(fn, static_cast<cclResult_t>(s.failed),
                    "a call of the group failed, so none of ccl's operations of the group ran: " + s.failure, false);
  if (s.realOpen) {
    ncclResult_t realResult = ncclSuccess;
    ncclResult_t r = faceGuard(fn, [&] {
      realResult = CCL_REAL(ncclGroupEnd)();
      CCL_CHECK(realResult == ncclSuccess || realResult == ncclInProgress, static_cast<cclResult_t>(realResult),
                std::string("the real NCCL group failed: ") + CCL_REAL(ncclGetLastError)(nullptr));
    });
    if (result == ncclSuccess) result = r != ncclSuccess ? r : realResult;
  }
  // Each is a collective of its own on every rank, in issue order; one failing does not
  // stop the others, which the peers run too.
  // One destroyed or aborted meanwhile by another thread is not run (ncclComm::released).
  for (auto& [comm, enqueue] : s.deferred) {
    const ncclResult_t r = faceGuard(fn, [&] {
      const Inside inside(*comm);
      CCL_CHECK(!comm->released.load(), cclInvalidUsage,
                "the communicator was destroyed or aborted (by another thread) before the group's end");
      if (result == ncclInProgress) awaitReal(comm.get());
      enqueue();
    });
    if (r != ncclSuccess && (result == ncclSuccess || result == ncclInProgress)) result = r;
  }
  for (const Held& held : s.creations) {
    ncclComm_t c = held.get();
    if (c->released.load()) continue;  // destroyed or aborted by another thread: its caller gave it up
    if (!c->config.blocking && !c->created.load()) {
      if (result == ncclSuccess) result = ncclInProgress;
      continue;
    }
    ncclResult_t r = finishCreation(c, fn);
    if (result == ncclSuccess) result = r;
  }
  for (const Held& held : s.discarded) {
    ncclComm_t c = held.get();
    ncclResult_t r = finishCreation(c, fn);
    faceGuard(fn, [&] { destroy(c, false); });
    if (result == ncclSuccess) result = r;
  }
  return result;
}

}  // namespace

bool active() { return tls.depth > 0; }

void keep(std::shared_ptr<void> buffer) {
  if (tls.depth > 0) tls.kept.push_back(std::move(buffer));
}

void enterReal() {
  if (tls.depth == 0 || tls.realOpen) return;
  ncclResult_t r = CCL_REAL(ncclGroupStart)();
  CCL_CHECK(r == ncclSuccess, static_cast<cclResult_t>(r), "the real NCCL refused ncclGroupStart");
  tls.realOpen = true;
}

void addCreation(ncclComm_t comm) { tls.creations.push_back(hold(comm)); }

void addDiscarded(ncclComm_t comm) { tls.discarded.push_back(hold(comm)); }

bool holds(ncclComm_t comm) {
  if (tls.depth == 0) return false;
  const auto named = [comm](const Held& h) { return h.get() == comm; };
  return std::any_of(tls.creations.begin(), tls.creations.end(), named) ||
         std::any_of(tls.discarded.begin(), tls.discarded.end(), named) ||
         std::any_of(tls.deferred.begin(), tls.deferred.end(), [&](const auto& d) { return named(d.first); });
}

void forget(ncclComm_t comm) {
  const auto named = [comm](const Held& h) { return h.get() == comm; };
  std::erase_if(tls.creations, named);
  std::erase_if(tls.discarded, named);
  std::erase_if(tls.deferred, [&](const auto& d) { return named(d.first); });
  std::erase_if(tls.prepares, [&](const auto& p) { return named(p.first); });
}

void fail(ncclResult_t code) {
  if (tls.depth == 0 || tls.failed != ncclSuccess) return;
  tls.failed = code;
  tls.failure = lastError();
}

void noteHostOp() {
  if (tls.depth > 0) ++tls.hostOps;
}

void whenRun(ncclComm_t comm, std::function<void()> prepare) {
  if (tls.depth == 0) return prepare();
  tls.prepares.emplace_back(hold(comm), std::move(prepare));
}

bool defer(ncclComm_t comm, std::function<void()> enqueue) {
  if (tls.depth == 0) return false;
  tls.deferred.emplace_back(hold(comm), std::move(enqueue));
  return true;
}

}  // namespace ccl::nccl::group

using namespace ccl::nccl;

extern "C" {

ncclResult_t pncclGroupStart() {
  return faceGuard("ncclGroupStart", [] {
    cclCheck(cclGroupStart(), "cclGroupStart");
    ++group::tls.depth;
  });
}

ncclResult_t pncclGroupEnd() {
  if (group::tls.depth == 0)
    return recordError("ncclGroupEnd", cclInvalidUsage, "ncclGroupEnd without a matching ncclGroupStart");
  if (--group::tls.depth > 0) {
    return faceGuard("ncclGroupEnd", [] { cclCheck(cclGroupEnd(), "cclGroupEnd"); });
  }
  return group::closeOutermost("ncclGroupEnd");
}

// Nothing of the group is run. ccl has no cost model to report yet, so only a group that
// holds no host operation can be simulated; otherwise the group stays open for ncclGroupEnd.
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  return faceGuard("ncclGroupSimulateEnd", [&] {
    CCL_CHECK(simInfo, cclInvalidArgument, "simInfo is NULL");
    CCL_CHECK(simInfo->size >= offsetof(ncclSimInfo_t, estimatedTime) + sizeof(float) && simInfo->magic == 0x74685283,
              cclInvalidArgument, "simInfo was not initialised with NCCL_SIM_INFO_INITIALIZER");
    CCL_CHECK(group::tls.depth > 0, cclInvalidUsage, "ncclGroupSimulateEnd without a matching ncclGroupStart");
    CCL_CHECK(group::tls.hostOps == 0 && !group::tls.realOpen && group::tls.deferred.empty(), cclInvalidUsage,
              "ccl cannot simulate a group that holds operations; the group is still open, end it with ncclGroupEnd");
    CCL_CHECK(pncclGroupEnd() == ncclSuccess, cclInvalidUsage, lastError());
    simInfo->estimatedTime = 0.0f;
  });
}

}  // extern "C"

CCL_NCCL_ALIAS(ncclGroupStart)
CCL_NCCL_ALIAS(ncclGroupEnd)
CCL_NCCL_ALIAS(ncclGroupSimulateEnd)
