// SPDX-License-Identifier: BSD-3-Clause
// The stream executor's link over a ccl transport (stream_executor.h's StreamLink): on host
// streams in the tests and the host-stream feature, and staged through pinned host memory for
// device buffers where no NCCL moves them (CCL_DEVICE_TRANSPORT=staged).
#pragma once

#include <algorithm>
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

#include "collectives/exec/stream.h"
#include "collectives/exec/stream_executor.h"
#include "transport/transport.h"

namespace ccl::coll {

// Host memory to stage device buffers through a host transport: pinned memory for CUDA
// streams, plain memory in the host tests. Two kinds of calls:
// - alloc/free: the link's flags, made with the link and freed with it; they may wait for the
//   whole device;
// - allocOn/freeOn: the staging blocks, made again while other ranks' calls run on the device,
//   so they must not wait for other streams' work. allocOn's memory is usable by work enqueued
//   on the stream after the call; freeOn frees once the work enqueued on it so far has run (a
//   null stream: the caller knows no stream's work uses the block any more). Neither may
//   wait for the device. With several ranks of one process on one GPU, a
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
// receives back (device -> pinned host -> UCX -> pinned host -> device). A staged encoded
// stream goes over the transport at its true length, read from its header in staging
// memory: the copies move its bound, the network only what the codec wrote.
//
// Staging is bounded in bytes: a ring of kStagingBlocks blocks of at most stagingBytes /
// kStagingBlocks each, one per group in flight. A wave larger than a block goes as several
// groups (sub-waves, subWaves()), split alike at both ends of every pair. A group takes the
// block after the last one taken, once the stream has raised the release flag past the
// group that held it before (the host waits for it, within the time-out: back-pressure, so
// the host never enqueues more than kStagingBlocks groups ahead of the GPU). The ring is
// allocated at the first wave and made again only when a group is larger than any before
// (up to the bound, or a single message larger than a block's share), once the stream has
// passed every group in flight, by StagingMemory's allocOn/freeOn: the steady path
// allocates nothing.
//
// A group costs the stream five commands, whatever its transfers: one batch of copies of
// its sends to staging, a flag store (every send staged), a flag wait (the proxy has
// exchanged the group), one batch of copies of its receives out, and a flag store (the
// block is free). On CUDA the flags are stream memory operations: the store fences the
// copies before it, so the proxy reads staged bytes only once the device has written them,
// through CUDA's documented order. The exchange runs on a proxy thread of the link's own (a
// host stream), never in a host function of the stream: a host function that blocked for
// the network would hold CUDA's one callback thread, and with two ranks in one process the
// second rank's host functions, which its exchange needs, would wait behind the first's. An
// exchange's failure is noted with its group's ticket and reaches the call whose group it
// was through failureCheck(); the proxy raises the group's flag whatever happened, so the
// stream never waits for ever.
class TransportLink final : public StreamLink {
 public:
  // Groups of a staged link in flight at most (eight, as NCCL's steps).
  static constexpr size_t kStagingBlocks = 8;
  // stagingBytes: the staging ring's bound (CCL_STAGING_BYTES); 0: the setting's.
  TransportLink(transport::Transport& t, bool exactLengths, std::chrono::milliseconds timeout,
                const std::atomic<bool>* aborted = nullptr, std::optional<StagingMemory> staging = std::nullopt,
                size_t stagingBytes = 0);
  ~TransportLink() override;  // frees the staging blocks: the streams must have run the waves
  TransportLink(const TransportLink&) = delete;
  TransportLink& operator=(const TransportLink&) = delete;
  void group(std::span<const Transfer> transfers, Stream& stream) override;
  bool exactLengths() const override { return exact_; }
  bool sendsAtBound() const override { return !exact_ && !staging_; }
  std::function<void()> failureCheck() override;
  // Aborts the transport (its peers' calls fail naming this rank). A staged link's proxy,
  // the thread that drives the transport, then progresses it, which sends UCX's notices; an
  // unstaged link's next exchange does (the local and shared-memory transports need none).
  void tellPeers() override;
  // A staged wave that needs blocks the streams still hold (more groups in flight than the
  // ring has, or a ring grown while groups are in flight).
  bool mayBlock(std::span<const Transfer> transfers) const override;

  // A block's bytes at most, for a ring of stagingBytes (CCL_STAGING_BYTES).
  static size_t blockBytes(size_t stagingBytes) {
    return std::max<size_t>(stagedBytes(stagingBytes / kStagingBlocks), 64 * 1024);
  }
  // Bytes a transfer takes in a staging block.
  static size_t stagedBytes(size_t bytes) { return (bytes + 63) & ~size_t{63}; }
  // The sub-waves of a staged wave of `nranks` ranks: for each transfer of `xs` (in the
  // order the link posts them), the group it goes in. Each pair's messages in each direction
  // fill groups in order, at most blockBytes / (2 (nranks - 1)) staged bytes of them in one
  // (a message larger than that share alone), so the two ends of every pair split alike and
  // a group fits one block unless one of its messages is larger than its share.
  static std::vector<uint32_t> subWaves(std::span<const Transfer> xs, int nranks, size_t blockBytes);
  // The bytes of staging the ring holds now (every block).
  size_t stagingHeld() const { return largest_ * blocks_.size(); }

 private:
  struct Block {
    void* memory = nullptr;
    size_t bytes = 0;
    uint64_t ticket = 0;  // of the group that last held it; free once released_ reaches it
  };
  // The groups a staged wave goes as (subWaves over this link's block bound; one when the
  // wave fits a block): each transfer's group, and in *bytes each group's staged bytes.
  std::vector<uint32_t> groupsOf(std::span<const Transfer> xs, std::vector<size_t>* bytes) const;
  // One group of a staged wave: stages its sends, has the proxy exchange it, and copies
  // its receives out.
  void stagedGroup(std::span<const Transfer> xs, Stream& stream);
  // Posts every transfer and progresses the transport until all completed. Sends are
  // posted once sendable() (when given).
  void exchange(const std::vector<Transfer>& xs, const std::function<bool()>& sendable = {});
  // What a send puts on the transport: an encoded stream's length when known (exact lengths,
  // or the header of a staged stream), else the posted size; noted in x.sent.
  size_t sendLength(const Transfer& x) const;
  // The next block of the ring, at least `bytes`, for group `ticket`: waits (within the
  // time-out, or until an abort) for the stream to release the group that held it before.
  Block& acquire(size_t bytes, uint64_t ticket, Stream& stream);
  // Waits until the stream has released the staging of groups up to `ticket`.
  void awaitReleased(uint64_t ticket);
  // What a time-out's message adds: the staging flags (how far the stream and the proxy
  // got) and the threads of this process blocked in calls that can wait (activity.h).
  std::string diagnosis() const;

  transport::Transport& t_;
  bool exact_;
  std::chrono::milliseconds timeout_;
  const std::atomic<bool>* aborted_;
  std::optional<StagingMemory> staging_;
  size_t blockBound_ = 0;  // a block's bytes at most, unless one message needs more
  std::vector<Block> blocks_;
  size_t largest_ = 0;  // every block's size: the largest group's staging so far
  std::unique_ptr<HostStream> proxy_;
  // The first failed group's ticket (none: UINT64_MAX), and its failure.
  std::atomic<uint64_t> failedAt_{UINT64_MAX};
  FirstFailure failure_;
  // Flags in staging memory, each raised to a group's ticket: tickets only grow.
  std::atomic<uint64_t>* staged_ = nullptr;    // the stream: the group's sends are staged
  std::atomic<uint64_t>* done_ = nullptr;      // the proxy: the group is exchanged (or failed)
  std::atomic<uint64_t>* released_ = nullptr;  // the stream: the group's receives are copied out
  // Groups enqueued: written by the enqueuing thread, read by the proxy's time-out diagnosis.
  std::atomic<uint64_t> tickets_{0};
};

}  // namespace ccl::coll
