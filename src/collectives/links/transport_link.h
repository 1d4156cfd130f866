// SPDX-License-Identifier: BSD-3-Clause
// The stream executor's link over a ccl transport (stream_executor.h's StreamLink): on host
// streams in the tests and the host-stream feature, and staged through pinned host memory for
// device buffers where no NCCL moves them (CCL_DEVICE_TRANSPORT=staged).
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

#include "collectives/stream.h"
#include "collectives/stream_executor.h"
#include "transport/transport.h"

namespace ccl::coll {

// Host memory to stage device buffers through a host transport: pinned memory for CUDA
// streams, plain memory in the host tests. Two kinds of calls:
// - alloc/free: the link's flags, made with the link and freed with it; they may wait for the
//   whole device;
// - allocOn/freeOn: the staging blocks, made again while other ranks' calls run on the device,
//   so they must not wait for other streams' work. allocOn's memory is usable by work enqueued
//   on the stream after the call; freeOn frees once the work enqueued on it so far has run (a
//   null stream: once the link has gone). With several ranks of one process on one GPU, a
//   free that waits for the whole device (cudaFreeHost) waits for another rank's flag kernel,
//   which waits for this rank's next wave: a deadlock, seen on an H200. CUDA's blocks are
//   cudaHostAlloc'd and kept until the link goes (cuda_stream.h).
struct StagingMemory {
  std::function<void*(size_t)> alloc;
  std::function<void(void*)> free;
  std::function<void*(size_t, Stream&)> allocOn;
  std::function<void(void*, Stream*)> freeOn;
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
// flight, by StagingMemory's allocOn/freeOn: the steady path allocates nothing. A staged encoded stream
// goes over the transport at its true length, read from its header in staging memory: the copies move its bound, the
// network only what the codec wrote.
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
  Block& acquire(size_t bytes, uint64_t ticket, Stream& stream);
  // Waits until the stream has released the staging of waves up to `ticket`.
  void awaitReleased(uint64_t ticket);
  // What a time-out's message adds: the staging flags (how far the stream and the proxy
  // got) and the threads of this process blocked in calls that can wait (activity.h).
  std::string diagnosis() const;

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

}  // namespace ccl::coll
