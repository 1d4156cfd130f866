// SPDX-License-Identifier: BSD-3-Clause
// The stream executor: runs a plan ordered on the caller's stream, as NCCL runs a call.
// Nothing waits on the host: the call enqueues and returns.
//
// Transfers go out in *waves*: groups of sends and receives posted together (NCCL's
// ncclGroupStart/End) on an internal communication stream. A wave is assigned to every
// message from all ranks' plans at once (the longest chain of transfers before it, either
// side's dependencies counted), so the two ends of every message post it in the same wave,
// and within a wave the messages between one pair are ordered alike on both sides: a link
// that matches messages by order, as NCCL does, pairs them right. Compute steps (codec,
// reduce, copy) run on the caller's stream between waves, in batches of one kind whose steps
// do not depend on each other (one command each: StreamKernels); those a wave needs go
// first, the rest overlap the wave's transfers. The streams wait for each other only where
// steps need it, and the caller's stream waits for the last wave before the call's end, so
// every internal stream is joined back into it.
//
// A call costs tens of commands whatever its size (a wave: the batches it needs, two events
// between the streams, the link's group) and one host function, at its end: it takes the
// failures of the call's steps, of its link groups (StreamLink::failureCheck) and of its
// decodes (StreamRun::lastCheck), counts what the sends moved, and runs the jobs' finished.
// Host functions share one callback thread per process on CUDA: one per call, never one per
// wave or step, and none that waits. Where the link would make the caller wait (a staged
// link's ring full of groups the streams hold), the rest of the call goes to a launcher
// (Launcher): the caller returns.
//
// The same executor runs on host streams over ccl's transports (what the tests run) and on
// CUDA streams over NCCL (the GPU path): the stream, the link and the kernels are interfaces.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "collectives/exec/executor.h"
#include "collectives/exec/stream.h"
#include "collectives/plan/plan.h"
#include "collectives/plan/topology.h"
#include "collectives/plan/wave_schedule.h"
#include "transport/transport.h"

namespace ccl::coll {

// What one rank's sends move when every transfer goes at the schedule's posted size (a link
// that cannot see encoded lengths on the host, as NCCL's), against the uncompressed bytes
// they stand for. A quantizer's bound allows every block to be raw (non-finite input), so
// its streams posted at the bound move more than the data uncompressed: on such a link
// compression pays only when `posted` is below `raw` (sparsifiers at low keep ratios).
struct PostedBytes {
  size_t posted = 0;
  size_t raw = 0;
};
PostedBytes postedBytes(const Plan& plan, const Schedule& schedule);

// One transfer of a wave, as a link sees it.
struct Transfer {
  bool send = false;
  int peer = -1;
  uint64_t tag = 0;  // the plan's tag with the call's tag base; links that match by order ignore it
  void* buf = nullptr;
  size_t bytes = 0;               // posted size
  const size_t* exact = nullptr;  // send of an encoded stream: its length, read when the wave runs
  size_t* received = nullptr;     // receive: bytes received, written when the wave has run
  size_t* sent = nullptr;         // send: bytes the link sent, written when the wave has run
  // Its call's StreamRun::failed. A link that can tell its peers (StreamLink::tellPeers) and
  // finds it set when the group starts, or when a send of it would be posted, posts nothing
  // more of the group and tells them, without failing the group itself (the call's failure
  // is the step's): what a failed call left in its buffers is never sent as its data. Links
  // that post ahead of the stream (NVIDIA's NCCL) ignore it; compressed streams say so
  // themselves (codec::failedSenderHeader).
  const std::atomic<bool>* callFailed = nullptr;
};

// Stream-ordered point-to-point transfers: NCCL's model. A link, its transport and the
// streams must outlive the steps enqueued through them (synchronise before destroying).
class StreamLink {
 public:
  virtual ~StreamLink() = default;
  // Enqueues on `stream` one group of transfers, posted together and complete together.
  // Sends and receives between one pair match in the order given.
  virtual void group(std::span<const Transfer> transfers, Stream& stream) = 0;
  // True when sends read Transfer::exact as they run (the host sees lengths an encode
  // wrote); false when every transfer carries its posted size (a device link: the lengths
  // are in device memory), and a receive's length is then the posted one.
  virtual bool exactLengths() const = 0;
  // True when encoded streams cross the network at their posted size (NCCL's link); a staged
  // link reads their true length from the staged bytes and sends only that.
  virtual bool sendsAtBound() const { return !exactLengths(); }
  // True when posting `transfers` now could block the calling thread (a staged link whose
  // staging is in use by groups the streams have not released yet).
  virtual bool mayBlock(std::span<const Transfer> transfers) const {
    (void)transfers;
    return false;
  }
  // For a link whose groups fail off the stream (a proxy's exchange): a check of the groups
  // enqueued so far, for a host step that runs once the stream has passed them; it throws
  // the first failure among them (a later group's failure is a later call's). Empty when the
  // link's failures are the stream's own (its steps throw there).
  virtual std::function<void()> failureCheck() { return {}; }
  // This rank's own call failed (a step, a decode, an enqueue; not a peer's abort): the
  // peers' calls over this link fail at once, their current one or their next, instead of
  // waiting for this rank's messages until CCL_TIMEOUT (the host executor's rule,
  // coll::rethrowTellingPeers). Thread-safe; a link without a way to do so does nothing.
  virtual void tellPeers() {}
};

// The state of one call on streams, shared by the steps it enqueued; it lives until the
// last of them has run.
struct StreamRun {
  std::shared_ptr<const Plan> plan;
  std::shared_ptr<const Schedule> schedule;
  Buffers buffers;
  uint64_t callSeed = 0;
  ExecStats* stats = nullptr;  // added to as steps run; the caller reads it after synchronising
  std::vector<size_t> lengths;
  // Per slot: the most bytes an encoded stream there can span (its encode's room or its
  // receive's posted size): what a device decode reads, its header telling the rest.
  std::vector<size_t> slotBytes;
  // Per step: the bytes a send's link sent (0 until the wave has run).
  std::vector<size_t> sent;
  // A step failed: the rest of the call's steps do nothing, but for a failed sender's stream
  // (codec::failedSenderHeader) where they would write an encoded one.
  std::atomic<bool> failed{false};
  // What the kernels leave for the call's last host step to check once every step has run
  // (CUDA: the one word all the call's decodes OR their status into), so a call costs one
  // host function, not one per decode. Throws the failure it finds. Set while enqueuing.
  std::function<void()> lastCheck;
  uint32_t* decodeStatus = nullptr;  // that word, as the device sees it (CUDA kernels only)
};

// Compute steps as kernels on a stream, enqueued in batches: steps of one kind that do not
// depend on each other (a wave's encodes, its decodes), one command on the stream each, as
// one kernel driven by a table of the steps would be.
class StreamKernels {
 public:
  virtual ~StreamKernels() = default;
  virtual void enqueue(const std::shared_ptr<StreamRun>& run, std::span<const StepId> steps, Stream& stream) = 0;
};

// Runs compute steps on host memory, on a host stream (compute_steps.h): a batch is one step
// of the stream.
class HostKernels final : public StreamKernels {
 public:
  void enqueue(const std::shared_ptr<StreamRun>& run, std::span<const StepId> steps, Stream& stream) override;
};

struct StreamJob {
  std::shared_ptr<const Plan> plan;
  std::shared_ptr<const Schedule> schedule;  // of this plan's rank
  Buffers buffers;
  uint64_t tagBase = 0;
  uint64_t callSeed = 0;
  ExecStats* stats = nullptr;
  // Run on `caller` once the call has run (every wave and step), with its result: the place
  // for bookkeeping that must follow the call (statistics, an asynchronous error, the
  // communicator's count of calls in flight). On a CUDA stream it runs as a host function:
  // it must not call CUDA, and must not throw.
  std::function<void(cclResult_t, const std::string&)> finished;
};

// Where a call's enqueuing goes on when the link would block its caller (StreamLink::mayBlock):
// a thread of the communicator's own that enqueues the rest of the call on a stream of its
// own, which starts where the caller's stream was; the caller's stream waits for a flag
// that stream raises at the call's end (a stream memory operation: no host thread is
// waited for on the GPU). So the caller never waits for staging, and its stream still orders
// the call between what came before and what comes after. While the thread has work, every
// later call goes to it whole (the link and the comm stream take calls in order).
class Launcher {
 public:
  virtual ~Launcher() = default;
  virtual Stream& stream() = 0;
  // The flag the caller's stream waits for (memory the streams reach), and a new ticket.
  virtual std::atomic<uint64_t>* flag() = 0;
  virtual uint64_t nextTicket() = 0;
  // Runs `rest` on the thread, after what was posted before. busy() from the post until it
  // ran. The only thread that enqueues on stream(). May wait while many calls are posted
  // (events a call waits for stay valid only so far: CudaStream's ring).
  virtual void post(std::function<void()> rest) = 0;
  virtual bool busy() const = 0;
};

// Enqueues `job` on `caller` (compute steps) and `comm` (waves), joined back into `caller`.
// Returns at once; failures surface through caller.takeError() (the first one), and the
// result is in place once caller has reached everything enqueued so far. With a launcher,
// the part of the call that would block goes to it (Launcher); failures found there reach
// the jobs' `finished`.
void executeOnStream(const StreamJob& job, StreamLink& link, StreamKernels& kernels, Stream& caller, Stream& comm);

// A group's jobs (NCCL's ncclGroupStart/End) enqueued together: wave w of the group is every
// job's wave w, posted as one group of transfers, job after job; so sends and receives that
// wait for each other (a send/recv pair, a ring of them) cannot deadlock. Every rank must
// give its jobs in an order that pairs them alike: collectives in issue order, then
// point-to-point calls in issue order (NCCL's rule for a group). A failure fails every job;
// each job's `finished` runs with the group's result.
void executeOnStream(std::span<const StreamJob> jobs, StreamLink& link, StreamKernels& kernels, Stream& caller,
                     Stream& comm, Launcher* launcher = nullptr);

}  // namespace ccl::coll
