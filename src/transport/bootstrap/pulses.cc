// SPDX-License-Identifier: BSD-3-Clause
// A ring bootstrap's liveness: the pulses on the connections beside the ring, a quiet or lost
// neighbour found and named, the news of a loss passed round the ring.
#include "transport/bootstrap/ring.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/log.h"
#include "transport/bootstrap/wire.h"

namespace ccl::bootstrap {

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
    // Its end, read from the stream's end: bytes of a collective this rank has not read yet
    // may come before the note, and tell nothing of it.
    const int lost = endSays(i, sockets[i]->tail());
    if (lost >= 0) return lost;
    leftOnPurpose_[i].store(true);  // a goodbye: nothing more to watch there
  }
  return -1;
}

void RingBootstrap::relayLost(int lost) {
  if (size_ == 1 || aborted_.exchange(true)) return;
  for (Socket* s : {&next_, &prev_}) leaveNote(*s, kLost, lost);  // into an idle connection's empty buffer
  shutdownAll();
}

// After a failed collective: the rank whose loss explains it, read from the ends of the ring
// connections as they stand (no wait: a failure that a lost rank explains comes from an end
// already here, and waiting would hold up every rank of a cascade in turn). A neighbour whose
// connection ended with nothing said (or was reset) died or aborted; one that failed before
// this rank left as its last bytes the news of a lost rank, or a goodbye when it knew none.
// -1 when neither end tells.
int RingBootstrap::lostAfterFailure() {
  Socket* sockets[2] = {&prev_, &next_};
  for (int i = 0; i < 2; ++i) {
    char buf[4096];
    bool ended = false;
    try {
      while (sockets[i]->recvSome(buf, sizeof buf) > 0) {
      }
    } catch (const Error&) {  // ended (closed or reset)
      ended = true;
    }
    // What it said last, whether the failed collective or the loop above read it. A note ends
    // its connection: once it is here, the end it announces need not be waited for.
    const Socket::Tail t = sockets[i]->tail();
    if (!ended && !noteAtEnd(t)) continue;  // still open: nothing to tell
    const int lost = endSays(i, t);
    if (lost >= 0) return lost;
  }
  return -1;
}

}  // namespace ccl::bootstrap
