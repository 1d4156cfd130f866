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
#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/config.h"
#include "common/error.h"
#include "common/log.h"
#include "common/tags.h"
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

// What a bootstrap leaves on its ring connections before they end: a goodbye (it was
// destroyed, or its process exited), or the news of a lost rank (kLost, then that rank as an
// int32), which the neighbours pass on. Nothing at all: the rank itself was lost.
constexpr char kGoodbye = 'G';
constexpr char kLost = 'L';
using LostNews = std::array<char, 1 + sizeof(int32_t)>;
// The bytes of the pulse connections: a pulse, and a question for a quiet neighbour
// (Bootstrap::askQuiet). Any byte shows its sender alive.
constexpr char kPulse = 'P';
constexpr char kAskQuiet = 'Q';
LostNews lostNews(int32_t lost) {
  LostNews msg;
  msg[0] = kLost;
  std::memcpy(msg.data() + 1, &lost, sizeof lost);
  return msg;
}

// CCL_PEER_SILENCE_MS, checked: how long a neighbour's host may leave pulses unacknowledged.
std::chrono::milliseconds peerSilence() {
  const int64_t ms = config::peerSilenceMs();
  CCL_CHECK(ms >= 0 && ms <= 3'600'000, cclInvalidArgument,
            "CCL_PEER_SILENCE_MS=" + std::to_string(ms) + ": expected 0 (no pulses) to 3600000 milliseconds");
  return std::chrono::milliseconds(ms);
}

// How long reachable() lets accepted connections settle before it trusts them.
constexpr std::chrono::milliseconds kReachableSettle{100};

// How long a derived rendezvous waits for a left-out rank's listener to accept its probe: a
// silent host costs this much once, at the start of a shrink.
constexpr std::chrono::milliseconds kProbeWait{1000};

// The errors with which the kernel ends a pulse connection whose bytes nobody acknowledged
// (TCP_USER_TIMEOUT: ETIMEDOUT, or the last soft error seen meanwhile, e.g. no route). A reset
// or an end means a process closed it, which the ring connection beside it explains.
bool silentHostError(int err) {
  return err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH || err == EHOSTDOWN;
}

class RingBootstrap final : public Bootstrap {
 public:
  // next/prev: the connections to the next and previous rank, per channel (wire.h).
  RingBootstrap(int rank, int nranks, std::array<Socket, kChannels> next, std::array<Socket, kChannels> prev,
                Socket listener, std::vector<WireAddr> listeners, const IdLayout& id, std::chrono::milliseconds silence)
      : rank_(rank),
        size_(nranks),
        next_(std::move(next[kRingChannel])),
        prev_(std::move(prev[kRingChannel])),
        pulsePrev_(std::move(prev[kPulseChannel])),
        pulseNext_(std::move(next[kPulseChannel])),
        listener_(std::move(listener)),
        listeners_(std::move(listeners)),
        id_(id),
        silence_(silence) {
    // Judged from the ring's making: a neighbour stopped before its first pulse is as quiet
    // as one stopped after it (CCL_PEER_SILENCE_MS is alike on every rank, so it pulses).
    const int64_t now = Clock::now().time_since_epoch() / std::chrono::nanoseconds(1);
    for (auto& last : lastPulseNs_) last.store(now);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void allGather(void* data, size_t bytes) override;
  void barrier() override;
  void broadcast(void* data, size_t bytes, int root) override;
  void abort() override;
  ~RingBootstrap() override { goodbye(); }
  bool peerClosed() override { return size_ > 1 && (aborted_.load() || prev_.peerClosed() || next_.peerClosed()); }
  std::vector<int> ringFds() const override {
    std::vector<int> out;
    if (size_ == 1 || aborted_.load() || saidGoodbye_.load()) return out;
    if (!leftOnPurpose_[0].load()) out.push_back(prev_.fd());
    if (!leftOnPurpose_[1].load()) out.push_back(next_.fd());
    return out;
  }
  int lostNeighbour() override;
  void relayLost(int lost) override;
  std::vector<int> pulseFds() const override {
    std::vector<int> out;
    if (size_ == 1 || aborted_.load() || saidGoodbye_.load()) return out;
    for (int i = 0; i < 2; ++i)
      if (pulseEnd_[i].load() == 0 && !leftOnPurpose_[i].load()) out.push_back(pulseSockets()[i]->fd());
    return out;
  }
  std::chrono::milliseconds pulse() override;
  int quietNeighbour() const override;
  void askQuiet() override;
  int answerAsked() override;
  void goodbye() override {
    // Nothing reads the byte: it only marks the connection's end as meant. Once.
    if (size_ == 1 || aborted_.load() || saidGoodbye_.exchange(true)) return;
    const char bye = kGoodbye;
    for (Socket* s : {&next_, &prev_}) try {
        s->sendSome(&bye, 1);
      } catch (const Error&) {
      }
  }
  cclUniqueId derivedId(const std::vector<int>& ranks, uint64_t agreement) override;
  std::vector<int> reachable(std::chrono::milliseconds wait) override;

 private:
  template <typename F>
  void guarded(const char* what, F&& body);
  void shutdownAll() {
    next_.shutdown();
    prev_.shutdown();
  }
  std::array<const Socket*, 2> pulseSockets() const { return {&pulsePrev_, &pulseNext_}; }
  // The previous (0) or next (1) rank of the ring.
  int neighbour(int i) const { return i == 0 ? (rank_ - 1 + size_) % size_ : (rank_ + 1) % size_; }
  // The rank a relay at `bytes` (a LostNews' size) names, when it is one and names another
  // rank of this ring; -1 otherwise.
  int newsIn(const char* bytes) const {
    int32_t lost = -1;
    if (bytes[0] == kLost) std::memcpy(&lost, bytes + 1, sizeof lost);
    return lost >= 0 && lost < size_ && lost != rank_ ? lost : -1;
  }
  void drainPulses();
  int lostAfterFailure();

  int rank_, size_;
  Socket next_, prev_;
  // The pulse connections (Bootstrap::pulse); how each ended: 0 while open, an errno, or
  // kPulseClosed when the peer closed it; when a pulse last came from each (steady clock
  // nanoseconds; the ring's making before the first). Only the watcher's thread reads the
  // sockets.
  static constexpr int kPulseClosed = -1;
  Socket pulsePrev_, pulseNext_;
  std::atomic<int> pulseEnd_[2] = {0, 0};
  std::atomic<int64_t> lastPulseNs_[2] = {0, 0};
  // A question (askQuiet) came from each side since the watcher last looked; when this rank
  // last passed one on towards each side. Only the watcher's thread touches them.
  bool asked_[2] = {false, false};
  Clock::time_point passedOn_[2] = {};
  // The rendezvous listener of every rank (this one's kept open): derived ids' roots.
  Socket listener_;
  std::vector<WireAddr> listeners_;
  IdLayout id_;
  std::atomic<bool> aborted_{false};
  std::atomic<bool> saidGoodbye_{false};
  std::atomic<bool> leftOnPurpose_[2] = {false, false};  // prev_, next_ ended with a goodbye
  std::chrono::milliseconds silence_;                    // CCL_PEER_SILENCE_MS at init; 0: this rank sends no pulses
  Clock::time_point nextPulse_{};
};

void RingBootstrap::drainPulses() {
  char sink[64];
  for (int i = 0; i < 2; ++i) {
    if (pulseEnd_[i].load() != 0) continue;
    for (;;) {
      const ssize_t n = ::recv(pulseSockets()[i]->fd(), sink, sizeof sink, MSG_DONTWAIT);
      if (n > 0) {
        lastPulseNs_[i].store(Clock::now().time_since_epoch() / std::chrono::nanoseconds(1));
        if (std::memchr(sink, kAskQuiet, static_cast<size_t>(n))) asked_[i] = true;
        continue;
      }
      if (n == 0) {
        pulseEnd_[i] = kPulseClosed;
      } else if (errno == EINTR) {
        continue;
      } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
        pulseEnd_[i] = errno;
      }
      break;
    }
  }
}

std::chrono::milliseconds RingBootstrap::pulse() {
  if (size_ == 1 || aborted_.load() || saidGoodbye_.load()) return {};
  // Drained whatever this rank's own setting: a neighbour may pulse when this rank does not,
  // and a full receive buffer would stall its pulses until its kernel gave up on them.
  drainPulses();
  if (silence_.count() == 0) return {};
  const auto now = Clock::now();
  if (now >= nextPulse_) {
    const char beat = kPulse;
    for (int i = 0; i < 2; ++i)
      if (pulseEnd_[i].load() == 0) (void)::send(pulseSockets()[i]->fd(), &beat, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    nextPulse_ = now + silence_ / 4;
  }
  return std::max(std::chrono::milliseconds(1), std::chrono::ceil<std::chrono::milliseconds>(nextPulse_ - now));
}

int RingBootstrap::quietNeighbour() const {
  if (size_ == 1 || silence_.count() == 0 || aborted_.load() || saidGoodbye_.load()) return -1;
  const int64_t now = Clock::now().time_since_epoch() / std::chrono::nanoseconds(1);
  const int64_t limit = silence_ / std::chrono::nanoseconds(1);
  for (int i = 0; i < 2; ++i) {
    const int64_t last = lastPulseNs_[i].load();
    if (pulseEnd_[i].load() == 0 && !leftOnPurpose_[i].load() && now - last > limit) return neighbour(i);
  }
  return -1;
}

void RingBootstrap::askQuiet() {
  if (size_ == 1 || silence_.count() == 0 || aborted_.load() || saidGoodbye_.load()) return;
  const char ask = kAskQuiet;
  for (int i = 0; i < 2; ++i)
    if (pulseEnd_[i].load() == 0) (void)::send(pulseSockets()[i]->fd(), &ask, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
}

int RingBootstrap::answerAsked() {
  if (!asked_[0] && !asked_[1]) return -1;
  const bool from[2] = {asked_[0], asked_[1]};
  asked_[0] = asked_[1] = false;
  const int quiet = quietNeighbour();
  if (quiet >= 0) return quiet;
  if (size_ == 1 || aborted_.load() || saidGoodbye_.load()) return -1;
  const auto now = Clock::now();
  const char ask = kAskQuiet;
  for (int i = 0; i < 2; ++i) {
    const int to = 1 - i;  // away from the side it came from
    if (!from[i] || pulseEnd_[to].load() != 0 || now - passedOn_[to] < silence_) continue;
    passedOn_[to] = now;
    (void)::send(pulseSockets()[to]->fd(), &ask, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  return -1;
}

int RingBootstrap::lostNeighbour() {
  if (size_ == 1 || aborted_.load() || saidGoodbye_.load()) return -1;
  const Socket* sockets[2] = {&prev_, &next_};
  drainPulses();
  for (int i = 0; i < 2; ++i) {
    pollfd p{sockets[i]->fd(), POLLRDHUP, 0};
    if (::poll(&p, 1, 0) <= 0 || !(p.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
      // The ring connection stands, but the kernel gave up on the pulses: its host is silent.
      if (!leftOnPurpose_[i].load() && silentHostError(pulseEnd_[i].load())) return neighbour(i);
      continue;
    }
    LostNews msg;
    const ssize_t n = ::recv(sockets[i]->fd(), msg.data(), msg.size(), MSG_PEEK | MSG_DONTWAIT);
    if (n >= 1 && msg[0] == kGoodbye) {  // left on purpose: nothing more to watch there
      leftOnPurpose_[i].store(true);
      continue;
    }
    if (n == static_cast<ssize_t>(msg.size()) && msg[0] == kLost) {
      const int origin = newsIn(msg.data());
      return origin >= 0 ? origin : neighbour(i);
    }
    // Bytes of a collective this rank has not read yet come before the end (the neighbour
    // finished its part and left): what follows them is known once they are read.
    if (n > 0) return kUndecided;
    return neighbour(i);  // its connection ended with nothing said: that rank is gone
  }
  return -1;
}

void RingBootstrap::relayLost(int lost) {
  if (size_ == 1 || aborted_.exchange(true)) return;
  const LostNews msg = lostNews(lost);
  for (Socket* s : {&next_, &prev_}) try {
      s->sendSome(msg.data(), msg.size());  // 5 bytes into an idle connection's empty buffer
    } catch (const Error&) {
    }
  shutdownAll();
}

// How long a bootstrap collective that timed out waits for its neighbours' news of a stopped
// rank (they time out about when it does).
constexpr std::chrono::milliseconds kTimeoutNews{250};

// After a failed collective: the rank whose loss explains it, read from the ends of the ring
// connections as they stand (no wait: a failure that a lost rank explains comes from an end
// already here, and waiting would hold up every rank of a cascade in turn). A neighbour whose
// connection ended with nothing said (or was reset) died or aborted; one that failed before
// this rank left as its last bytes the news of a lost rank (kLost and the rank), or a goodbye
// when it knew none. -1 when neither end tells.
int RingBootstrap::lostAfterFailure() {
  Socket* sockets[2] = {&prev_, &next_};
  for (int i = 0; i < 2; ++i) {
    char buf[4096];
    try {
      while (sockets[i]->recvSome(buf, sizeof buf) > 0) {
      }
      continue;               // still open: nothing to tell
    } catch (const Error&) {  // ended (closed or reset)
    }
    // What it said last, whether the failed collective or the loop above read it.
    const std::string_view tail = sockets[i]->lastBytes();
    if (tail.size() >= sizeof(LostNews)) {
      const int origin = newsIn(tail.data() + tail.size() - sizeof(LostNews));
      if (origin >= 0) return origin;
    }
    if (tail.empty() || tail.back() != kGoodbye) return neighbour(i);
  }
  return -1;
}

// A failed collective leaves the ring out of step, so it shuts the sockets down: neighbours
// blocked in the same collective fail at once instead of at their timeout. The error names the
// rank whose loss explains the failure when the ring tells (lostAfterFailure), and passes the
// news on; otherwise this rank leaves a goodbye: it is not lost, only its ring is out of step.
template <typename F>
void RingBootstrap::guarded(const char* what, F&& body) {
  if (aborted_.load()) throw Error(cclRemoteError, std::string("bootstrap ") + what + ": communicator was aborted");
  try {
    body();
  } catch (const Error& e) {
    if (aborted_.load()) throw Error(cclRemoteError, std::string("bootstrap ") + what + ": communicator was aborted");
    int lost = lostAfterFailure();
    std::string why = " is gone";
    if (lost < 0 && e.code() == cclSystemError) {
      // A timeout. A stopped rank's neighbours know it by its pulses (sent from the start of
      // the init: api/watch.h); the other ranks, timing out about now too, hear it from them.
      lost = quietNeighbour();
      if (lost >= 0) why = std::string(" ") + kQuietReason;
      const Deadline until = deadlineAfter(kTimeoutNews);
      while (lost < 0 && Clock::now() < until) {
        pollfd ends[2] = {{prev_.fd(), POLLIN | POLLRDHUP, 0}, {next_.fd(), POLLIN | POLLRDHUP, 0}};
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
        if (::poll(ends, 2, static_cast<int>(std::max<long long>(left, 1))) < 0 && errno != EINTR) break;
        lost = lostAfterFailure();
      }
    }
    std::string message = std::string("bootstrap ") + what + ": " + e.what();
    if (lost >= 0) {
      relayLost(lost);
      message += " (rank " + std::to_string(lost) + why + ")";
    } else {
      goodbye();
      shutdownAll();
    }
    throw Error(e.code(), message);
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

cclUniqueId RingBootstrap::derivedId(const std::vector<int>& ranks, uint64_t agreement) {
  CCL_CHECK(!ranks.empty() && std::is_sorted(ranks.begin(), ranks.end()) &&
                std::adjacent_find(ranks.begin(), ranks.end()) == ranks.end() && ranks.front() >= 0 &&
                ranks.back() < size_ && std::binary_search(ranks.begin(), ranks.end(), rank_),
            cclInvalidArgument, "a derived id's ranks must be ascending, distinct, in range and hold this rank");
  IdLayout layout = id_;
  layout.root = listeners_[ranks.front()];
  if (ranks.front() == rank_) {
    // The ranks left out are told (a probe each, sent here; the service reads the answers):
    // one that serves a derived rendezvous of its own has another view of who is gone.
    std::vector<WireAddr> out;
    for (int r = 0; r < size_; ++r)
      if (!std::binary_search(ranks.begin(), ranks.end(), r)) out.push_back(listeners_[r]);
    std::vector<Socket> probes = connectAll(out, deadlineAfter(kProbeWait));
    Hello probe{};
    probe.magic = kHelloMagic;
    std::memcpy(probe.secret, id_.secret, kSecretBytes);
    probe.rank = kProbeRank;
    probe.nranks = static_cast<int32_t>(ranks.size());
    probe.listen = layout.root;
    probe.agreement = agreement;
    std::vector<Socket> sent;
    for (Socket& p : probes) {
      if (!p.valid()) continue;  // gone: nothing to tell
      try {
        p.sendAll(&probe, sizeof(probe), deadlineAfter(kProbeWait));
        sent.push_back(std::move(p));
      } catch (const Error&) {
      }
    }
    // The listener kept from this ring's rendezvous still accepts: a rank that connects
    // before the service starts waits in its backlog.
    serveRendezvous(listener_.duplicate(), layout, agreement, std::move(sent), ranks);
  }
  cclUniqueId out;
  std::memset(out.internal, 0, sizeof(out.internal));
  std::memcpy(out.internal, &layout, sizeof(layout));
  return out;
}

std::vector<int> RingBootstrap::reachable(std::chrono::milliseconds wait) {
  std::vector<WireAddr> others;
  for (int r = 0; r < size_; ++r)
    if (r != rank_) others.push_back(listeners_[r]);
  std::vector<Socket> answered = connectAll(others, deadlineAfter(wait));
  // A process that is exiting may still accept for a moment (its descriptors close one by
  // one); then its listener's close resets the connection. Settle, and look again.
  std::this_thread::sleep_for(kReachableSettle);
  std::vector<int> out;
  for (int r = 0, i = 0; r < size_; ++r) {
    if (r == rank_) {
      out.push_back(r);
      continue;
    }
    Socket& s = answered[static_cast<size_t>(i++)];
    if (!s.valid()) continue;
    pollfd p{s.fd(), POLLRDHUP, 0};
    if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) continue;
    out.push_back(r);
  }
  return out;
}

void RingBootstrap::abort() {
  aborted_.store(true);
  shutdownAll();
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
