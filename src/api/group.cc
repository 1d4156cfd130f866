// SPDX-License-Identifier: BSD-3-Clause
#include "api/group.h"

#include "api/device_calls.h"
#include "api/streams.h"
#include "api/tuning.h"
#include "api/watch.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "collectives/exec/executor.h"
#include "collectives/exec/scratch_pool.h"
#include "common/log.h"

namespace ccl::api {
namespace {

struct GroupState {
  int depth = 0;
  std::vector<Op> queued;
  cclResult_t error = cclSuccess;
  std::string errorMessage;  // the failed call's (its cclGetLastError), which cclGroupEnd repeats
};
thread_local GroupState tlsGroup;

coll::Job makeJob(const Op& op, void* scratch, coll::ExecStats* stats) {
  coll::Job j;
  j.plan = op.plan.get();
  float* feedback =
      op.feedback ? op.feedback->prepare(op.opKind, op.feedbackFloats, op.feedbackErrorFloats, op.feedbackGeneration)
                  : nullptr;
  j.buffers = {op.send, op.recv, scratch, feedback};
  j.transport = op.comm->links.transport.get();
  j.tagBase = op.tagBase;
  j.aborted = &op.comm->life.aborted;
  j.callSeed = op.tagBase;
  j.stats = stats;
  if (stats) *stats = statsFor(op.comm);
  j.signature = op.signature;
  return j;
}

void account(const Op& op, const coll::ExecStats& s) {
  addStats(op.comm, op.opKind, op.compressed, op.chosenByCost, s);
  if (op.feedback) op.feedback->finish();
}

// The communicators of `ops` (those not aborted by their callers) failed with `code`.
void markFailed(std::span<const Op> ops, cclResult_t code) {
  for (const Op& op : ops)
    if (!op.comm->life.aborted.load()) {
      op.comm->life.asyncError = code;
      op.comm->life.callMet = true;
    }
}

// Runs the jobs; on failure the communicators involved are marked failed, since messages of
// the failed operation may still be in flight and they cannot be trusted with more work.
void execute(std::span<const coll::Job> jobs, std::span<const Op> ops, const coll::ExecOptions& options) {
  try {
    coll::execute(jobs, options);
  } catch (const Error& e) {
    markFailed(ops, e.code());
    // A peer's error may be the relay of a loss: the transport names the rank that aborted,
    // the watcher (api/watch.h) the rank that was lost, within milliseconds of each other.
    if (ops.empty()) throw;
    cclComm_t c = ops.front().comm;
    auto naming = [&](int rank, const char* why) {
      return Error(e.code(), std::string(e.what()) + " (rank " + std::to_string(rank) + " " + why + ")");
    };
    // A stopped rank's neighbours know it (its kernel acknowledges, its pulses stopped) and
    // tell the others, who name it in turn.
    auto nameQuiet = [&] {
      const int quiet = c->links.bootstrap->quietNeighbour();
      if (quiet < 0) return;
      declareLost(c, quiet, bootstrap::Bootstrap::kQuietReason);
      throw naming(quiet, bootstrap::Bootstrap::kQuietReason);
    };
    if (e.code() == cclRemoteError) {
      const int lost = lostRankSoon(c);
      if (lost >= 0) throw naming(lost, "is gone");
      // No news came: a rank whose two neighbours stopped hears of neither through the ring,
      // only the abort of a rank that timed out; its own neighbours' silence names them.
      nameQuiet();
    }
    // A call that made no progress for CCL_TIMEOUT.
    if (e.code() == cclSystemError) {
      nameQuiet();
      // None here: the neighbours of a stopped rank may not have timed out (idle, their part
      // done), so ask them.
      c->links.bootstrap->askQuiet();
      const int lost = lostRankSoon(c, kQuietRankWait);
      if (lost >= 0) throw naming(lost, "is gone");
    }
    throw;
  }
}

// In a catch block, for a failure before the jobs of `ops` start (scratch or a residual this
// rank cannot get): this rank's own, as one inside them is, so the peers are told the same
// way (coll::rethrowTellingPeers) and the communicators marked failed.
[[noreturn]] void failedBeforeRunning(std::span<const Op> ops) {
  std::vector<transport::Transport*> transports;
  for (const Op& op : ops) transports.push_back(op.comm->links.transport.get());
  try {
    coll::rethrowTellingPeers(transports);
  } catch (const Error& e) {
    markFailed(ops, e.code());
    throw;
  }
}

void runOne(const Op& op) {
  ActiveGuard active(op.comm);
  std::optional<coll::ScratchLease> scratch;
  coll::ExecStats stats;
  coll::Job job;
  try {
    scratch.emplace(op.comm->links.scratch, op.plan->scratchBytes);
    job = makeJob(op, scratch->get(), &stats);
  } catch (...) {
    failedBeforeRunning(std::span<const Op>(&op, 1));
  }
  // A call alone is timed against its prediction; in a group, calls share their time. The
  // clock is read only for a call the cost model priced (at 8 bytes a read is a tenth of a
  // call's own work).
  const auto start = op.predicted > 0 ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  execute(std::span<const coll::Job>(&job, 1), std::span<const Op>(&op, 1), optionsFor(op.comm));
  if (op.predicted > 0)
    noteCallTime(*op.comm, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                 op.predicted);
  account(op, stats);
}

void runGroup(const std::vector<Op>& ops) {
  if (ops.empty()) return;
  std::vector<std::unique_ptr<ActiveGuard>> active;
  std::vector<std::unique_ptr<coll::ScratchLease>> scratch;
  std::vector<coll::Job> jobs;
  std::vector<coll::ExecStats> stats(ops.size());
  coll::ExecOptions options = optionsFor(ops.front().comm);
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    active.push_back(std::make_unique<ActiveGuard>(op.comm));
    try {
      scratch.push_back(std::make_unique<coll::ScratchLease>(op.comm->links.scratch, op.plan->scratchBytes));
      jobs.push_back(makeJob(op, scratch.back()->get(), &stats[i]));
    } catch (...) {
      failedBeforeRunning(ops);
    }
    options.timeout = std::min(options.timeout, op.comm->settings.timeout);
    options.yieldWhenIdle = options.yieldWhenIdle && op.comm->settings.yieldWhenIdle;
  }
  execute(jobs, ops, options);
  for (size_t i = 0; i < ops.size(); ++i) account(ops[i], stats[i]);
}

// A feedback state is one operation's residual at a time, and a group runs its operations
// together: two of them on one state would each resize and update it under the other. A
// caller's handle in two operations of one group is refused (`refuse`); an automatic state
// (CCL_FEEDBACK) that two calls of the group take (a step learned as one call long, then a
// group of several) serves the first, and each later one runs on a fresh state of the same
// kind, used once: that call goes without the feedback of earlier steps, within its codec's
// bound as any call.
template <class Refuse>
void separateFeedback(std::vector<Op>& ops, Refuse&& refuse) {
  for (size_t j = 1; j < ops.size(); ++j) {
    Op& later = ops[j];
    if (!later.feedback) continue;
    const bool shared = std::any_of(ops.begin(), ops.begin() + static_cast<std::ptrdiff_t>(j),
                                    [&](const Op& earlier) { return earlier.feedback == later.feedback; });
    if (!shared) continue;
    if (!later.feedback->automatic)
      refuse(cclInvalidUsage, "one cclFeedback_t is passed to two operations of this group; give each its own");
    const Policy& p = later.comm->compression.policy;
    later.ownFeedback = std::make_shared<cclFeedback>(p.autoFeedback, p.locoBeta, p.locoReset);
    later.feedback = later.ownFeedback.get();
    CCL_INFO(
        "an automatic error-feedback state is taken by two calls of one group: the later one runs without "
        "its feedback (pass cclFeedback_t handles to give each tensor its own)");
  }
}

// The communicators of `ops`, each once.
std::vector<cclComm_t> commsOf(std::span<const Op> ops) {
  std::vector<cclComm_t> comms;
  for (const Op& op : ops)
    if (std::find(comms.begin(), comms.end(), op.comm) == comms.end()) comms.push_back(op.comm);
  return comms;
}

// Enqueues `run` (the operations of `comms`) on host stream `stream`, after whatever those
// communicators have queued on other streams.
void enqueueAsync(coll::Stream* stream, const std::vector<cclComm_t>& comms, std::function<void()> run) {
  for (cclComm_t c : comms) beginAsync(c, stream);
  stream->enqueue([comms, run = std::move(run)] {
    // Last, whatever happened: cclCommDestroy and cclCommAbort wait for this count.
    struct Done {
      const std::vector<cclComm_t>& comms;
      ~Done() {
        for (cclComm_t c : comms) endAsync(c);
      }
    } done{comms};
    try {
      for (cclComm_t c : comms)
        CCL_CHECK(!c->life.aborted.load(), cclInvalidUsage, "the communicator was aborted before this operation ran");
      run();
    } catch (const Error& e) {
      for (cclComm_t c : comms) failAsync(c, e.code(), e.what());
      throw;
    }
  });
}

}  // namespace

coll::ExecOptions optionsFor(cclComm_t c) {
  coll::ExecOptions o;
  o.timeout = c->settings.timeout;
  o.yieldWhenIdle = c->settings.yieldWhenIdle;
  return o;
}

void addStats(cclComm_t comm, int opKind, bool compressed, bool chosenByCost, const coll::ExecStats& s) {
  std::lock_guard<std::mutex> lock(comm->counters.mutex);
  comm->counters.autoChosen[opKind] += chosenByCost ? 1 : 0;
  comm->counters.autoCompressed[opKind] += chosenByCost && compressed ? 1 : 0;
  cclOpStats_t& st = comm->counters.stats[opKind];
  st.calls += 1;
  st.compressedCalls += compressed ? 1 : 0;
  st.rawBytes += s.rawBytes;
  st.wireBytes += s.wireBytes;
  st.codecSeconds += static_cast<double>(s.codecNs) * 1e-9;
  comm->counters.acrossRawBytes += s.acrossRawBytes;
  comm->counters.acrossWireBytes += s.acrossWireBytes;
}

coll::ExecStats statsFor(cclComm_t comm) {
  coll::ExecStats s;
  if (comm->placement.topology && comm->placement.topology->nodes() > 1) s.nodeOf = &comm->placement.topology->nodeOf;
  s.rank = comm->rank;
  return s;
}

void noteUncompressed(cclComm_t comm, cclUncompressedReason_t why) {
  std::lock_guard<std::mutex> lock(comm->counters.mutex);
  comm->counters.uncompressed[why] += 1;
}

void drainAsync(cclComm_t comm, const void* runner) {
  std::unique_lock<std::mutex> lock(comm->async.mutex);
  comm->async.done.wait(lock, [&] { return comm->async.pending == 0 || (runner && comm->async.stream == runner); });
}

void beginAsync(cclComm_t comm, const void* runner) {
  std::unique_lock<std::mutex> lock(comm->async.mutex);
  comm->async.done.wait(lock, [&] { return comm->async.pending == 0 || comm->async.stream == runner; });
  ++comm->async.pending;
  comm->async.stream = runner;
}

void endAsync(cclComm_t comm) {
  std::lock_guard<std::mutex> lock(comm->async.mutex);
  if (--comm->async.pending == 0) comm->async.stream = nullptr;
  comm->async.done.notify_all();
}

void failAsync(cclComm_t comm, cclResult_t code, const std::string& message) {
  cclResult_t none = cclSuccess;
  if (comm->life.aborted.load()) return;
  if (comm->life.asyncError.compare_exchange_strong(none, code) && !message.empty()) recordAsyncMessage(comm, message);
  comm->life.callMet = true;
}

bool groupActive() { return tlsGroup.depth > 0; }

bool groupHasComm(cclComm_t comm) {
  return std::any_of(tlsGroup.queued.begin(), tlsGroup.queued.end(), [&](const Op& o) { return o.comm == comm; });
}

void groupForget(cclComm_t comm) {
  auto& q = tlsGroup.queued;
  q.erase(std::remove_if(q.begin(), q.end(), [&](const Op& o) { return o.comm == comm; }), q.end());
}

void groupFail(cclResult_t code, const std::string& why) {
  if (tlsGroup.depth == 0 || tlsGroup.error != cclSuccess) return;
  tlsGroup.error = code;
  tlsGroup.errorMessage = why.empty() ? cclGetLastError(nullptr) : why;
}

void submit(Op&& op) {
  if (tlsGroup.depth > 0) {
    retainComm(op.comm);
    op.hold = std::shared_ptr<void>(op.comm, [](void* c) { releaseComm(static_cast<cclComm_t>(c)); });
    if (op.stream) op.streamHold = holdHostStream(op.stream);  // null when destroyed meanwhile: refused at the end
    tlsGroup.queued.push_back(std::move(op));
    return;
  }
  if (op.stream) {
    coll::Stream* stream = op.stream;
    std::vector<cclComm_t> comms{op.comm};
    enqueueAsync(stream, comms, [op = std::move(op)] { runOne(op); });
    return;
  }
  drainAsync(op.comm, nullptr);
  runOne(op);
}

}  // namespace ccl::api

extern "C" {

CCL_API cclResult_t cclGroupStart(void) {
  ++ccl::api::tlsGroup.depth;
  return cclSuccess;
}

CCL_API cclResult_t cclGroupEnd(void) {
  using namespace ccl;
  return api::guard(nullptr, "cclGroupEnd", [&] {
    api::GroupState& g = api::tlsGroup;
    CCL_CHECK(g.depth > 0, cclInvalidUsage, "cclGroupEnd without a matching cclGroupStart");
    if (--g.depth > 0) return;
    std::vector<api::Op> ops = std::move(g.queued);
    g.queued.clear();
    cclResult_t failed = g.error;
    const std::string firstError = std::move(g.errorMessage);
    g.error = cclSuccess;
    g.errorMessage.clear();
    // A group refused here runs none of its calls: the sequence numbers they took are given
    // back (latest first), or this rank's later calls would no longer match its peers'.
    // So are the positions in the step their automatic feedback took (CCL_FEEDBACK), or the
    // calls after the group would take other tensors' positions, so a fresh residual.
    auto refuse = [&](cclResult_t code, const char* why) {
      for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
        if (it->seq) --*it->seq;
        it->comm->compression.autoFeedback.giveBack(it->feedbackTaken);
      }
      throw Error(code, why);
    };
    if (failed != cclSuccess)
      refuse(failed, ("an operation of the group failed (" + firstError + "); the whole group was dropped").c_str());
    if (ops.empty()) return;
    if (std::any_of(ops.begin(), ops.end(), [](const api::Op& o) { return o.comm->life.released.load(); }))
      refuse(cclInvalidUsage,
             "a communicator of the group was destroyed or aborted (by another thread) before the group's end; the "
             "whole group was dropped");
    if (std::any_of(ops.begin(), ops.end(), [](const api::Op& o) { return o.device != nullptr; })) {
      std::vector<api::DeviceCall> calls;
      for (const api::Op& op : ops) {
        if (!op.device)
          refuse(cclInvalidUsage,
                 "a group mixes calls on host and on device buffers; issue them in groups of their own");
        // One stream per communicator (NCCL's rule); a program driving several devices from
        // one thread gives each communicator its device's stream.
        for (const api::Op& other : ops)
          if (other.device && other.device->comm == op.device->comm && other.device->stream != op.device->stream)
            refuse(cclInvalidUsage, "the operations of one communicator in a group must all use one stream");
        calls.push_back(*op.device);
      }
      api::runDeviceGroup(calls);
      return;
    }
    coll::Stream* stream = ops.front().stream;
    for (const api::Op& op : ops)
      if (op.stream != stream) refuse(cclInvalidUsage, "the operations of one group must all use one stream");
    if (stream && (!ops.front().streamHold || !api::holdHostStream(stream)))
      refuse(cclInvalidUsage,
             "the group's host stream was destroyed (by another thread) before the group's end; the whole group was "
             "dropped");
    // The stream's last reference may be ours (destroyed since the check): it must go here,
    // after the enqueue, not with an operation on the stream's own thread.
    std::vector<std::shared_ptr<coll::Stream>> streamHolds;
    for (api::Op& op : ops) streamHolds.push_back(std::move(op.streamHold));
    api::separateFeedback(ops, refuse);
    const std::vector<cclComm_t> comms = api::commsOf(ops);
    if (stream) {
      api::enqueueAsync(stream, comms, [ops = std::move(ops)] { api::runGroup(ops); });
      return;
    }
    for (cclComm_t c : comms) api::drainAsync(c, nullptr);
    api::runGroup(ops);
  });
}

}  // extern "C"
