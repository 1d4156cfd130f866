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
                                 const Derivation& derivation, Deadline deadline) {
  Socket root = Socket::connectTo(id.root, deadline);
  Hello hello{};
  hello.magic = kHelloMagic;
  std::memcpy(hello.secret, id.secret, kSecretBytes);
  hello.rank = rank;
  hello.nranks = nranks;
  hello.listen = listenAddr;
  hello.agreement = derivation.agreement;
  hello.derivation = derivation.number;
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

RingProof ringProof(const IdLayout& id, int rank, int nranks, int32_t channel) {
  RingProof proof{};
  proof.magic = kRingMagic;
  std::memcpy(proof.secret, id.secret, kSecretBytes);
  proof.rank = rank;
  proof.nranks = nranks;
  proof.channel = channel;
  return proof;
}

// How long the previous rank may leave this one without a connection before its listener is
// probed, and how far apart the probes are. A live previous rank connects right after the
// rendezvous, which this rank has also passed: silence for this long is rare, and a probe
// costs one connection.
constexpr std::chrono::milliseconds kProbeEvery{200};
// Refusals in a row, a probe apart, that prove the previous rank gone: one is confirmed by a
// second, as connectTo retries a refusal before it gives up.
constexpr int kRefusalsGone = 2;

// Whether a neighbour's ring listener refuses a connection: its process exited (a process's
// sockets close with it, and that listener was open before the rendezvous published its
// address). A live one accepts; the probe then says what it is, and the neighbour's
// acceptPrev drops it unread. A connection that neither succeeds nor is refused soon (a host
// gone from the network) proves nothing: the init's deadline decides.
bool listenerRefuses(const WireAddr& addr, const IdLayout& id, int rank, int nranks) {
  try {
    Socket s = Socket::connectOnce(addr, deadlineAfter(std::chrono::milliseconds(50)));
    if (!s.valid()) return true;
    const RingProof probe = ringProof(id, rank, nranks, kLivenessChannel);
    s.sendSome(&probe, sizeof(probe));  // best effort: an incomplete probe is dropped too
  } catch (const Error&) {
  }
  return false;
}

// Accepts connections until the previous rank's two (its ring's and its pulses', in either
// order) arrive with the secret; others are dropped. Anyone who can reach the port can
// connect, so every connection's proof is read side by side (as the root reads hellos): one
// that sends nothing must not hold up the previous rank's behind it, each for seconds, until
// the init's deadline. A previous rank that died after the rendezvous is found by its
// listener's refusals (listenerRefuses), not by the deadline: cclRemoteError.
std::array<Socket, kChannels> acceptPrev(Socket& listener, const IdLayout& id, int rank, int prev, int nranks,
                                         const WireAddr& prevListener, Deadline deadline) {
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
  Deadline nextProbe = deadlineAfter(kProbeEvery);
  int refusals = 0;
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
        if (p.magic == kRingMagic && sameSecret(p.secret, id.secret) && p.channel == kLivenessChannel) {
          // the next rank's probe: this rank is alive
        } else if (p.magic == kRingMagic && sameSecret(p.secret, id.secret) && p.rank == prev && p.nranks == nranks &&
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
    // Probed only while nothing of the previous rank's has arrived: once one connection
    // has, the other follows (or the candidate's own deadline drops it).
    const bool nothingYet =
        candidates.empty() && std::none_of(got.begin(), got.end(), [](const Socket& s) { return s.valid(); });
    if (nothingYet && Clock::now() >= nextProbe) {
      refusals = listenerRefuses(prevListener, id, rank, nranks) ? refusals + 1 : 0;
      if (refusals >= kRefusalsGone)
        throw Error(cclRemoteError, "the previous rank's listener " + toString(prevListener) + " refuses connections");
      nextProbe = deadlineAfter(kProbeEvery);
    }
  }
}

// Leaves the news that `lost` is gone on the previous rank's ring connection, accepted for it
// within a second (the previous rank connects right after the rendezvous), best effort: an
// init that fails anyway.
void tellPrevious(Socket& listener, const IdLayout& id, int rank, int prev, int nranks, const WireAddr& prevListener,
                  int32_t lost, Deadline deadline) {
  try {
    std::array<Socket, kChannels> from = acceptPrev(listener, id, rank, prev, nranks, prevListener,
                                                    std::min(deadline, deadlineAfter(std::chrono::seconds(1))));
    leaveNote(from[kRingChannel], kLost, lost);
  } catch (const Error&) {
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
                                              std::chrono::milliseconds timeout, const Derivation& derivation) {
  CCL_CHECK(nranks >= 1 && rank >= 0 && rank < nranks, cclInvalidArgument,
            "invalid rank " + std::to_string(rank) + " of " + std::to_string(nranks));
  CCL_CHECK(nranks <= tags::kMaxRanks, cclInvalidArgument,
            std::to_string(nranks) + " ranks: a communicator has at most " + std::to_string(tags::kMaxRanks));
  const IdLayout layout = parseId(id);
  noteCreatorRanks(layout.secret, nranks);
  const Deadline deadline = deadlineAfter(timeout);
  WireAddr local = pickLocalAddress();
  Socket listener = Socket::listenOn(local);
  std::vector<WireAddr> table = rendezvous(layout, rank, nranks, listener.localAddr(), derivation, deadline);
  const std::chrono::milliseconds silence = peerSilence();
  std::array<Socket, kChannels> next, prev;
  if (nranks > 1) {
    // Both connections to the next rank first (their proofs fit the socket buffers), then
    // the previous rank's two, in whichever order they come.
    const int nextRank = (rank + 1) % nranks, prevRank = (rank - 1 + nranks) % nranks;
    try {
      for (int32_t channel = 0; channel < kChannels; ++channel) {
        next[channel] = Socket::connectTo(table[nextRank], deadline);
        const RingProof proof = ringProof(layout, rank, nranks, channel);
        next[channel].sendAll(&proof, sizeof(proof), deadline);
      }
    } catch (const Error& e) {
      // Refused to the end, or reset from its backlog (not timed out): the next rank's process
      // exited, or its own init failed first; in practice the first (every rank connects its
      // next right after the rendezvous, long before a refusal fails an init).
      if (!listenerRefuses(table[nextRank], layout, rank, nranks)) throw;
      // The previous rank, past its setup and waiting on this ring, hears of it (it would
      // otherwise take this rank's closing for this rank's loss).
      tellPrevious(listener, layout, rank, prevRank, nranks, table[prevRank], nextRank, deadline);
      throw Error(e.code(), std::string(e.what()) + " (rank " + std::to_string(nextRank) +
                                ", the next one in the ring, refuses connections: gone, or its init failed)");
    }
    try {
      prev = acceptPrev(listener, layout, rank, prevRank, nranks, table[prevRank], deadline);
    } catch (const Error& e) {
      // The next rank may already be past its own setup, waiting on this ring: it learns who
      // never came (as from relayLost) rather than blaming this rank for closing.
      leaveNote(next[kRingChannel], kLost, prevRank);
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
                                         std::move(table), layout, silence, timeout);
}

}  // namespace ccl::bootstrap
