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
// reduce, copy) run on the caller's stream between waves; those a wave needs go first, the
// rest overlap the wave's transfers. The caller's stream waits for the last wave before the
// result's last steps, so every internal stream is joined back into it.
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

#include "collectives/executor.h"
#include "collectives/plan.h"
#include "collectives/stream.h"
#include "transport/nccl/nccl_transport.h"
#include "transport/transport.h"

namespace ccl::coll {

// One rank's part of the wave schedule of a call.
struct Schedule {
  // Transfer steps per wave, in the order the link posts them: by peer, then sends before
  // receives, then by message (tag and order among equal tags) — the same order at both ends.
  std::vector<std::vector<StepId>> waves;
  // Per step: a transfer's wave; a compute step's last wave it follows (-1: none).
  std::vector<int> level;
  // Per step: bytes a transfer posts when lengths are not known on the host: the matched
  // receive's size (an encoded stream's bound). Equal at both ends of every message.
  std::vector<size_t> postedBytes;
};

// Builds `rank`'s schedule from every rank's plan (planOf(r) for r in [0, nranks)). Throws
// cclInternalError when the plans do not pair up (a send without its receive) or wait on
// each other in a cycle.
Schedule scheduleWaves(const std::function<Plan(int)>& planOf, int nranks, int rank);

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
  std::atomic<bool> failed{false};  // a step failed: the rest of the call's steps do nothing
};

// Compute steps as kernels on a stream.
class StreamKernels {
 public:
  virtual ~StreamKernels() = default;
  virtual void enqueue(const std::shared_ptr<StreamRun>& run, StepId step, Stream& stream) = 0;
};

// Runs compute steps on host memory, on a host stream (compute_steps.h).
class HostKernels final : public StreamKernels {
 public:
  void enqueue(const std::shared_ptr<StreamRun>& run, StepId step, Stream& stream) override;
};

// Host memory to stage device buffers through a host transport: pinned memory for CUDA
// streams (cudaHostAlloc), plain memory in the host tests.
struct StagingMemory {
  std::function<void*(size_t)> alloc;
  std::function<void(void*)> free;
};

// A stream link over a ccl transport: a wave is one step on the stream that posts every
// transfer and progresses the transport until all completed. With exactLengths false it
// behaves as a device link does (sends at the posted size), so host tests run what the GPU
// path runs. With `staging` it is the staged transport of device memory: each wave copies
// its sends into host staging memory on the stream, exchanges them there, and copies the
// receives back (device -> pinned host -> UCX -> pinned host -> device). Staging is a ring of
// kStagingBlocks blocks, one per wave in flight: a wave takes the block after the last one
// taken, once the stream has raised the release flag past the wave that held it before (the
// host waits for it, within the time-out: back-pressure, so the host never enqueues more than
// kStagingBlocks waves ahead of the GPU). The ring is allocated at the first wave and made
// again only when a wave is larger than any before, once the stream has passed every wave in
// flight: the steady path allocates nothing. A staged encoded stream goes over
// the transport at its true length, read from its header in staging memory: the copies move
// its bound, the network only what the codec wrote.
//
// Staged exchanges run on a proxy thread of the link's own (a host stream), not on the
// stream, pipelined within a wave: the stream raises a flag in staging memory as each send
// has been copied to host (Stream::setFlag), the proxy posts each send once its flag is up,
// raises a second flag as the receives arrive, in order, and a third when the wave is done;
// the stream copies each receive back once the second flag reaches it (Stream::waitFlag).
// On CUDA the flag stores and waits are one-thread kernels.
// A host function that blocked for the network would hold CUDA's one callback thread, and
// with two ranks in one process the second rank's host functions, which its exchange
// needs, would wait behind the first rank's: a deadlock.
class TransportLink final : public StreamLink {
 public:
  // Waves of a staged link in flight at most (eight, as NCCL's steps).
  static constexpr size_t kStagingBlocks = 8;
  TransportLink(transport::Transport& t, bool exactLengths, std::chrono::milliseconds timeout,
                const std::atomic<bool>* aborted = nullptr, std::optional<StagingMemory> staging = std::nullopt);
  ~TransportLink() override;  // frees the staging blocks: the streams must have run the waves
  TransportLink(const TransportLink&) = delete;
  TransportLink& operator=(const TransportLink&) = delete;
  void group(std::span<const Transfer> transfers, Stream& stream) override;
  bool exactLengths() const override { return exact_; }
  bool sendsAtBound() const override { return !exact_ && !staging_; }

 private:
  struct Block {
    void* memory = nullptr;
    size_t bytes = 0;
    uint64_t wave = 0;  // the ticket of the wave that last held it; free once released_ reaches it
  };
  // Posts every transfer and progresses the transport until all completed. Sends are
  // posted once sendable(i) (when given); received(i) is called as receive i completes.
  void exchange(const std::vector<Transfer>& xs, const std::function<bool(size_t)>& sendable = {},
                const std::function<void(size_t)>& received = {});
  // What a send puts on the transport: an encoded stream's length when known (exact lengths,
  // or the header of a staged stream), else the posted size; noted in x.sent.
  size_t sendLength(const Transfer& x) const;
  // The next block of the ring, at least `bytes`, for wave `ticket`: waits (within the
  // time-out, or until an abort) for the stream to release the wave that held it before.
  Block& acquire(size_t bytes, uint64_t ticket);
  // Waits until the stream has released the staging of waves up to `ticket`.
  void awaitReleased(uint64_t ticket);

  transport::Transport& t_;
  bool exact_;
  std::chrono::milliseconds timeout_;
  const std::atomic<bool>* aborted_;
  std::optional<StagingMemory> staging_;
  std::vector<Block> blocks_;
  size_t largest_ = 0;  // every block's size: the largest wave's staging so far
  // Staged links: the waves' exchanges, and the flag (in staging memory) each sets to its
  // wave's ticket when it has run, whether it succeeded or not.
  // One wave of a staged link, shared by the stream's enqueuing and the proxy's exchange.
  struct StagedWave {
    std::vector<Transfer> staged;  // the transfers on staging memory
    std::vector<uint64_t> ticket;  // a send's staged_ ticket, a receive's received_ ticket
    uint64_t lastRecv = 0;         // received_ once every receive of the wave has arrived
    uint64_t done = 0;             // done_ once the wave's exchange has run
  };
  std::unique_ptr<HostStream> proxy_;
  FirstFailure failure_;                       // of the exchanges on the proxy
  std::atomic<uint64_t>* staged_ = nullptr;    // the stream: sends staged, up to this ticket
  std::atomic<uint64_t>* received_ = nullptr;  // the proxy: receives arrived, up to this ticket
  std::atomic<uint64_t>* done_ = nullptr;      // the proxy: waves exchanged, up to this ticket
  std::atomic<uint64_t>* released_ = nullptr;  // the stream: staging of waves up to this ticket free
  uint64_t sendTickets_ = 0, recvTickets_ = 0, tickets_ = 0;
};

// A stream link over a real NCCL communicator: a wave is ncclGroupStart, one
// ncclSend/ncclRecv per transfer at its posted size, ncclGroupEnd, on the stream's device
// handle. The lengths of encoded streams stay in device memory: receivers decode from the
// stream's own header.
class NcclLink final : public StreamLink {
 public:
  explicit NcclLink(transport::nccl::Transport& t) : t_(t) {}
  void group(std::span<const Transfer> transfers, Stream& stream) override;
  bool exactLengths() const override { return false; }

 private:
  transport::nccl::Transport& t_;
  std::vector<transport::nccl::Op> ops_;
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

// Enqueues `job` on `caller` (compute steps) and `comm` (waves), joined back into `caller`.
// Returns at once; failures surface through caller.takeError() (the first one), and the
// result is in place once caller has reached everything enqueued so far.
void executeOnStream(const StreamJob& job, StreamLink& link, StreamKernels& kernels, Stream& caller, Stream& comm);

// A group's jobs (NCCL's ncclGroupStart/End) enqueued together: wave w of the group is every
// job's wave w, posted as one group of transfers, job after job; so sends and receives that
// wait for each other (a send/recv pair, a ring of them) cannot deadlock. Every rank must
// give its jobs in an order that pairs them alike: collectives in issue order, then
// point-to-point calls in issue order (NCCL's rule for a group). A failure fails every job;
// each job's `finished` runs with the group's result.
void executeOnStream(std::span<const StreamJob> jobs, StreamLink& link, StreamKernels& kernels, Stream& caller,
                     Stream& comm);

}  // namespace ccl::coll
