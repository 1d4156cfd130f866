// SPDX-License-Identifier: BSD-3-Clause
#include "collectives/exec/links/transport_link.h"

#include <sched.h>

#include <algorithm>
#include <map>
#include <new>
#include <string>
#include <thread>

#include "codecs/codec.h"
#include "collectives/exec/executor.h"
#include "common/activity.h"
#include "common/config.h"
#include "common/error.h"
#include "common/log.h"

namespace ccl::coll {

TransportLink::TransportLink(transport::Transport& t, bool exactLengths, std::chrono::milliseconds timeout,
                             const std::atomic<bool>* aborted, std::optional<StagingMemory> staging,
                             size_t stagingBytes)
    : t_(t), exact_(exactLengths), timeout_(timeout), aborted_(aborted), staging_(std::move(staging)) {
  if (!staging_) return;
  const size_t bound = stagingBytes ? stagingBytes : static_cast<size_t>(std::max<int64_t>(config::stagingBytes(), 0));
  blockBound_ = blockBytes(bound);
  // The flags on cache lines of their own: each is written by one side, polled by the other.
  auto* flags = static_cast<char*>(staging_->alloc(192));
  CCL_CHECK(flags, cclSystemError, "no staging memory for the link's flags");
  staged_ = new (flags) std::atomic<uint64_t>(0);
  done_ = new (flags + 64) std::atomic<uint64_t>(0);
  released_ = new (flags + 128) std::atomic<uint64_t>(0);
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
    d = " [staging flags: the stream staged groups up to ticket " + std::to_string(staged_->load()) +
        " and released groups up to " + std::to_string(released_->load()) + "; the proxy exchanged groups up to " +
        std::to_string(done_->load()) + " of " + std::to_string(tickets_.load(std::memory_order_relaxed)) +
        " enqueued]";
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
      throw Error(cclSystemError, "the staging of group " + std::to_string(ticket) + " was not released within " +
                                      std::to_string(timeout_.count()) + " ms (CCL_TIMEOUT)" + diagnosis());
    if (spins < 1000)
      sched_yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

TransportLink::Block& TransportLink::acquire(size_t bytes, uint64_t ticket, Stream& stream) {
  if (bytes > largest_) {
    // A group larger than any before: once the streams have passed every group of this link
    // in flight, the whole ring is made again at this size (groups fit a block's bound, so it
    // stops growing there unless a single message needs more), so until a larger group comes
    // nothing is allocated. Other ranks' groups may be on the device meanwhile: allocOn and
    // freeOn never wait for them (StagingMemory).
    awaitReleased(ticket - 1);
    // Doubling up to the bound: the rings outgrown (kept for the device's later links, as
    // no free may wait for the device: StagingMemory) add up to at most one more ring.
    const size_t grown = std::max(bytes, std::min(blockBound_, std::max(2 * largest_, size_t{64 * 1024})));
    if (bytes > blockBound_)
      CCL_INFO("staging ring: a group of %zu bytes holds a message larger than its share of a %zu-byte block", bytes,
               blockBound_);
    largest_ = grown;
    CCL_INFO("staging ring: %zu blocks of %zu bytes", kStagingBlocks, largest_);
    for (Block& b : blocks_) {
      // The stream has released every group in flight: it touches no block any more.
      if (b.memory) staging_->freeOn(b.memory, nullptr);
      b.bytes = 0;
      b.memory = staging_->allocOn(largest_, stream);
      CCL_CHECK(b.memory, cclSystemError, "no staging memory for " + std::to_string(largest_) + " bytes");
      b.bytes = largest_;
    }
  }
  Block& b = blocks_[(ticket - 1) % kStagingBlocks];  // tickets start at 1
  awaitReleased(b.ticket);
  b.ticket = ticket;
  return b;
}

std::vector<uint32_t> TransportLink::subWaves(std::span<const Transfer> xs, int nranks, size_t blockBytes) {
  const size_t share =
      std::max<size_t>(stagedBytes(blockBytes / (2 * static_cast<size_t>(std::max(nranks - 1, 1)))), 64);
  struct Fill {
    uint32_t group = 0;
    size_t bytes = 0;
  };
  std::map<std::pair<int, bool>, Fill> fills;  // by peer and direction
  std::vector<uint32_t> out(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    Fill& f = fills[{xs[i].peer, xs[i].send}];
    const size_t b = stagedBytes(xs[i].bytes);
    if (f.bytes && f.bytes + b > share) {
      ++f.group;
      f.bytes = 0;
    }
    f.bytes += b;
    out[i] = f.group;
  }
  return out;
}

std::vector<uint32_t> TransportLink::groupsOf(std::span<const Transfer> xs, std::vector<size_t>* bytes) const {
  size_t total = 0;
  for (const Transfer& x : xs) total += stagedBytes(x.bytes);
  if (total <= blockBound_) {
    bytes->assign(1, total);
    return std::vector<uint32_t>(xs.size(), 0);
  }
  std::vector<uint32_t> groups = subWaves(xs, t_.size(), blockBound_);
  bytes->assign(groups.empty() ? 0 : *std::max_element(groups.begin(), groups.end()) + 1, 0);
  for (size_t i = 0; i < xs.size(); ++i) (*bytes)[groups[i]] += stagedBytes(xs[i].bytes);
  return groups;
}

void TransportLink::group(std::span<const Transfer> transfers, Stream& stream) {
  if (!staging_) {
    stream.enqueue([this, xs = std::vector<Transfer>(transfers.begin(), transfers.end())] { exchange(xs); });
    return;
  }
  ActivityScope busy("enqueuing a staged wave (copies, flags)");
  std::vector<size_t> bytes;
  const std::vector<uint32_t> groups = groupsOf(transfers, &bytes);
  if (bytes.size() == 1) return stagedGroup(transfers, stream);
  std::vector<Transfer> part;
  for (uint32_t g = 0; g < bytes.size(); ++g) {
    part.clear();
    for (size_t i = 0; i < transfers.size(); ++i)
      if (groups[i] == g) part.push_back(transfers[i]);
    stagedGroup(part, stream);
  }
}

void TransportLink::stagedGroup(std::span<const Transfer> xs, Stream& stream) {
  size_t total = 0;
  for (const Transfer& x : xs) total += stagedBytes(x.bytes);
  const uint64_t ticket = tickets_.load(std::memory_order_relaxed) + 1;
  Block& block = acquire(total, ticket, stream);
  tickets_.store(ticket, std::memory_order_relaxed);
  auto staged = std::make_shared<std::vector<Transfer>>(xs.begin(), xs.end());
  std::vector<Stream::Copy> out, in;
  size_t at = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    Transfer& x = (*staged)[i];
    x.buf = static_cast<char*>(block.memory) + at;
    at += stagedBytes(x.bytes);
    (x.send ? out : in)
        .push_back(x.send ? Stream::Copy{x.buf, xs[i].buf, x.bytes} : Stream::Copy{xs[i].buf, x.buf, x.bytes});
  }
  stream.copyBatch(out);
  stream.setFlag(staged_, ticket);
  proxy_->enqueue([this, staged, ticket] {
    failure_.run([&] {
      try {
        exchange(*staged, [&] { return staged_->load(std::memory_order_acquire) >= ticket; });
      } catch (...) {
        uint64_t none = UINT64_MAX;
        failedAt_.compare_exchange_strong(none, ticket);
        throw;
      }
    });
    // Whatever happened, after the failure is noted: the stream must not wait for ever.
    done_->store(ticket, std::memory_order_release);
  });
  stream.waitFlag(done_, ticket);
  stream.copyBatch(in);
  stream.setFlag(released_, ticket);  // the receives are copied out: the block is free
}

bool TransportLink::mayBlock(std::span<const Transfer> transfers) const {
  if (!staging_) return false;
  std::vector<size_t> bytes;
  groupsOf(transfers, &bytes);
  const size_t largest = bytes.empty() ? 0 : *std::max_element(bytes.begin(), bytes.end());
  // Released only grows: a wave that fits now fits when it is posted.
  const uint64_t inFlight = tickets_.load(std::memory_order_relaxed) - released_->load(std::memory_order_acquire);
  if (largest > largest_ && inFlight > 0) return true;  // growing the ring waits for every group
  return inFlight + bytes.size() > kStagingBlocks;
}

std::function<void()> TransportLink::failureCheck() {
  if (!staging_) return {};
  return [this, upTo = tickets_.load(std::memory_order_relaxed)] {
    if (failedAt_.load(std::memory_order_acquire) > upTo) return;
    // Sticky: the transport is aborted, so every later group fails too.
    std::string m;
    const cclResult_t c = failure_.peek(&m);
    throw Error(c == cclSuccess ? cclSystemError : c, m);
  };
}

void TransportLink::tellPeers() {
  // abort() may come from any thread and keeps an earlier abort (a peer's, or this link's own
  // exchange's); abortState() is the driving thread's to read (UCX's).
  t_.abort();
  if (!proxy_) return;
  proxy_->enqueue([this] {
    try {
      t_.progress();
    } catch (...) {
      // The abort is applied all the same.
    }
  });
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

namespace {

// A send's call has failed (Transfer::callFailed): the group stops, and is no failure.
struct CallFailed {};

}  // namespace

void TransportLink::exchange(const std::vector<Transfer>& xs, const std::function<bool()>& sendable) {
  std::vector<std::unique_ptr<transport::Request>> reqs(xs.size());
  std::vector<char> posted(xs.size(), 0);
  // The peers' waves fail too, instead of waiting for this rank's messages: they learn of the
  // abort once it is applied, which UCX does in a progress call of this thread (the
  // transport's); no later exchange of this link may come to make one.
  auto abortHere = [&] {
    t_.abort();
    try {
      t_.progress();
    } catch (...) {
      // The abort is this exchange's failure already.
    }
  };
  auto callFailed = [](const Transfer& x) { return x.callFailed && x.callFailed->load(std::memory_order_acquire); };
  try {
    for (const Transfer& x : xs)
      if (callFailed(x)) throw CallFailed{};
    size_t unposted = xs.size(), sendsInFlight = 0;
    bool staged = !sendable;
    // Every receive at once; sends in order, kMaxSendsInFlight at a time (executor.h).
    auto post = [&] {
      bool any = false;
      staged = staged || sendable();
      for (size_t i = 0; i < xs.size(); ++i) {
        if (posted[i]) continue;
        const Transfer& x = xs[i];
        if (x.send && (!staged || sendsInFlight >= kMaxSendsInFlight)) continue;
        if (x.send && callFailed(x)) throw CallFailed{};
        reqs[i] = x.send ? t_.isend(x.peer, x.tag, x.buf, sendLength(x)) : t_.irecv(x.peer, x.tag, x.buf, x.bytes);
        posted[i] = 1;
        sendsInFlight += x.send;
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
            throw sentOtherSize(x.peer, got, x.bytes);
          }
        }
        reqs[i].reset();
        sendsInFlight -= x.send;
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
        throw Error(cclSystemError, (!staged ? "staged sends were not ready within " +
                                                   std::to_string(timeout_.count()) + " ms (CCL_TIMEOUT)"
                                             : "no progress for " + std::to_string(timeout_.count()) +
                                                   " ms (CCL_TIMEOUT): a peer is not taking part in the operation") +
                                        diagnosis());
      sched_yield();
    }
  } catch (const CallFailed&) {
    // What the failed call left in its buffers is not its data: the peers learn of the
    // failure instead (the call's own failure is its step's, reported by the stream).
    abortHere();
  } catch (...) {
    abortHere();
    throw;
  }
}

}  // namespace ccl::coll
