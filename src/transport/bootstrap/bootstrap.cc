// SPDX-License-Identifier: BSD-3-Clause
// A rank's side of the bootstrap: the rendezvous with the root, then the ring of sockets
// that carries allGather, barrier and broadcast.
#include "transport/bootstrap/bootstrap.h"

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/log.h"
#include "transport/bootstrap/wire.h"

namespace ccl::bootstrap {
namespace {

IdLayout parseId(const cclUniqueId& id) {
  IdLayout layout;
  std::memcpy(&layout, id.internal, sizeof(layout));
  CCL_CHECK(layout.magic == kIdMagic && (layout.root.family == AF_INET || layout.root.family == AF_INET6),
            cclInvalidArgument, "malformed unique id (not made by cclGetUniqueId?)");
  return layout;
}

// Sends our Hello to the root and returns the ring address of every rank.
std::vector<WireAddr> rendezvous(const IdLayout& id, int rank, int nranks, const WireAddr& listenAddr,
                                 Deadline deadline) {
  Socket root = Socket::connectTo(id.root, deadline);
  Hello hello{};
  hello.magic = kHelloMagic;
  std::memcpy(hello.secret, id.secret, kSecretBytes);
  hello.rank = rank;
  hello.nranks = nranks;
  hello.listen = listenAddr;
  Reply reply{};
  try {
    root.sendAll(&hello, sizeof(hello), deadline);
    root.recvAll(&reply, sizeof(reply), deadline);
  } catch (const Error& e) {
    if (e.code() != cclRemoteError) throw;
    throw Error(cclSystemError, "bootstrap root " + toString(id.root) +
                                    " closed the connection (wrong secret, or its rendezvous already ended)");
  }
  reply.message[sizeof(reply.message) - 1] = '\0';
  if (reply.status != cclSuccess) throw Error(static_cast<cclResult_t>(reply.status), reply.message);
  std::vector<WireAddr> table(nranks);
  root.recvAll(table.data(), table.size() * sizeof(WireAddr), deadline);
  return table;
}

// Accepts connections until the previous rank arrives with the secret; others are dropped.
Socket acceptPrev(Socket& listener, const IdLayout& id, int prev, int nranks, Deadline deadline) {
  for (;;) {
    Socket s = listener.accept(deadline);
    RingProof proof{};
    try {
      s.recvAll(&proof, sizeof(proof), std::min(deadline, deadlineAfter(std::chrono::seconds(10))));
    } catch (const Error& e) {
      CCL_WARN("bootstrap: dropped a ring connection that sent no proof: %s", e.what());
      continue;
    }
    if (proof.magic == kRingMagic && sameSecret(proof.secret, id.secret) && proof.rank == prev &&
        proof.nranks == nranks)
      return s;
    CCL_WARN("bootstrap: dropped a ring connection without the right secret or rank (claimed rank %d)", proof.rank);
  }
}

class RingBootstrap final : public Bootstrap {
 public:
  RingBootstrap(int rank, int nranks, Socket next, Socket prev)
      : rank_(rank), size_(nranks), next_(std::move(next)), prev_(std::move(prev)) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void allGather(void* data, size_t bytes) override;
  void barrier() override;
  void broadcast(void* data, size_t bytes, int root) override;
  void abort() override;
  bool peerClosed() override { return size_ > 1 && (aborted_.load() || prev_.peerClosed() || next_.peerClosed()); }

 private:
  template <typename F>
  void guarded(const char* what, F&& body);
  void shutdownAll() {
    next_.shutdown();
    prev_.shutdown();
  }

  int rank_, size_;
  Socket next_, prev_;
  std::atomic<bool> aborted_{false};
};

// A failed collective leaves the ring out of step, so it shuts the sockets down: neighbours
// blocked in the same collective fail at once instead of at their timeout.
template <typename F>
void RingBootstrap::guarded(const char* what, F&& body) {
  if (aborted_.load()) throw Error(cclRemoteError, std::string("bootstrap ") + what + ": communicator was aborted");
  try {
    body();
  } catch (const Error& e) {
    if (aborted_.load()) throw Error(cclRemoteError, std::string("bootstrap ") + what + ": communicator was aborted");
    shutdownAll();
    throw Error(e.code(), std::string("bootstrap ") + what + ": " + e.what());
  }
}

void RingBootstrap::allGather(void* data, size_t bytes) {
  if (size_ == 1) return;
  guarded("allGather", [&] {
    Deadline deadline = defaultDeadline();
    uint64_t mine = bytes, theirs = 0;
    exchange(next_, &mine, sizeof(mine), prev_, &theirs, sizeof(theirs), deadline);
    CCL_CHECK(theirs == mine, cclInvalidUsage,
              "ranks disagree on the size (" + std::to_string(mine) + " vs " + std::to_string(theirs) + " bytes)");
    auto* base = static_cast<char*>(data);
    for (int step = 0; step < size_ - 1; ++step) {
      int sendSlot = (rank_ - step + size_) % size_;
      int recvSlot = (rank_ - step - 1 + size_) % size_;
      exchange(next_, base + sendSlot * bytes, bytes, prev_, base + recvSlot * bytes, bytes, deadline);
    }
  });
}

void RingBootstrap::barrier() {
  std::vector<char> slots(size_);
  allGather(slots.data(), 1);
}

void RingBootstrap::broadcast(void* data, size_t bytes, int root) {
  CCL_CHECK(root >= 0 && root < size_, cclInvalidArgument, "broadcast root " + std::to_string(root) + " out of range");
  if (size_ == 1) return;
  guarded("broadcast", [&] {
    Deadline deadline = defaultDeadline();
    uint64_t header = bytes;
    if (rank_ != root) {
      uint64_t theirs = 0;
      prev_.recvAll(&theirs, sizeof(theirs), deadline);
      CCL_CHECK(theirs == header, cclInvalidUsage,
                "ranks disagree on the size (" + std::to_string(header) + " vs " + std::to_string(theirs) + " bytes)");
      prev_.recvAll(data, bytes, deadline);
    }
    if ((rank_ + 1) % size_ != root) {
      next_.sendAll(&header, sizeof(header), deadline);
      next_.sendAll(data, bytes, deadline);
    }
  });
}

void RingBootstrap::abort() {
  aborted_.store(true);
  shutdownAll();
}

}  // namespace

std::unique_ptr<Bootstrap> Bootstrap::connect(const cclUniqueId& id, int rank, int nranks,
                                              std::chrono::milliseconds timeout) {
  CCL_CHECK(nranks >= 1 && rank >= 0 && rank < nranks, cclInvalidArgument,
            "invalid rank " + std::to_string(rank) + " of " + std::to_string(nranks));
  const IdLayout layout = parseId(id);
  const Deadline deadline = deadlineAfter(timeout);
  WireAddr local = pickLocalAddress();
  Socket listener = Socket::listenOn(local);
  std::vector<WireAddr> table = rendezvous(layout, rank, nranks, listener.localAddr(), deadline);
  Socket next, prev;
  if (nranks > 1) {
    next = Socket::connectTo(table[(rank + 1) % nranks], deadline);
    RingProof proof{};
    proof.magic = kRingMagic;
    std::memcpy(proof.secret, layout.secret, kSecretBytes);
    proof.rank = rank;
    proof.nranks = nranks;
    next.sendAll(&proof, sizeof(proof), deadline);
    prev = acceptPrev(listener, layout, (rank - 1 + nranks) % nranks, nranks, deadline);
  }
  CCL_INFO("bootstrap: rank %d of %d joined", rank, nranks);
  return std::make_unique<RingBootstrap>(rank, nranks, std::move(next), std::move(prev));
}

}  // namespace ccl::bootstrap
