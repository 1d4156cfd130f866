// SPDX-License-Identifier: BSD-3-Clause
// A rank's side of the bootstrap: the rendezvous with the root, then the ring of sockets
// that carries allGather, barrier and broadcast.
#include "transport/bootstrap/bootstrap.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/error.h"
#include "common/log.h"
#include "common/tags.h"
#include "transport/bootstrap/ring.h"
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

// How much longer than its own deadline a rank waits for the root's answer (rendezvous).
constexpr std::chrono::seconds kRootAnswerGrace{1};

// Sends our Hello to the root and returns the ring address of every rank.
std::vector<WireAddr> rendezvous(const IdLayout& id, int rank, int nranks, const WireAddr& listenAddr,
                                 uint64_t agreement, Deadline deadline) {
  Socket root = Socket::connectTo(id.root, deadline);
  Hello hello{};
  hello.magic = kHelloMagic;
  std::memcpy(hello.secret, id.secret, kSecretBytes);
  hello.rank = rank;
  hello.nranks = nranks;
  hello.listen = listenAddr;
  hello.agreement = agreement;
  Reply reply{};
  try {
    root.sendAll(&hello, sizeof(hello), deadline);
    // A little past our own deadline: at its own, which came first, the root tells every rank
    // that joined which ranks never did, and that is the error worth returning.
    root.recvAll(&reply, sizeof(reply), deadline + kRootAnswerGrace);
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

// Accepts connections until the previous rank's two (its ring's and its pulses', in either
// order) arrive with the secret; others are dropped. Anyone who can reach the port can
// connect, so every connection's proof is read side by side (as the root reads hellos): one
// that sends nothing must not hold up the previous rank's behind it, each for seconds, until
// the init's deadline.
std::array<Socket, kChannels> acceptPrev(Socket& listener, const IdLayout& id, int prev, int nranks,
                                         Deadline deadline) {
  std::array<Socket, kChannels> got;
  struct Candidate {
    Socket sock;
    RingProof proof{};
    size_t got = 0;
    Deadline until;  // dropped if its proof is not complete by then
  };
  constexpr size_t kMaxCandidates = 64;  // more wait in the listener's backlog
  std::vector<Candidate> candidates;
  std::vector<pollfd> fds;
  for (;;) {
    // At most 100 ms per wait, so that silent candidates are dropped at their time.
    fds.assign(1, pollfd{listener.fd(), POLLIN, 0});
    for (const Candidate& c : candidates) fds.push_back({c.sock.fd(), POLLIN, 0});
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (::poll(fds.data(), fds.size(), static_cast<int>(std::clamp<long long>(left + 1, 0, 100))) < 0 && errno != EINTR)
      throwSystemError("poll", errno);
    while (candidates.size() < kMaxCandidates) {
      const int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) break;
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      candidates.push_back(Candidate{Socket(fd), {}, 0, std::min(deadline, deadlineAfter(std::chrono::seconds(10)))});
    }
    for (size_t i = 0; i < candidates.size();) {
      Candidate& c = candidates[i];
      bool drop = false;
      try {
        c.got += c.sock.recvSome(reinterpret_cast<char*>(&c.proof) + c.got, sizeof(c.proof) - c.got);
      } catch (const Error& e) {
        CCL_WARN("bootstrap: dropped a ring connection that sent no proof: %s", e.what());
        drop = true;
      }
      if (!drop && c.got == sizeof(c.proof)) {
        const RingProof& p = c.proof;
        if (p.magic == kRingMagic && sameSecret(p.secret, id.secret) && p.rank == prev && p.nranks == nranks &&
            p.channel >= 0 && p.channel < kChannels && !got[p.channel].valid()) {
          got[p.channel] = std::move(c.sock);
          if (std::all_of(got.begin(), got.end(), [](const Socket& s) { return s.valid(); })) return got;
        } else {
          CCL_WARN("bootstrap: dropped a ring connection without the right secret, rank or channel (claimed rank %d)",
                   p.rank);
        }
        drop = true;  // taken, or dropped
      } else if (!drop && Clock::now() >= c.until) {
        CCL_WARN("bootstrap: dropped a ring connection that sent no proof in time");
        drop = true;
      }
      if (drop) {
        candidates.erase(candidates.begin() + static_cast<long>(i));
      } else {
        ++i;
      }
    }
    // Full after a reading pass: the longest waiting gives its place to the next in the backlog.
    if (candidates.size() >= kMaxCandidates) candidates.erase(candidates.begin());
    // A proof completed by now was taken above: past the deadline, the previous rank never came.
    if (Clock::now() >= deadline) throw Error(cclSystemError, "timeout waiting for a bootstrap connection");
  }
}

// CCL_PEER_SILENCE_MS, checked: how long a neighbour's host may leave pulses unacknowledged.
std::chrono::milliseconds peerSilence() {
  const int64_t ms = config::peerSilenceMs();
  CCL_CHECK(ms >= 0 && ms <= 3'600'000, cclInvalidArgument,
            "CCL_PEER_SILENCE_MS=" + std::to_string(ms) + ": expected 0 (no pulses) to 3600000 milliseconds");
  return std::chrono::milliseconds(ms);
}

}  // namespace

std::unique_ptr<Bootstrap> Bootstrap::connect(const cclUniqueId& id, int rank, int nranks,
                                              std::chrono::milliseconds timeout, uint64_t agreement) {
  CCL_CHECK(nranks >= 1 && rank >= 0 && rank < nranks, cclInvalidArgument,
            "invalid rank " + std::to_string(rank) + " of " + std::to_string(nranks));
  CCL_CHECK(nranks <= tags::kMaxRanks, cclInvalidArgument,
            std::to_string(nranks) + " ranks: a communicator has at most " + std::to_string(tags::kMaxRanks));
  const IdLayout layout = parseId(id);
  noteCreatorRanks(layout.secret, nranks);
  const Deadline deadline = deadlineAfter(timeout);
  WireAddr local = pickLocalAddress();
  Socket listener = Socket::listenOn(local);
  std::vector<WireAddr> table = rendezvous(layout, rank, nranks, listener.localAddr(), agreement, deadline);
  const std::chrono::milliseconds silence = peerSilence();
  std::array<Socket, kChannels> next, prev;
  if (nranks > 1) {
    // Both connections to the next rank first (their proofs fit the socket buffers), then
    // the previous rank's two, in whichever order they come.
    for (int32_t channel = 0; channel < kChannels; ++channel) {
      next[channel] = Socket::connectTo(table[(rank + 1) % nranks], deadline);
      RingProof proof{};
      proof.magic = kRingMagic;
      std::memcpy(proof.secret, layout.secret, kSecretBytes);
      proof.rank = rank;
      proof.nranks = nranks;
      proof.channel = channel;
      next[channel].sendAll(&proof, sizeof(proof), deadline);
    }
    const int prevRank = (rank - 1 + nranks) % nranks;
    try {
      prev = acceptPrev(listener, layout, prevRank, nranks, deadline);
    } catch (const Error& e) {
      // The next rank may already be past its own setup, waiting on this ring: it learns who
      // never came (as from relayLost) rather than blaming this rank for closing.
      const LostNews msg = lostNews(prevRank);
      try {
        next[kRingChannel].sendSome(msg.data(), msg.size());
      } catch (const Error&) {
      }
      throw Error(e.code(), std::string(e.what()) + " (rank " + std::to_string(prevRank) +
                                ", the previous one in the ring, never connected: gone, or not calling)");
    }
    if (silence.count() > 0)
      for (Socket* s : {&next[kPulseChannel], &prev[kPulseChannel]}) {
        const unsigned ms = static_cast<unsigned>(silence.count());
        if (setsockopt(s->fd(), IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof ms) != 0)
          throwSystemError("setsockopt(TCP_USER_TIMEOUT)", errno);
      }
  }
  CCL_INFO("bootstrap: rank %d of %d joined", rank, nranks);
  return std::make_unique<RingBootstrap>(rank, nranks, std::move(next), std::move(prev), std::move(listener),
                                         std::move(table), layout, silence);
}

}  // namespace ccl::bootstrap
