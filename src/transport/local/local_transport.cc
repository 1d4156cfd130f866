// SPDX-License-Identifier: BSD-3-Clause
#include "transport/local/local_transport.h"

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/log.h"

namespace ccl::transport {

class Fabric {
 public:
  explicit Fabric(int size) : boxes_(static_cast<size_t>(size)), departed_(static_cast<size_t>(size)) {}

  int size() const { return static_cast<int>(boxes_.size()); }

  void put(int from, int to, uint64_t tag, const void* buf, size_t bytes) {
    Inbox& box = boxes_[static_cast<size_t>(to)];
    const auto* b = static_cast<const char*>(buf);
    std::lock_guard<std::mutex> g(box.mu);
    box.queues[{from, tag}].emplace_back(b, b + bytes);
  }

  // Takes the oldest message from `from` with `tag` out of the mailbox; false when there is none.
  bool take(int from, int to, uint64_t tag, std::vector<char>* msg) {
    Inbox& box = boxes_[static_cast<size_t>(to)];
    std::lock_guard<std::mutex> g(box.mu);
    auto it = box.queues.find({from, tag});
    if (it == box.queues.end() || it->second.empty()) return false;
    *msg = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) box.queues.erase(it);
    return true;
  }

  // 0: running; otherwise the first abort's kind and rank.
  enum AbortKind : int { kNone = 0, kAborted = 1, kMismatch = 2 };
  // The first abort wins by its rank, which is stored before its kind: a reader that sees
  // the kind (what checkAlive and abortState read first) sees the rank too, never -1.
  void abort(int rank, AbortKind kind) {
    int none = -1;
    if (abortedBy_.compare_exchange_strong(none, rank)) abortKind_.store(kind);
  }
  // Throws the contract's error for a request of `rank` with `peer` once the fabric is
  // aborted, or (`includeDeparted`) once `peer` has gone.
  void checkAlive(int rank, int peer, const char* op, bool includeDeparted = true) const {
    const int kind = abortKind_.load();
    if (kind == kMismatch)
      throw Error(cclInvalidUsage, std::string("local ") + op + " rank " + std::to_string(peer) + " stopped: rank " +
                                       std::to_string(abortedBy_.load()) +
                                       " found the ranks out of step (mismatched calls) and aborted the communicator");
    if (kind == kAborted)
      throw Error(cclRemoteError, std::string("local ") + op + " rank " + std::to_string(peer) + " failed: rank " +
                                      std::to_string(abortedBy_.load()) + " aborted the communicator");
    if (includeDeparted && departed(rank, peer))
      throw Error(cclRemoteError,
                  std::string("local ") + op + " rank " + std::to_string(peer) + " failed: the peer has left");
  }
  Transport::AbortState abortState() const {
    const int kind = abortKind_.load();
    return {kind != kNone, kind == kMismatch, kind != kNone ? abortedBy_.load() : -1};
  }
  // A rank departs after its last send is in its receivers' mailboxes.
  void depart(int rank) { departed_[static_cast<size_t>(rank)].store(true); }
  bool departed(int rank, int peer) const { return peer != rank && departed_[static_cast<size_t>(peer)].load(); }

 private:
  struct Inbox {
    std::mutex mu;
    std::map<std::pair<int, uint64_t>, std::deque<std::vector<char>>> queues;
  };
  std::vector<Inbox> boxes_;
  std::vector<std::atomic<bool>> departed_;
  std::atomic<int> abortKind_{kNone};
  std::atomic<int> abortedBy_{-1};
};

namespace {

class LocalTransport final : public Transport {
 public:
  LocalTransport(std::shared_ptr<Fabric> fabric, int rank) : fabric_(std::move(fabric)), rank_(rank) {}
  ~LocalTransport() override { fabric_->depart(rank_); }

  int rank() const override { return rank_; }
  int size() const override { return fabric_->size(); }
  const char* name() const override { return "local"; }

  std::unique_ptr<Request> isend(int peer, uint64_t tag, const void* buf, size_t bytes) override {
    checkPost(*this, peer, tag, buf, bytes);
    // After an abort, or to a peer that left, the request fails (test() throws), as every
    // transport's does: the post itself only refuses bad arguments.
    try {
      fabric_->checkAlive(rank_, peer, "send to");
    } catch (const Error&) {
      return std::make_unique<Sent>(std::current_exception());
    }
    fabric_->put(rank_, peer, tag, buf, bytes);
    return std::make_unique<Sent>(nullptr);
  }
  std::unique_ptr<Request> irecv(int peer, uint64_t tag, void* buf, size_t bytes) override {
    checkPost(*this, peer, tag, buf, bytes);
    return std::make_unique<Received>(*this, peer, tag, buf, nullptr, bytes);
  }
  // The message is read from the mailbox, where the send copied it: one copy fewer.
  std::unique_ptr<Request> irecvInPlace(int peer, uint64_t tag, size_t bytes, Sink* sink) override {
    checkPostInPlace(*this, peer, tag, sink);
    return std::make_unique<Received>(*this, peer, tag, nullptr, sink, bytes);
  }
  // Messages move when they are sent, and are matched when a receive is tested: there is
  // nothing to advance.
  bool progress() override { return false; }
  // Every rank shares this process's memory.
  bool sharedMemoryLink(int) const override { return true; }
  void abort() override { fabric_->abort(rank_, Fabric::kAborted); }
  void abortMismatch() override { fabric_->abort(rank_, Fabric::kMismatch); }
  AbortState abortState() const override { return fabric_->abortState(); }

 private:
  // A send has completed once its bytes are in the receiver's mailbox, or has failed.
  struct Sent final : Request {
    explicit Sent(std::exception_ptr failure) : failure(std::move(failure)) {}
    bool test() override {
      if (failure) std::rethrow_exception(failure);
      return true;
    }
    size_t receivedBytes() const override { return 0; }
    std::exception_ptr failure;
  };

  struct Received final : Request {
    Received(LocalTransport& t, int peer, uint64_t tag, void* buf, Sink* sink, size_t capacity)
        : t(t), peer(peer), tag(tag), buf(buf), sink(sink), capacity(capacity) {
      t.posted_[{peer, tag}].push_back(this);
    }
    ~Received() override {
      if (!matched) t.unpost(this);
    }
    bool test() override {
      if (failure) std::rethrow_exception(failure);
      if (matched) return true;
      t.fabric_->checkAlive(t.rank_, peer, "receive from", false);
      // A peer that sent and then left: its message is in the mailbox before it departs,
      // so one more look after seeing it gone decides.
      const bool gone = t.fabric_->departed(t.rank_, peer);
      t.match(peer, tag);
      if (failure) std::rethrow_exception(failure);
      if (!matched && gone) t.fabric_->checkAlive(t.rank_, peer, "receive from");
      return matched;
    }
    size_t receivedBytes() const override { return got; }

    // The message this receive matched, taken out of the mailbox: copied, handed to the sink,
    // or refused. Whatever the sink throws fails this request (test() throws it again): it
    // runs inside a test() that may be another receive's, and the message is consumed whole
    // either way, so the next one with this tag goes to the next receive.
    void deliver(const std::vector<char>& msg) {
      matched = true;
      if (msg.size() > capacity) {
        failure = std::make_exception_ptr(Error(
            cclInvalidUsage, "local receive from rank " + std::to_string(peer) + ": a message of " +
                                 std::to_string(msg.size()) + " bytes for a receive of " + std::to_string(capacity)));
        return;
      }
      if (!msg.empty() && sink) {
        try {
          sink->take(0, msg.data(), msg.size());
        } catch (...) {
          failure = std::current_exception();
          return;
        }
      } else if (!msg.empty()) {
        std::memcpy(buf, msg.data(), msg.size());
      }
      got = msg.size();
    }

    LocalTransport& t;
    int peer;
    uint64_t tag;
    void* buf;
    Sink* sink;
    size_t capacity;
    size_t got = 0;
    bool matched = false;  // a message was delivered to it (or refused by it): no longer posted
    std::exception_ptr failure;
  };

  // Hands the messages waiting in the mailbox from `peer` with `tag` to the receives posted
  // for them, oldest first: matching is per (source, tag) in posting order, as on every
  // transport, whichever receive is tested first.
  void match(int peer, uint64_t tag) {
    auto it = posted_.find({peer, tag});
    std::vector<char> msg;
    while (it != posted_.end() && !it->second.empty() && fabric_->take(peer, rank_, tag, &msg)) {
      Received* r = it->second.front();
      it->second.pop_front();
      r->deliver(msg);
    }
    if (it != posted_.end() && it->second.empty()) posted_.erase(it);
  }
  // A receive destroyed before it matched: cancelled, the next message goes to the next one.
  void unpost(Received* r) {
    auto it = posted_.find({r->peer, r->tag});
    if (it == posted_.end()) return;
    std::erase(it->second, r);
    if (it->second.empty()) posted_.erase(it);
  }

  std::shared_ptr<Fabric> fabric_;
  int rank_;
  // The receives posted and not matched yet, per (source, tag), in posting order. Only the
  // thread driving this transport touches them.
  std::map<std::pair<int, uint64_t>, std::deque<Received*>> posted_;
};

// Fabrics being joined, by a random key rank 0 broadcasts (never a pointer from a message).
std::mutex gJoiningMu;
std::map<uint64_t, std::shared_ptr<Fabric>> gJoining;

}  // namespace

std::shared_ptr<Fabric> makeFabric(int size) { return std::make_shared<Fabric>(size); }

std::unique_ptr<Transport> createLocalTransport(std::shared_ptr<Fabric> fabric, int rank) {
  CCL_CHECK(fabric && rank >= 0 && rank < fabric->size(), cclInvalidArgument, "local transport: bad rank");
  return std::make_unique<LocalTransport>(std::move(fabric), rank);
}

std::unique_ptr<Transport> createLocalTransport(bootstrap::Bootstrap& bs) {
  struct Offer {
    int64_t pid;
    uint64_t key;
  };
  Offer offer{static_cast<int64_t>(getpid()), 0};
  if (bs.rank() == 0) {
    offer.key = std::random_device{}() | uint64_t{std::random_device{}()} << 32;
    std::lock_guard<std::mutex> g(gJoiningMu);
    gJoining[offer.key] = makeFabric(bs.size());
  }
  bs.broadcast(&offer, sizeof(offer), 0);
  // Every rank says whether it found the fabric, so that all fail together or none does.
  std::shared_ptr<Fabric> fabric;
  if (offer.pid == static_cast<int64_t>(getpid())) {
    std::lock_guard<std::mutex> g(gJoiningMu);
    auto it = gJoining.find(offer.key);
    if (it != gJoining.end()) fabric = it->second;
  }
  std::vector<uint8_t> joined(static_cast<size_t>(bs.size()));
  joined[static_cast<size_t>(bs.rank())] = fabric ? 1 : 0;
  bs.allGather(joined.data(), 1);
  if (bs.rank() == 0) {
    std::lock_guard<std::mutex> g(gJoiningMu);
    gJoining.erase(offer.key);
  }
  for (int r = 0; r < bs.size(); ++r)
    CCL_CHECK(
        joined[static_cast<size_t>(r)], cclInvalidUsage,
        "CCL_TRANSPORT=local needs every rank in one process; rank " + std::to_string(r) + " is in another (use ucx)");
  CCL_INFO("local transport ready: rank %d of %d", bs.rank(), bs.size());
  return createLocalTransport(std::move(fabric), bs.rank());
}

}  // namespace ccl::transport
