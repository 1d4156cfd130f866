// SPDX-License-Identifier: BSD-3-Clause
#include "transport/shm/shm_transport.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/host_id.h"
#include "common/log.h"
#include "transport/local/local_transport.h"
#include "transport/shm/ring.h"
#include "transport/shm/segment.h"
#include "transport/ucx/ucx_transport.h"

namespace ccl::transport {
namespace {

using shm::EndState;
using shm::FragmentHeader;
using shm::RingReader;
using shm::RingWriter;
using shm::Segment;

constexpr size_t kRingCapacity = size_t{256} << 10;  // bytes of records per ordered pair
constexpr size_t kRingStride = (shm::ringFootprint(kRingCapacity) + 63) / 64 * 64;
constexpr size_t kHeaderStride = (sizeof(shm::SegmentHeader) + 63) / 64 * 64;
// A receive in place gets a fragment's payload as it lies in the ring: fragments and the
// part before a wrap are multiples of the record alignment, which keeps pieces whole
// elements (Sink's contract).
static_assert(shm::kRecordAlign % kPieceAlign == 0 && (kRingCapacity / 4 - sizeof(FragmentHeader)) % kPieceAlign == 0);
constexpr auto kLivenessEvery = std::chrono::milliseconds(100);

// One posted send or receive of a pair on the channel.
struct Op {
  bool send = false;
  uint64_t tag = 0;
  const char* src = nullptr;
  char* dst = nullptr;
  Sink* sink = nullptr;  // a receive in place: its bytes go here, not to dst
  size_t bytes = 0;
  size_t done = 0;  // bytes in the ring (a send)
  size_t received = 0;
  bool complete = false;
  cclResult_t error = cclSuccess;
  std::string why;
  std::exception_ptr thrown;  // what a receive in place's sink threw: test() throws it again
  std::vector<char> owned;    // a send's bytes from `ownedFrom` on, once its request went early
  size_t ownedFrom = 0;

  bool settled() const { return complete || error != cclSuccess; }
  void fail(cclResult_t code, const std::string& reason) {
    if (settled()) return;
    error = code;
    why = reason;
  }
};

// Hands a piece of a message to a receive in place's sink. What the sink throws fails the
// receive instead of escaping: sinks run inside progress() and posts (this rank's send to
// itself included), where an exception would leave a message half read, in the ring or
// aside. The caller then reads the rest of the message and drops it.
void feed(Op& op, size_t offset, const void* data, size_t bytes) {
  if (op.settled()) return;
  try {
    op.sink->take(offset, data, bytes);
  } catch (const Error& e) {
    op.thrown = std::current_exception();
    op.fail(e.code(), e.what());
  } catch (const std::exception& e) {
    op.thrown = std::current_exception();
    op.fail(cclInternalError, e.what());
  } catch (...) {
    op.thrown = std::current_exception();
    op.fail(cclInternalError, "a receive in place's sink threw");
  }
}

// A message that arrived before its receive was posted, copied aside.
struct Unexpected {
  uint64_t tag = 0;
  size_t total = 0;
  std::vector<char> data;
  bool arrived = false;
  std::shared_ptr<Op> bound;  // the receive posted while it was still arriving
};

// The message being read from a peer's ring: into a receive, aside, or (neither) dropped.
struct Incoming {
  bool active = false;
  uint64_t tag = 0;
  size_t total = 0, got = 0;
  std::shared_ptr<Op> op;
  std::shared_ptr<Unexpected> aside;
};

struct Peer {
  bool shm = false;
  pid_t pid = 0;   // 0: in another PID namespace, not checked
  RingWriter out;  // in the peer's segment
  RingReader in;   // in this rank's segment
  std::deque<std::shared_ptr<Op>> sends, posted;
  std::deque<std::shared_ptr<Unexpected>> unexpected;
  Incoming cur;
  cclResult_t failed = cclSuccess;
  std::string why;
  bool waiting() const { return !sends.empty() || !posted.empty() || cur.active; }
};

void deliverAside(Op& op, Unexpected& u, int peer) {
  if (u.total > op.bytes) {
    op.fail(cclInvalidUsage, "shm receive from rank " + std::to_string(peer) + ": a message of " +
                                 std::to_string(u.total) + " bytes for a receive of " + std::to_string(op.bytes));
    return;
  }
  if (u.total && op.sink) {
    feed(op, 0, u.data.data(), u.total);
    if (op.settled()) return;  // the sink refused it
  } else if (u.total) {
    std::memcpy(op.dst, u.data.data(), u.total);
  }
  op.received = u.total;
  op.complete = true;
}

class ShmTransport;

class ShmRequest final : public Request {
 public:
  ShmRequest(ShmTransport* t, int peer, std::shared_ptr<Op> op) : t_(t), peer_(peer), op_(std::move(op)) {}
  ~ShmRequest() override;
  bool test() override;
  size_t receivedBytes() const override { return op_->received; }

 private:
  ShmTransport* t_;
  int peer_;
  std::shared_ptr<Op> op_;
};

class ShmTransport final : public Transport {
 public:
  ShmTransport(int rank, int size, std::vector<Peer> peers, Segment mine, std::vector<Segment> others,
               std::unique_ptr<Transport> inner)
      : rank_(rank),
        size_(size),
        peers_(std::move(peers)),
        mine_(std::move(mine)),
        others_(std::move(others)),
        inner_(std::move(inner)) {}

  ~ShmTransport() override {
    if (aborted_.load() == shm::kOpen) markEnds(shm::endWord(shm::kDeparted, -1));
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "shm"; }

  std::unique_ptr<Request> isend(int peer, uint64_t tag, const void* buf, size_t bytes) override {
    checkPost(*this, peer, tag, buf, bytes);
    if (peer != rank_ && !peers_[peer].shm) return inner_->isend(peer, tag, buf, bytes);
    auto op = std::make_shared<Op>();
    op->send = true;
    op->tag = tag;
    op->src = static_cast<const char*>(buf);
    op->bytes = bytes;
    Peer& p = peers_[peer];
    if (p.failed != cclSuccess) {
      op->fail(p.failed, p.why);
    } else if (peer == rank_) {
      Unexpected u{tag, bytes, std::vector<char>(op->src, op->src + bytes), true, nullptr};
      arriveWhole(peer, std::make_shared<Unexpected>(std::move(u)));
      op->complete = true;
    } else {
      p.sends.push_back(op);
      pushSends(p);
    }
    return std::make_unique<ShmRequest>(this, peer, std::move(op));
  }

  std::unique_ptr<Request> irecv(int peer, uint64_t tag, void* buf, size_t bytes) override {
    checkPost(*this, peer, tag, buf, bytes);
    if (peer != rank_ && !peers_[peer].shm) return inner_->irecv(peer, tag, buf, bytes);
    return postRecv(peer, tag, static_cast<char*>(buf), nullptr, bytes);
  }

  std::unique_ptr<Request> irecvInPlace(int peer, uint64_t tag, size_t bytes, Sink* sink) override {
    checkPostInPlace(*this, peer, tag, sink);
    if (peer != rank_ && !peers_[peer].shm) return inner_ ? inner_->irecvInPlace(peer, tag, bytes, sink) : nullptr;
    return postRecv(peer, tag, nullptr, sink, bytes);
  }

  std::unique_ptr<Request> postRecv(int peer, uint64_t tag, char* dst, Sink* sink, size_t bytes) {
    auto op = std::make_shared<Op>();
    op->tag = tag;
    op->dst = dst;
    op->sink = sink;
    op->bytes = bytes;
    Peer& p = peers_[peer];
    auto it = std::find_if(p.unexpected.begin(), p.unexpected.end(), [&](const auto& u) { return u->tag == tag; });
    if (it != p.unexpected.end()) {
      std::shared_ptr<Unexpected> u = *it;
      p.unexpected.erase(it);
      if (u->arrived)
        deliverAside(*op, *u, peer);
      else
        u->bound = op;  // still arriving: it is the peer's current message
    } else if (p.failed != cclSuccess) {
      op->fail(p.failed, p.why);
    } else {
      p.posted.push_back(op);
    }
    return std::make_unique<ShmRequest>(this, peer, std::move(op));
  }

  bool progress() override {
    bool any = inner_ && inner_->progress();
    // An abort the inner transport learned of (a peer on another host aborted) is the
    // communicator's: the pairs on the channel fail too, not only the inner one's.
    if (inner_ && aborted_.load(std::memory_order_relaxed) == shm::kOpen) {
      const AbortState s = inner_->abortState();
      if (s.aborted) {
        abortAs(s.mismatch ? shm::kMismatch : shm::kAborted, s.by >= 0 ? s.by : rank_);
        any = true;
      }
    }
    for (int q = 0; q < size_; ++q) {
      Peer& p = peers_[q];
      if (!p.shm) continue;
      any = pushSends(p) || any;
      any = drain(q) || any;
    }
    if ((++polls_ & 63) == 0) {
      const auto now = std::chrono::steady_clock::now();
      if (now - lastLiveness_ >= kLivenessEvery) {
        lastLiveness_ = now;
        for (int q = 0; q < size_; ++q)
          if (peers_[q].shm && peers_[q].failed == cclSuccess) any = checkPeer(q) || any;
      }
    }
    return any;
  }

  bool sharedMemoryLink(int peer) const override {
    if (peer == rank_) return false;
    return peers_[peer].shm || (inner_ && inner_->sharedMemoryLink(peer));
  }

  void abort() override { abortAs(shm::kAborted, rank_); }
  // This channel's own sends end with the abort; UCX's pairs (other hosts) have a grace.
  void peerLost(int peer) override {
    if (inner_) inner_->peerLost(peer);
  }
  AbortState abortState() const override {
    const uint32_t a = aborted_.load(std::memory_order_acquire);
    return {a != shm::kOpen, a == shm::kMismatch, abortedBy_.load(std::memory_order_relaxed)};
  }
  void abortMismatch() override { abortAs(shm::kMismatch, rank_); }

  // ShmRequest's two verbs.
  void check(const Op& op) const {
    if (op.thrown) std::rethrow_exception(op.thrown);  // its sink's failure, before any abort after it
    const uint32_t a = aborted_.load(std::memory_order_acquire);
    if (a != shm::kOpen && !op.complete) {
      const std::string who = "rank " + std::to_string(abortedBy_.load(std::memory_order_relaxed));
      if (a == shm::kMismatch)
        throw Error(cclInvalidUsage,
                    "shm: " + who + " found the ranks out of step (mismatched calls) and aborted the communicator");
      throw Error(cclRemoteError, "shm: " + who + " aborted the communicator");
    }
    if (op.error != cclSuccess) throw Error(op.error, op.why);
  }

  void drop(int peer, const std::shared_ptr<Op>& op) {
    if (op->settled()) return;
    Peer& p = peers_[peer];
    auto erase = [&](std::deque<std::shared_ptr<Op>>& q) {
      auto it = std::find(q.begin(), q.end(), op);
      if (it == q.end()) return false;
      q.erase(it);
      return true;
    };
    if (op->send) {
      if (op->done == 0 && erase(p.sends)) return;
      // Part of it is in the ring: the rest goes too (the peer reads whole messages), from a
      // copy, since the caller may reuse its buffer once the request is gone.
      op->owned.assign(op->src + op->done, op->src + op->bytes);
      op->ownedFrom = op->done;
      return;
    }
    if (erase(p.posted)) return;
    if (p.cur.op == op) p.cur.op = nullptr;  // the rest of the message is read and dropped
    if (p.cur.aside && p.cur.aside->bound == op) p.cur.aside->bound = nullptr;
  }

 private:
  bool pushSends(Peer& p) {
    bool any = false;
    while (!p.sends.empty()) {
      Op& op = *p.sends.front();
      const size_t n = std::min(op.bytes - op.done, p.out.maxFragment());
      const char* from = op.owned.empty() ? op.src + op.done : op.owned.data() + (op.done - op.ownedFrom);
      if (!p.out.tryPush(FragmentHeader{op.tag, op.bytes, n, 0}, from)) break;
      op.done += n;
      any = true;
      if (op.done == op.bytes) {
        op.complete = true;
        p.sends.pop_front();
      }
    }
    return any;
  }

  // A message from `peer` that arrived whole (one to itself): into a posted receive or aside.
  void arriveWhole(int peer, std::shared_ptr<Unexpected> u) {
    Peer& p = peers_[peer];
    auto it = std::find_if(p.posted.begin(), p.posted.end(), [&](const auto& op) { return op->tag == u->tag; });
    if (it == p.posted.end()) {
      p.unexpected.push_back(std::move(u));
      return;
    }
    std::shared_ptr<Op> op = *it;
    p.posted.erase(it);
    deliverAside(*op, *u, peer);
  }

  void start(int peer, const FragmentHeader& h) {
    Peer& p = peers_[peer];
    p.cur = Incoming{true, h.tag, h.total, 0, nullptr, nullptr};
    auto it = std::find_if(p.posted.begin(), p.posted.end(), [&](const auto& op) { return op->tag == h.tag; });
    if (it == p.posted.end()) {
      auto u = std::make_shared<Unexpected>();
      u->tag = h.tag;
      u->total = h.total;
      u->data.resize(h.total);
      p.unexpected.push_back(u);
      p.cur.aside = std::move(u);
      return;
    }
    std::shared_ptr<Op> op = *it;
    p.posted.erase(it);
    if (h.total > op->bytes) {
      op->fail(cclInvalidUsage, "shm receive from rank " + std::to_string(peer) + ": a message of " +
                                    std::to_string(h.total) + " bytes for a receive of " + std::to_string(op->bytes));
      return;  // read and dropped
    }
    p.cur.op = std::move(op);
  }

  void finish(Peer& p) {
    if (p.cur.op) {
      p.cur.op->received = p.cur.total;
      p.cur.op->complete = true;
    } else if (p.cur.aside) {
      Unexpected& u = *p.cur.aside;
      u.arrived = true;
      if (u.bound) deliverAside(*u.bound, u, static_cast<int>(&p - peers_.data()));
    }
    p.cur = Incoming{};
  }

  bool drain(int peer) {
    Peer& p = peers_[peer];
    bool any = false;
    FragmentHeader h;
    while (p.failed == cclSuccess && p.in.peek(&h)) {
      if (!p.cur.active) start(peer, h);
      if (h.tag != p.cur.tag || h.total != p.cur.total || h.bytes > p.cur.total - p.cur.got) {
        failPeer(peer, cclRemoteError, "shm: rank " + std::to_string(peer) + " wrote a malformed message");
        break;
      }
      if (p.cur.op && p.cur.op->sink) {
        size_t at = p.cur.got;
        p.in.forPayload(h.bytes, [&](const void* data, size_t n) {
          feed(*p.cur.op, at, data, n);
          at += n;
        });
        if (p.cur.op->settled()) p.cur.op = nullptr;  // its sink refused it: the rest is read and dropped
      } else if (p.cur.op) {
        p.in.copyPayload(p.cur.op->dst + p.cur.got, 0, h.bytes);
      }
      if (!p.cur.op && p.cur.aside) p.in.copyPayload(p.cur.aside->data.data() + p.cur.got, 0, h.bytes);
      p.cur.got += h.bytes;
      p.in.pop();
      any = true;
      if (p.cur.got == p.cur.total) finish(p);
    }
    return any;
  }

  // The peer's ends of both rings, and its process: fails what waits on a peer that
  // aborted, left with receives still open, or exited.
  bool checkPeer(int peer) {
    Peer& p = peers_[peer];
    const uint32_t word = std::max(p.in.control()->producer.load(std::memory_order_acquire),
                                   p.out.control()->consumer.load(std::memory_order_acquire));
    const EndState theirs = shm::stateOf(word);
    const std::string who = "rank " + std::to_string(peer);
    // A peer's abort is the communicator's: every request of this rank fails, also those
    // waiting on other ranks (they may wait for a rank the aborting one will never serve).
    if (theirs == shm::kAborted || theirs == shm::kMismatch) {
      const int by = shm::abortedByOf(word);
      abortAs(theirs, by >= 0 ? by : peer);
      return true;
    }
    if (!p.waiting() || !p.in.empty()) return false;  // what it sent is still to be read
    if (theirs == shm::kDeparted) return failPeer(peer, cclRemoteError, "shm: " + who + " has left the communicator");
    if (p.pid > 0 && !shm::processAlive(p.pid))
      return failPeer(peer, cclRemoteError, "shm: " + who + " (pid " + std::to_string(p.pid) + ") exited");
    return false;
  }

  bool failPeer(int peer, cclResult_t code, const std::string& why) {
    Peer& p = peers_[peer];
    p.failed = code;
    p.why = why;
    for (auto& op : p.sends) op->fail(code, why);
    for (auto& op : p.posted) op->fail(code, why);
    if (p.cur.op) p.cur.op->fail(code, why);
    if (p.cur.aside) {
      if (p.cur.aside->bound) p.cur.aside->bound->fail(code, why);
      // It will never arrive whole: a receive posted for it later fails, not waits forever.
      std::erase(p.unexpected, p.cur.aside);
    }
    p.sends.clear();
    p.posted.clear();
    p.cur = Incoming{};
    CCL_INFO("%s", why.c_str());
    return true;
  }

  void markEnds(uint32_t word) {
    for (Peer& p : peers_) {
      if (!p.shm) continue;
      p.in.control()->consumer.store(word, std::memory_order_release);
      p.out.control()->producer.store(word, std::memory_order_release);
    }
  }

  // The first abort wins by its rank, which is stored before its state: a reader that sees
  // the state (acquire) sees the rank too, never -1.
  void abortAs(EndState s, int by) {
    int none = -1;
    if (!abortedBy_.compare_exchange_strong(none, by)) return;
    aborted_.store(s, std::memory_order_release);
    markEnds(shm::endWord(s, by));
    if (inner_) s == shm::kMismatch ? inner_->abortMismatch() : inner_->abort();
  }

  const int rank_, size_;
  std::vector<Peer> peers_;
  Segment mine_;
  std::vector<Segment> others_;  // the peers' segments this rank writes to
  std::unique_ptr<Transport> inner_;
  std::atomic<uint32_t> aborted_{shm::kOpen};
  std::atomic<int> abortedBy_{-1};
  uint64_t polls_ = 0;
  std::chrono::steady_clock::time_point lastLiveness_ = std::chrono::steady_clock::now();
};

ShmRequest::~ShmRequest() { t_->drop(peer_, op_); }

bool ShmRequest::test() {
  t_->check(*op_);
  return op_->complete;
}

size_t segmentBytes(size_t rings) { return kHeaderStride + rings * kRingStride; }

void* ringAt(const Segment& s, size_t index) {
  return static_cast<char*>(s.base()) + kHeaderStride + index * kRingStride;
}

}  // namespace

std::unique_ptr<Transport> createShmTransport(bootstrap::Bootstrap& bs, uint64_t hostId) {
  const int n = bs.size(), r = bs.rank();
  struct Info {
    uint64_t host;
    int64_t pid;
    uint64_t pidNs;
  };
  std::vector<Info> info(static_cast<size_t>(n));
  const uint64_t myNs = shm::pidNamespace();
  info[r] = {hostId ? hostId : host::resolve(nullptr).id, static_cast<int64_t>(getpid()), myNs};
  bs.allGather(info.data(), sizeof(Info));
  uint8_t token[16] = {};
  if (r == 0) {
    std::random_device rd;
    for (auto& b : token) b = static_cast<uint8_t>(rd());
  }
  bs.broadcast(token, sizeof(token), 0);

  // The ranks of this host, in rank order: ring i of a segment is written by local rank i.
  std::vector<int> local;
  for (int q = 0; q < n; ++q)
    if (info[q].host == info[r].host) local.push_back(q);
  auto indexOf = [&](int q) { return static_cast<size_t>(std::find(local.begin(), local.end(), q) - local.begin()); };
  const size_t bytes = segmentBytes(local.size());

  if (const int swept = shm::sweepStaleSegments())
    CCL_INFO("shm: removed %d segments left in /dev/shm by ranks that were killed", swept);
  // A rank that cannot make its segment (a full /dev/shm) takes no message through the
  // channel: its peers cannot open it, and its pairs go through UCX.
  Segment mine;
  try {
    mine = Segment::create(shm::segmentName(token, myNs, r, static_cast<int>(getpid())), bytes);
    auto* h = mine.header();
    h->magic = shm::kSegmentMagic;
    std::memcpy(h->token, token, sizeof(token));
    h->owner = r;
    h->pid = static_cast<int32_t>(getpid());
    h->rings = local.size();
    h->capacity = kRingCapacity;
    for (size_t i = 0; i < local.size(); ++i) shm::initRing(ringAt(mine, i), kRingCapacity);
  } catch (const Error& e) {
    CCL_WARN("shm: rank %d has no segment (%s): its pairs on this host go through the network", r, e.what());
    mine = Segment{};
  }
  bs.barrier();  // every segment made before any is opened

  std::vector<Segment> others(static_cast<size_t>(n));
  std::vector<uint8_t> opened(static_cast<size_t>(n) * static_cast<size_t>(n), 0);
  for (int q : local) {
    if (q == r) continue;
    std::string why;
    others[q] =
        Segment::open(shm::segmentName(token, info[q].pidNs, q, static_cast<int>(info[q].pid)), bytes, token, &why);
    if (others[q].mapped())
      opened[static_cast<size_t>(r) * n + q] = 1;
    else
      CCL_INFO("shm: rank %d's segment cannot be used (%s): that pair goes through the network", q, why.c_str());
  }
  bs.allGather(opened.data(), static_cast<size_t>(n));
  bs.barrier();  // every peer has mapped this rank's segment (or given up)
  mine.unlink();

  auto pairOnShm = [&](int a, int b) {
    return opened[static_cast<size_t>(a) * n + b] && opened[static_cast<size_t>(b) * n + a];
  };
  bool needInner = false;
  for (int a = 0; a < n && !needInner; ++a)
    for (int b = 0; b < n && !needInner; ++b) needInner = a != b && !pairOnShm(a, b);
  // The pairs off the channel: UCX, or in a build without it the in-process transport when
  // every rank is a thread of this process (tests that give threads host identities of their
  // own). Every rank decides alike (from `opened`, which all have).
  std::unique_ptr<Transport> inner;
  if (needInner && kUcxBuilt) {
    inner = createUcxTransport(bs);
  } else if (needInner) {
    try {
      inner = createLocalTransport(bs);
    } catch (const Error&) {
      throw Error(cclInvalidUsage,
                  "CCL_TRANSPORT=shm: some ranks share no host (or no shared memory) and this build has no UCX to "
                  "join them");
    }
  }

  std::vector<Peer> peers(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) {
    Peer& p = peers[q];
    // A peer in another PID namespace has no pid here: its loss is found by its ring flags,
    // the communicator's watcher (peerLost) or CCL_TIMEOUT, not by its process.
    p.pid = info[q].pidNs == myNs ? static_cast<pid_t>(info[q].pid) : 0;
    if (q == r || !pairOnShm(r, q) || !mine.mapped()) continue;
    p.shm = true;
    p.in = RingReader(ringAt(mine, indexOf(q)), kRingCapacity);
    p.out = RingWriter(ringAt(others[q], indexOf(r)), kRingCapacity);
  }
  CCL_INFO("shm: %zu of %d ranks on this host share memory with rank %d%s", local.size(), n, r,
           !inner      ? ""
           : kUcxBuilt ? "; UCX for the others"
                       : "; the in-process transport for the others");
  return std::make_unique<ShmTransport>(r, n, std::move(peers), std::move(mine), std::move(others), std::move(inner));
}

}  // namespace ccl::transport
