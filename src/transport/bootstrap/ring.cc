// SPDX-License-Identifier: BSD-3-Clause
// A ring bootstrap's collectives over the ring of sockets (allGather, barrier, broadcast),
// derived ids for a shrink, and abort.
#include "transport/bootstrap/ring.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/log.h"
#include "transport/bootstrap/wire.h"

namespace ccl::bootstrap {

// A failed collective leaves the ring out of step, so it shuts the sockets down: neighbours
// blocked in the same collective fail at once instead of at their timeout. The error names the
// rank whose loss explains the failure when the ring tells (lostAfterFailure), and passes the
// news on; otherwise this rank leaves a goodbye: it is not lost, only its ring is out of step.
template <typename F>
void RingBootstrap::guarded(const char* what, F&& body) {
  if (aborted_.load()) throw Error(cclRemoteError, std::string("bootstrap ") + what + ": communicator was aborted");
  try {
    body();
    // A note read as the previous rank's part (it came where data was due and filled what was
    // left to read): the collective has the note's bytes for data. The ring ended. (A note
    // still unread, sizeof(EndNote) bytes or more, starts past what the collective read.)
    if (prev_.unread() < sizeof(EndNote) && ateNote(prev_.read()))
      throw Error(cclRemoteError, "bootstrap peer closed the connection");
  } catch (const Error& e) {
    if (aborted_.load()) throw Error(cclRemoteError, std::string("bootstrap ") + what + ": communicator was aborted");
    const uint64_t readByCall = prev_.read();
    int lost = lostAfterFailure();
    // A size that disagreed was a note's first bytes, read where the size was due: the ring
    // ended, the ranks did not call otherwise. (Looked at once lostAfterFailure has read the
    // rest of the note.)
    const cclResult_t code = e.code() == cclInvalidUsage && ateNote(readByCall) ? cclRemoteError : e.code();
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
    std::string message = std::string("bootstrap ") + what + ": " +
                          (code == e.code() ? e.what() : "bootstrap peer closed the connection");
    if (lost >= 0) {
      relayLost(lost);
      message += " (rank " + std::to_string(lost) + why + ")";
    } else {
      goodbye();
      shutdownAll();
    }
    throw Error(code, message);
  }
}

void RingBootstrap::allGather(void* data, size_t bytes) {
  if (size_ == 1) return;
  guarded("allGather", [&] {
    Deadline deadline = deadlineAfter(timeout_);
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
    Deadline deadline = deadlineAfter(timeout_);
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

cclUniqueId RingBootstrap::derivedId(const std::vector<int>& ranks, const Derivation& derivation) {
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
    probe.agreement = derivation.agreement;
    probe.derivation = derivation.number;
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
    derived_ = serveRendezvous(listener_.duplicate(), layout, derivation, std::move(sent), ranks, std::move(derived_));
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

}  // namespace ccl::bootstrap
