// SPDX-License-Identifier: BSD-3-Clause
// Operations and NCCL group semantics: outside a group an operation runs at once; between
// cclGroupStart and the outermost cclGroupEnd, operations of this thread are queued and then
// run together, so sends and receives that depend on each other cannot deadlock and one
// thread can drive several communicators.
#pragma once

#include <memory>
#include <string>

#include "api/comm.h"
#include "collectives/exec/executor.h"
#include "collectives/plan/plan.h"

namespace ccl::api {

struct DeviceCall;  // api/device_calls.h

struct Op {
  cclComm_t comm = nullptr;
  std::shared_ptr<const coll::Plan> plan;
  const void* send = nullptr;
  void* recv = nullptr;
  uint64_t tagBase = 0;
  // The counter its call took tagBase's sequence number from (the communicator's collectives,
  // or one peer's sends or receives): a group dropped at cclGroupEnd gives the numbers back,
  // so that the communicator stays matched with its peers.
  uint32_t* seq = nullptr;
  int opKind = 0;  // cclOpKind_t, for the statistics
  bool compressed = false;
  bool chosenByCost = false;        // CCL_CODEC=auto chose its codec and algorithm (the statistics)
  double predicted = 0;             // the cost model's time for it, seconds (0: none; noteCallTime)
  cclFeedback* feedback = nullptr;  // error-feedback state the plan's encodes use
  // A state of the call's own, which `feedback` points to: given at a group's end to a call
  // whose automatic state another call of the group uses (separateFeedback in group.cc).
  std::shared_ptr<cclFeedback> ownFeedback;
  uint64_t feedbackGeneration = 0;  // AutoFeedback::Slot's (0 for a caller's handle)
  // The step's position the call took (CCL_FEEDBACK): a group dropped at cclGroupEnd gives it
  // back, as it gives back `seq`'s numbers, so later calls keep their positions' residuals.
  AutoFeedback::Taken feedbackTaken{};
  size_t feedbackFloats = 0;
  size_t feedbackErrorFloats = 0;  // of which the error (the low-rank codec's warm start follows)
  uint64_t signature = 0;          // see coll::Job::signature; 0 for point-to-point
  coll::Stream* stream = nullptr;  // a host stream: runs there, after the call returns
  // A call on device buffers, queued in a group: the group's end enqueues it on its stream
  // (the fields above are unused then).
  std::shared_ptr<const DeviceCall> device;
  // Queued in an open group: a reference to `comm` (LifeState::refs), dropped with the last
  // copy of the operation, and one to its host stream (streams.h, holdHostStream), dropped
  // at the group's end before the operation is enqueued there.
  std::shared_ptr<void> hold;
  std::shared_ptr<coll::Stream> streamHold;
};

bool groupActive();
// True when the open group of this thread has an operation on `comm`.
bool groupHasComm(cclComm_t comm);
// Drops queued operations of `comm` (it is being aborted).
void groupForget(cclComm_t comm);
// Marks the open group failed: its cclGroupEnd runs nothing and returns `code`, saying `why`
// (empty: this thread's last error, what the failed call's guard just recorded).
void groupFail(cclResult_t code, const std::string& why = "");

// Runs `op` now (or, with a host stream, enqueues it there), or queues it when a group is
// open.
void submit(Op&& op);

// How the executor runs a communicator's jobs: its CCL_TIMEOUT and whether it yields when idle.
coll::ExecOptions optionsFor(cclComm_t c);

// Adds what one operation moved to `comm`'s statistics (cclCommGetStats).
void addStats(cclComm_t comm, int opKind, bool compressed, bool chosenByCost, const coll::ExecStats& s);
// Empty statistics of one operation of `comm`, which split its sends by node.
coll::ExecStats statsFor(cclComm_t comm);
// Counts a call the communicator's default codec did not compress (cclStats_t.uncompressed).
void noteUncompressed(cclComm_t comm, cclUncompressedReason_t why);

// Operations that run after their call returned (on a host stream, or on a device's streams)
// are counted per communicator with what runs them (the runner: a host stream, or the
// device state). One communicator's operations run in the order they were issued, so a
// call waits for those of other runners first.
//
// Waits until `comm` has no operation pending on a runner other than `runner` (NULL: on no
// runner at all), so that the next operation runs after them.
void drainAsync(cclComm_t comm, const void* runner);
// Counts an operation as running on its communicator (enqueuing, for a device call), so
// cclCommAbort from another thread waits for it before freeing the communicator.
class ActiveGuard {
 public:
  explicit ActiveGuard(cclComm_t c) : comm_(c) { comm_->life.active.fetch_add(1); }
  ~ActiveGuard() { comm_->life.active.fetch_sub(1); }
  ActiveGuard(const ActiveGuard&) = delete;
  ActiveGuard& operator=(const ActiveGuard&) = delete;

 private:
  cclComm_t comm_;
};

// Counts an operation of `runner` as pending, once those of other runners have run.
void beginAsync(cclComm_t comm, const void* runner);
// The operation counted by beginAsync has run (whatever its result).
void endAsync(cclComm_t comm);
// A pending operation failed with `code`: the communicator's asynchronous error, unless it
// was aborted or failed already; `message`, when given and the error is this one, is what
// cclGetLastError(comm) then says (recordAsyncMessage).
void failAsync(cclComm_t comm, cclResult_t code, const std::string& message = {});

}  // namespace ccl::api
