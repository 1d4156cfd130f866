// SPDX-License-Identifier: BSD-3-Clause
// The transport contract: moving bytes between the ranks of one communicator. A transport
// knows nothing of collectives or codecs. All calls are non-blocking; progress is explicit.
//
// Threading: one transport is driven by one thread at a time (the thread running the
// communicator's current operation). abort() alone may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/tags.h"

namespace ccl::transport {

// Tags carry at most kTagBits bits (common/tags.h); the transport adds the source rank itself.
constexpr int kTagBits = tags::kCallerBits;
constexpr uint64_t kTagMask = tags::kCallerMask;

// One posted send or receive. Destroying a request that has not completed cancels it; the
// destructor returns once the transport no longer writes the request's buffer. (A send
// that can never complete, e.g. a large send the peer never receives, is abandoned after a
// short grace; the peer of such a failed or aborted exchange might still read its buffer.)
// Requests must be destroyed before the transport that made them.
class Request {
 public:
  virtual ~Request() = default;
  // Non-blocking. True once the operation has completed; false while pending. Throws
  // ccl::Error when it failed: cclRemoteError for a dead or unreachable peer,
  // cclInvalidUsage when an incoming message is larger than the posted receive,
  // cclSystemError for a local failure. Call progress() between polls.
  virtual bool test() = 0;
  // For a completed receive, the bytes actually received (<= the posted size).
  virtual size_t receivedBytes() const = 0;
};

// Where the bytes of a receive in place go (Transport::irecvInPlace): the transport hands
// each piece of the message to take() as the piece arrives, in order (offsets ascending from
// 0, back to back), from memory it holds (a shared-memory ring, a message already here),
// valid during the call only. Every piece but the last is a multiple of kPieceAlign bytes,
// so a piece never splits an element of up to that size. take() may throw (a reduce that
// refuses the data): the receive then fails with what it threw (its test() throws it, on
// every call), the sink is called no more, and the rest of the message is consumed and
// dropped, so the next message with that tag goes to the next receive. The exception never
// leaves progress(), a post, or another request's test(), whichever ran the sink.
class Sink {
 public:
  virtual ~Sink() = default;
  virtual void take(size_t offset, const void* data, size_t bytes) = 0;
};
constexpr size_t kPieceAlign = 16;

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* name() const = 0;

  // Posts a send of `bytes` from `buf` to `peer` (which may be this rank). It matches the
  // receive posted by `peer` with this rank as source and the same tag; messages between
  // one pair with one tag match in posting order. `buf` must stay valid and unchanged
  // until the request completes. `bytes` may be 0. Throws ccl::Error on invalid peer/tag.
  [[nodiscard]] virtual std::unique_ptr<Request> isend(int peer, uint64_t tag, const void* buf, size_t bytes) = 0;

  // Posts a receive of at most `bytes` into `buf` from `peer` with `tag`.
  [[nodiscard]] virtual std::unique_ptr<Request> irecv(int peer, uint64_t tag, void* buf, size_t bytes) = 0;

  // A receive of at most `bytes` from `peer` with `tag` (matched as irecv's) whose bytes go
  // to `sink` where the transport holds them, so that the caller can consume them (reduce
  // them into its own data) without a copy into a buffer of its own first. Returns null when
  // this transport cannot for this peer; the caller then posts irecv. The sink runs on the
  // thread driving this transport (inside progress(), a request's test() or this post); the
  // request completes once the sink has taken the whole message (receivedBytes as for
  // irecv); once the request is destroyed the sink is called no more. A message larger than
  // `bytes` fails the request as irecv's does, before the sink sees any of it.
  [[nodiscard]] virtual std::unique_ptr<Request> irecvInPlace(int peer, uint64_t tag, size_t bytes, Sink* sink) {
    (void)peer, (void)tag, (void)bytes, (void)sink;
    return nullptr;
  }

  // Advances every posted operation. Never blocks. Returns true when anything completed
  // or changed state, so callers can back off (yield) when nothing did.
  virtual bool progress() = 0;

  // True when bytes to `peer` (not this rank) move through shared memory on this host. The
  // same answer on both ends of a pair.
  virtual bool sharedMemoryLink(int peer) const = 0;

  // Callable from any thread: makes every pending and future request fail promptly
  // (test() throws cclRemoteError / cclInvalidUsage) instead of waiting.
  virtual void abort() = 0;
  // abort() for a usage error the caller found (its peers are out of step with it): the
  // peers' requests then fail with cclInvalidUsage rather than cclRemoteError.
  virtual void abortMismatch() = 0;
  // Callable from any thread, before abort(): rank `peer` is lost (its process ended, it
  // aborted, or its host went silent), so a pending send to it is given up at once rather
  // than after a transport's grace for a live peer to take it.
  virtual void peerLost(int peer) { (void)peer; }

  // Whether this transport is aborted, by this rank or through a peer's abort it has
  // learned of, whether for a mismatch, and by which rank (-1: not known). What a transport
  // built over another follows: a communicator's abort is every pair's. Called by the
  // thread driving the transport.
  struct AbortState {
    bool aborted = false;
    bool mismatch = false;
    int by = -1;
  };
  virtual AbortState abortState() const { return {}; }
};

// The argument checks every transport's isend/irecv makes: peer in range, tag within
// kTagBits, a buffer for a non-empty message. Throws Error(cclInvalidArgument).
void checkPost(const Transport& t, int peer, uint64_t tag, const void* buf, size_t bytes);
// The same for irecvInPlace: a sink, whatever the size.
void checkPostInPlace(const Transport& t, int peer, uint64_t tag, const Sink* sink);

}  // namespace ccl::transport
