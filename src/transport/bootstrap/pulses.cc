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

}  // namespace ccl::bootstrap
