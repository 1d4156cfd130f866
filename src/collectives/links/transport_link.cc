// SPDX-License-Identifier: BSD-3-Clause
#include "collectives/links/transport_link.h"

#include <sched.h>

#include <algorithm>
#include <new>
#include <string>
#include <thread>

#include "codecs/codec.h"
#include "common/activity.h"
#include "common/error.h"
#include "common/log.h"

namespace ccl::coll {

TransportLink::TransportLink(transport::Transport& t, bool exactLengths, std::chrono::milliseconds timeout,
                             const std::atomic<bool>* aborted, std::optional<StagingMemory> staging)
    : t_(t), exact_(exactLengths), timeout_(timeout), aborted_(aborted), staging_(std::move(staging)) {
  if (!staging_) return;
  // The flags on cache lines of their own: each is written by one side, polled by the other.
  auto* flags = static_cast<char*>(staging_->alloc(256));
  CCL_CHECK(flags, cclSystemError, "no staging memory for the link's flags");
  staged_ = new (flags) std::atomic<uint64_t>(0);
  received_ = new (flags + 64) std::atomic<uint64_t>(0);
  done_ = new (flags + 128) std::atomic<uint64_t>(0);
  released_ = new (flags + 192) std::atomic<uint64_t>(0);
  blocks_.resize(kStagingBlocks);
  proxy_ = std::make_unique<HostStream>();
}

TransportLink::~TransportLink() {
  if (proxy_) proxy_->synchronize();
  for (Block& b : blocks_)
    if (b.memory) staging_->freeOn(b.memory, nullptr);
  if (staged_) staging_->free(staged_);
}

std::string TransportLink::diagnosis() const {
  std::string d;
  if (staging_) {
    d = " [staging flags: the stream staged sends up to ticket " + std::to_string(staged_->load()) +
        " and released waves up to " + std::to_string(released_->load()) + "; the proxy flagged receives up to " +
        std::to_string(received_->load()) + " and finished waves up to " + std::to_string(done_->load()) + "]";
  }
  // A peer of this process stuck in a call that waits for the device shows here (activity.h).
  const std::string stuck = activitiesLongerThan(1000);
  if (!stuck.empty()) d += " [threads of this process waiting: " + stuck + "]";
  return d;
}

void TransportLink::awaitReleased(uint64_t ticket) {
  ActivityScope busy("waiting for the stream to release staging");
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  for (unsigned spins = 0; released_->load(std::memory_order_acquire) < ticket; ++spins) {
    if (aborted_ && aborted_->load(std::memory_order_relaxed))
      throw Error(cclInvalidUsage, "the communicator was aborted during the operation");
    if (Clock::now() - start > timeout_)
      throw Error(cclSystemError, "the staging of wave " + std::to_string(ticket) + " was not released within " +
                                      std::to_string(timeout_.count()) + " ms (CCL_TIMEOUT)" + diagnosis());
    if (spins < 1000)
      sched_yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

TransportLink::Block& TransportLink::acquire(size_t bytes, uint64_t ticket, Stream& stream) {
  if (bytes > largest_) {
    // A wave larger than any before: once the streams have passed every wave of this link in
    // flight, the whole ring is made again at this size, so until a larger wave comes nothing
    // is allocated. Other ranks' waves may be on the device meanwhile: allocOn and freeOn never
    // wait for them (StagingMemory).
    awaitReleased(ticket - 1);
    largest_ = std::max(bytes, size_t{64});
    CCL_INFO("staging ring: %zu blocks of %zu bytes", kStagingBlocks, largest_);
    for (Block& b : blocks_) {
      if (b.memory) staging_->freeOn(b.memory, &stream);
      b.bytes = 0;
      b.memory = staging_->allocOn(largest_, stream);
      CCL_CHECK(b.memory, cclSystemError, "no staging memory for " + std::to_string(largest_) + " bytes");
      b.bytes = largest_;
    }
  }
  Block& b = blocks_[(ticket - 1) % kStagingBlocks];  // tickets start at 1
  awaitReleased(b.wave);
  b.wave = ticket;
  return b;
}

void TransportLink::group(std::span<const Transfer> transfers, Stream& stream) {
  std::vector<Transfer> xs(transfers.begin(), transfers.end());
  if (!staging_) {
    stream.enqueue([this, xs = std::move(xs)] { exchange(xs); });
    return;
  }
  ActivityScope busy("enqueuing a staged wave (copies, flag kernels)");
  size_t total = 0;
  for (const Transfer& x : xs) total += (x.bytes + 63) & ~size_t{63};
  Block& block = acquire(total, tickets_ + 1, stream);
  auto wave = std::make_shared<StagedWave>();
  wave->staged = xs;
  size_t at = 0;
  for (Transfer& x : wave->staged) {
    x.buf = static_cast<char*>(block.memory) + at;
    at += (x.bytes + 63) & ~size_t{63};
  }
  // Pipelined: each send is staged and flagged in turn, and the proxy posts it as soon as its
  // flag is up; each receive is copied back as soon as it (and every receive before it) has
  // arrived. Tickets only grow, across waves, so the flags never go back.
  wave->ticket.assign(xs.size(), 0);
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!xs[i].send) continue;
    stream.copy(wave->staged[i].buf, xs[i].buf, xs[i].bytes);
    wave->ticket[i] = ++sendTickets_;
    stream.setFlag(staged_, wave->ticket[i]);
  }
  for (size_t i = 0; i < xs.size(); ++i)
    if (!xs[i].send) wave->ticket[i] = ++recvTickets_;
  wave->lastRecv = recvTickets_;
  wave->done = ++tickets_;
  proxy_->enqueue([this, wave] {
    std::vector<char> arrived(wave->staged.size(), 0);
    size_t next = 0;  // the first receive not yet flagged
    failure_.run([&] {
      exchange(
          wave->staged, [&](size_t i) { return staged_->load(std::memory_order_acquire) >= wave->ticket[i]; },
          [&](size_t i) {
            arrived[i] = 1;
            for (; next < arrived.size(); ++next) {
              if (wave->staged[next].send) continue;
              if (!arrived[next]) break;
              received_->store(wave->ticket[next], std::memory_order_release);
            }
          });
    });
    // Whatever happened, after the failure is noted: the stream must not wait for ever.
    received_->store(wave->lastRecv, std::memory_order_release);
    done_->store(wave->done, std::memory_order_release);
  });
  for (size_t i = 0; i < xs.size(); ++i) {
    if (xs[i].send) continue;
    stream.waitFlag(received_, wave->ticket[i]);
    stream.copy(xs[i].buf, wave->staged[i].buf, xs[i].bytes);
  }
  stream.waitFlag(done_, wave->done);  // the sends too have left staging memory
  // The exchange's failure is the stream's (and so the call's).
  stream.enqueue([this] {
    std::string m;
    if (const cclResult_t c = failure_.take(&m); c != cclSuccess) throw Error(c, m);
  });
  stream.setFlag(released_, wave->done);  // the receives are copied out: the block is free
}

size_t TransportLink::sendLength(const Transfer& x) const {
  size_t n = x.bytes;
  if (x.exact && exact_) {
    n = *x.exact;
  } else if (x.exact && staging_) {
    try {
      n = codec::streamBytes(x.buf, x.bytes);
    } catch (const Error&) {
      // An invalid stream goes at its posted size: the receiver's decode refuses it and the
      // call fails at both ends, instead of one end waiting for a message never sent.
    }
  }
  if (x.sent) *x.sent = n;
  return n;
}

void TransportLink::exchange(const std::vector<Transfer>& xs, const std::function<bool(size_t)>& sendable,
                             const std::function<void(size_t)>& received) {
  std::vector<std::unique_ptr<transport::Request>> reqs(xs.size());
  std::vector<char> posted(xs.size(), 0);
  try {
    size_t unposted = xs.size();
    auto post = [&] {
      bool any = false;
      for (size_t i = 0; i < xs.size(); ++i) {
        if (posted[i]) continue;
        const Transfer& x = xs[i];
        if (x.send && sendable && !sendable(i)) continue;
        reqs[i] = x.send ? t_.isend(x.peer, x.tag, x.buf, sendLength(x)) : t_.irecv(x.peer, x.tag, x.buf, x.bytes);
        posted[i] = 1;
        --unposted;
        any = true;
      }
      return any;
    };
    post();
    using Clock = std::chrono::steady_clock;
    auto lastMove = Clock::now();
    size_t left = xs.size();
    while (left) {
      bool moved = t_.progress();
      if (unposted) moved = post() || moved;
      for (size_t i = 0; i < xs.size(); ++i) {
        if (!reqs[i] || !reqs[i]->test()) continue;
        const Transfer& x = xs[i];
        if (!x.send) {
          const size_t got = reqs[i]->receivedBytes();
          if (x.received) {
            *x.received = got;
          } else if (got != x.bytes) {
            t_.abortMismatch();  // every rank's call fails, not only this one's
            throw Error(cclInvalidUsage, "rank " + std::to_string(x.peer) + " sent " + std::to_string(got) +
                                             " bytes where " + std::to_string(x.bytes) +
                                             " were expected: ranks called the operation with different counts "
                                             "or types");
          }
          if (received) received(i);
        }
        reqs[i].reset();
        --left;
        moved = true;
      }
      if (moved) {
        lastMove = Clock::now();
        continue;
      }
      if (aborted_ && aborted_->load(std::memory_order_relaxed))
        throw Error(cclInvalidUsage, "the communicator was aborted during the operation");
      if (Clock::now() - lastMove > timeout_)
        throw Error(cclSystemError, (unposted ? "staged sends were not ready within " +
                                                    std::to_string(timeout_.count()) + " ms (CCL_TIMEOUT)"
                                              : "no progress for " + std::to_string(timeout_.count()) +
                                                    " ms (CCL_TIMEOUT): a peer is not taking part in the operation") +
                                        diagnosis());
      sched_yield();
    }
  } catch (...) {
    t_.abort();  // the peers' waves fail too, instead of waiting for this rank's messages
    throw;
  }
}

}  // namespace ccl::coll
