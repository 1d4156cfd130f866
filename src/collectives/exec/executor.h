// SPDX-License-Identifier: BSD-3-Clause
// The host executor: runs plans on host memory over a transport. Sends and receives are
// posted as soon as the steps they wait for are done, so with a chunked plan the transfer
// of one chunk overlaps the reduction of the previous one. Several jobs (one per
// communicator of a group) run together in one loop, so one thread can drive them all.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "collectives/plan/plan.h"
#include "common/tags.h"
#include "transport/transport.h"

namespace ccl::coll {

// Sends a job (or a staged link's group) keeps in flight at once. UCX 1.13's shared-memory
// rendezvous stalls with hundreds of concurrent large sends between threads of one process
// (seen with 3+ ranks and 64 KiB-256 KiB chunks); a window also keeps the pipeline in chunk
// order.
constexpr size_t kMaxSendsInFlight = 8;

struct Buffers {
  const void* send = nullptr;
  void* recv = nullptr;
  void* scratch = nullptr;    // at least plan.scratchBytes
  float* feedback = nullptr;  // error-feedback residual, when the plan's encodes use one
};

// What a job moved and how long its codec steps took.
struct ExecStats {
  uint64_t rawBytes = 0;   // bytes sent, counted as the uncompressed elements they carry
  uint64_t wireBytes = 0;  // bytes actually sent
  uint64_t codecNs = 0;    // encode and decode time
  // Of the sends, those to ranks of other nodes than `rank`'s in `topo` (none without one).
  uint64_t acrossRawBytes = 0, acrossWireBytes = 0;
  const std::vector<int>* nodeOf = nullptr;  // the topology's node of each rank, or null
  int rank = 0;
  // Counts a send to `peer` of `wire` bytes that carry `raw` bytes of data.
  void addSend(int peer, uint64_t raw, uint64_t wire) {
    rawBytes += raw;
    wireBytes += wire;
    if (nodeOf && (*nodeOf)[static_cast<size_t>(peer)] != (*nodeOf)[static_cast<size_t>(rank)]) {
      acrossRawBytes += raw;
      acrossWireBytes += wire;
    }
  }
};

struct Job {
  const Plan* plan = nullptr;
  Buffers buffers;
  transport::Transport* transport = nullptr;
  uint64_t tagBase = 0;                        // or'ed into every step tag (call sequence)
  const std::atomic<bool>* aborted = nullptr;  // checked while waiting; may be null
  uint64_t callSeed = 0;                       // mixed into the codec seed: the same on every rank for one call
  ExecStats* stats = nullptr;                  // accumulated into when set
  // Non-zero: a digest of how this rank called the operation (count, type, op, root,
  // codec). The job ends successfully only once this rank has seen every rank's (in
  // ceil(log2 n) rounds of small messages, beside the plan's steps); a difference fails the
  // job with cclInvalidUsage here and, through the transport's abort, on every rank,
  // instead of leaving ranks waiting for messages that will never come or returning a
  // result that mixed two calls.
  uint64_t signature = 0;
};

struct ExecOptions {
  // A job fails with cclSystemError when nothing completes for this long.
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  // Yield the CPU when a pass finds nothing to do (ranks outnumber cores).
  bool yieldWhenIdle = true;
};

// Runs every job to completion. Throws ccl::Error on the first failure (remote error,
// size mismatch, abort, timeout); requests still in flight are then cancelled. A failure of
// this rank's own (a step that throws, memory it cannot get, a request the transport fails
// here) aborts the jobs' transports before it is thrown, so that the peers' calls fail at
// once instead of waiting for CCL_TIMEOUT for messages this rank will never send; a peer's
// failure (cclRemoteError) and a timeout are left to the loss detection (api/watch.h).
void execute(std::span<const Job> jobs, const ExecOptions& options);

// In a catch block: rethrows the failure being handled, after aborting `transports` (those
// not aborted yet) when the failure is this rank's own (anything but cclRemoteError), so that
// the peers' calls fail at once instead of waiting for the messages this rank will never send.
// Exceptions other than ccl::Error become one (std::bad_alloc: cclSystemError), so that the
// communicator is marked failed as for any failed operation. execute() does it for failures
// inside the jobs, the api layer for those before them (scratch or a residual it cannot get).
[[noreturn]] void rethrowTellingPeers(std::span<transport::Transport* const> transports);

// Fault injection, for tests only (nothing in the library sets it): when set, the executor
// calls it before it starts each step of a job, on the thread running the job, and what it
// throws fails the job as a failure of that step on this rank would. A rank's own failure
// in the middle of a call cannot be caused otherwise
// (tests/unit/collectives/exec/executor_local_failure_test.cc). Unset, it costs one load and
// one branch per step.
using StepFault = void (*)(const Job& job, const Step& step);
inline std::atomic<StepFault> stepFault{nullptr};

// The error of a message of another size than its receive expected: the ranks called the
// operation otherwise (the caller has aborted the transport as for a mismatch).
Error sentOtherSize(int peer, size_t got, size_t expected);

}  // namespace ccl::coll
