// SPDX-License-Identifier: BSD-3-Clause
// The bootstrap of a rank once it has joined: the ring of sockets to its neighbours (ring.cc:
// allGather, barrier, broadcast, derived ids, abort) and the pulse connections beside it that
// tell a neighbour's death or silence (pulses.cc). Bootstrap::connect (bootstrap.cc) makes it.
// Internal to transport/bootstrap.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <optional>
#include <vector>

#include "common/error.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/bootstrap/socket.h"
#include "transport/bootstrap/wire.h"

namespace ccl::bootstrap {

// What a bootstrap leaves on its ring connections before they end: a goodbye (it was
// destroyed, or its process exited), or the news of a lost rank, which the neighbours pass
// on. Nothing at all: the rank itself was lost. A note is the last thing on its connection,
// after whatever bytes of collectives came before it; those are unframed, may hold any bytes,
// and the reader may not have read them yet, or may have read the note as a collective's
// data. So a note is looked for at the stream's end only (Socket::tail), and it carries its
// own place in the stream (the bytes its sender had sent on that connection before it), so
// that a collective's last bytes that happen to end a stream (their sender died) are not
// taken for one.
constexpr char kGoodbye = 'G';
constexpr char kLost = 'L';
constexpr char kNoteMagic[3] = {'e', 'n', 'd'};
struct EndNote {
  char kind;          // kGoodbye or kLost
  char magic[3];      // kNoteMagic
  int32_t lost;       // kLost: the rank lost
  uint64_t position;  // the bytes its sender sent on the connection before it
};
static_assert(sizeof(EndNote) == 16 && sizeof(EndNote) <= Socket::kTailBytes, "a note fits a socket's tail");

// Leaves a note on `s`, best effort: a send buffer that is full (the peer stopped reading a
// collective) takes part of it or none, and the peer then finds no note, as of a lost rank.
inline void leaveNote(Socket& s, char kind, int32_t lost) {
  try {
    s.sendAt([&](uint64_t position) {
      EndNote note{kind, {kNoteMagic[0], kNoteMagic[1], kNoteMagic[2]}, lost, position};
      std::array<char, sizeof(EndNote)> bytes;
      std::memcpy(bytes.data(), &note, sizeof note);
      return bytes;
    });
  } catch (const Error&) {
  }
}

// The note the stream `t` ends with, if it ends with a whole one in its place.
inline std::optional<EndNote> noteAtEnd(const Socket::Tail& t) {
  if (t.bytes.size() < sizeof(EndNote)) return std::nullopt;
  EndNote note;
  std::memcpy(&note, t.bytes.data() + t.bytes.size() - sizeof note, sizeof note);
  if ((note.kind != kGoodbye && note.kind != kLost) || std::memcmp(note.magic, kNoteMagic, sizeof kNoteMagic) != 0 ||
      note.position != t.end - sizeof note)
    return std::nullopt;
  return note;
}

// The bytes of the pulse connections: a pulse, and a question for a quiet neighbour
// (Bootstrap::askQuiet). Any byte shows its sender alive; nothing else travels there, so no
// byte of theirs is parsed as part of a longer message.
constexpr char kPulse = 'P';
constexpr char kAskQuiet = 'Q';

// How long reachable() lets accepted connections settle before it trusts them.
constexpr std::chrono::milliseconds kReachableSettle{100};

// How long a derived rendezvous waits for a left-out rank's listener to accept its probe: a
// silent host costs this much once, at the start of a shrink.
constexpr std::chrono::milliseconds kProbeWait{1000};

// The errors with which the kernel ends a pulse connection whose bytes nobody acknowledged
// (TCP_USER_TIMEOUT: ETIMEDOUT, or the last soft error seen meanwhile, e.g. no route). A reset
// or an end means a process closed it, which the ring connection beside it explains.
inline bool silentHostError(int err) {
  return err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH || err == EHOSTDOWN;
}

// How long a bootstrap collective that timed out waits for its neighbours' news of a stopped
// rank (they time out about when it does).
constexpr std::chrono::milliseconds kTimeoutNews{250};

class RingBootstrap final : public Bootstrap {
 public:
  // next/prev: the connections to the next and previous rank, per channel (wire.h).
  RingBootstrap(int rank, int nranks, std::array<Socket, kChannels> next, std::array<Socket, kChannels> prev,
                Socket listener, std::vector<WireAddr> listeners, const IdLayout& id, std::chrono::milliseconds silence,
                std::chrono::milliseconds timeout)
      : rank_(rank),
        size_(nranks),
        next_(std::move(next[kRingChannel])),
        prev_(std::move(prev[kRingChannel])),
        pulsePrev_(std::move(prev[kPulseChannel])),
        pulseNext_(std::move(next[kPulseChannel])),
        listener_(std::move(listener)),
        listeners_(std::move(listeners)),
        id_(id),
        silence_(silence),
        timeout_(timeout) {
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
    // It only marks the connection's end as meant. Once.
    if (size_ == 1 || aborted_.load() || saidGoodbye_.exchange(true)) return;
    for (Socket* s : {&next_, &prev_}) leaveNote(*s, kGoodbye, -1);
  }
  cclUniqueId derivedId(const std::vector<int>& ranks, const Derivation& derivation) override;
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
  // The rank a note names lost, when it is news and names another rank of this ring; -1
  // otherwise.
  int newsIn(const EndNote& note) const {
    const int32_t lost = note.kind == kLost ? note.lost : -1;
    return lost >= 0 && lost < size_ && lost != rank_ ? lost : -1;
  }
  // What the end of a connection says (`i`: 0 the previous rank's, 1 the next's), once it has
  // ended or its note has come: -1 a goodbye, else the rank lost (the neighbour itself when
  // it said nothing, or named no rank of this ring).
  int endSays(int i, const Socket::Tail& t) const {
    const std::optional<EndNote> note = noteAtEnd(t);
    if (note && note->kind == kGoodbye) return -1;
    const int origin = note ? newsIn(*note) : -1;
    return origin >= 0 ? origin : neighbour(i);
  }
  // True when the previous rank's connection ends with a note that a collective of this rank
  // read as its bytes, whole or in part (the note came where the collective expected data):
  // one that starts before `readByCall`, the bytes read up to the collective's end.
  bool ateNote(uint64_t readByCall) const {
    const Socket::Tail t = prev_.tail();
    const std::optional<EndNote> note = noteAtEnd(t);
    return note && note->position < readByCall;
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
  // The derived rendezvous this rank serves on listener_ (derivedId), stopped by the next.
  std::shared_ptr<DerivedService> derived_;
  IdLayout id_;
  std::atomic<bool> aborted_{false};
  std::atomic<bool> saidGoodbye_{false};
  std::atomic<bool> leftOnPurpose_[2] = {false, false};  // prev_, next_ ended with a goodbye
  std::chrono::milliseconds silence_;                    // CCL_PEER_SILENCE_MS at init; 0: this rank sends no pulses
  std::chrono::milliseconds timeout_;  // connect's: the communicator's, the deadline of each collective here
  Clock::time_point nextPulse_{};
};

}  // namespace ccl::bootstrap
