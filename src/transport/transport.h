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
};

// The argument checks every transport's isend/irecv makes: peer in range, tag within
// kTagBits, a buffer for a non-empty message. Throws Error(cclInvalidArgument).
void checkPost(const Transport& t, int peer, uint64_t tag, const void* buf, size_t bytes);

}  // namespace ccl::transport
