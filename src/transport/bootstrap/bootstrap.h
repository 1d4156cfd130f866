// SPDX-License-Identifier: BSD-3-Clause
// Bootstrap: the TCP rendezvous behind cclUniqueId. The id holds the root's address and a
// random secret; every rank connects, proves the secret, and the ranks are then linked in
// a ring of sockets used for small all-gathers, barriers and abort notices. Connections
// that do not present the secret are dropped.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ccl/ccl.h"

namespace ccl::bootstrap {

// Which communicator a derived id (Bootstrap::derivedId) makes: the parent's `number`-th
// derivation (from 1; each rank counts its own, and the ranks that go on derive in the same
// order), and what its ranks must agree on besides the size (a hash of who takes part and
// of the number). {0, 0}: the rendezvous of an id from createUniqueId. A root that serves
// derivation n refuses alone a hello of an earlier one (a rank that came late to a
// derivation its root already gave up), and ends its own at a hello of a later one (a rank
// that gave it up), handing that hello to the next derivation it serves: so ranks that
// retry a failed shrink meet in the retry, whatever each did with the failed one.
struct Derivation {
  uint64_t number = 0;
  uint64_t agreement = 0;
};

// Fills *id with a fresh address + secret and starts the rendezvous service in this
// process (a thread that lives until all ranks of that id have joined or the timeout
// passes). Throws ccl::Error(cclSystemError) when no socket can be opened.
void createUniqueId(cclUniqueId* id);

class Bootstrap {
 public:
  // Joins the rendezvous of `id` as `rank` of `nranks`; blocks until all ranks have joined.
  // Throws ccl::Error: cclInvalidArgument for a malformed id, cclSystemError on timeout or
  // socket failure, cclInvalidUsage when ranks disagree on nranks or a rank joins twice.
  // `derivation`: {} for an id from createUniqueId; derivedId's for a derived one. `timeout`
  // bounds the join, and then each of the bootstrap's collectives.
  static std::unique_ptr<Bootstrap> connect(const cclUniqueId& id, int rank, int nranks,
                                            std::chrono::milliseconds timeout, const Derivation& derivation = {});
  virtual ~Bootstrap() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Collective. `data` holds size()*bytes; this rank's slot is data + rank()*bytes. On
  // return every slot holds the matching rank's contribution.
  virtual void allGather(void* data, size_t bytes) = 0;
  // Collective: returns once every rank has entered.
  virtual void barrier() = 0;
  // Collective: `bytes` at `data` on `root` are copied to `data` on every rank.
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  // Any thread: closes the sockets so blocked collectives here and on peers fail promptly.
  virtual void abort() = 0;
  // Non-blocking, cheap enough to call every ~100 ms while waiting on the transport: true
  // once a ring neighbour has closed its socket (it aborted, failed a collective or exited).
  // Lets a rank notice a peer's abort even when the transport cannot report it.
  virtual bool peerClosed() = 0;

  // Finding a lost rank between calls (api/watch.h). A bootstrap that is destroyed, or whose
  // process exits normally (goodbye()), leaves a goodbye on its ring connections; one that
  // dies or aborts closes them without one. A rank that finds its neighbour lost tells its
  // own neighbours who (relayLost), so the news goes round the ring naming the rank lost.
  // The ring connections, for a watcher to wait on (their end: POLLRDHUP).
  virtual std::vector<int> ringFds() const = 0;
  // Non-blocking: the rank lost by this rank's view (a neighbour whose connection ended
  // without a goodbye, one whose host left its pulses unacknowledged for CCL_PEER_SILENCE_MS,
  // or the rank a neighbour's relay names), or -1; -1 after abort().
  // kUndecided: not known yet; ask again later. (The ring bootstrap always knows: a
  // connection's end note is read at the stream's end, whatever unread bytes of a collective
  // come before it.)
  static constexpr int kUndecided = -2;
  virtual int lostNeighbour() = 0;
  // Tells both neighbours that `lost` is gone and closes the ring, as abort() does.
  virtual void relayLost(int lost) = 0;
  // Leaves the goodbye now (the process is exiting without destroying this bootstrap).
  virtual void goodbye() = 0;
  // A silent host (crashed, powered off, cut off) ends no connection: nothing arrives, not
  // even a reset. So each rank also holds a pulse connection to each ring neighbour, on which
  // the watcher sends a byte every quarter of CCL_PEER_SILENCE_MS; the kernel fails it
  // (TCP_USER_TIMEOUT) when those bytes stay unacknowledged that long. A process that is
  // stopped or stuck still acknowledges them (its kernel does): CCL_TIMEOUT reports it.
  // The pulse connections, for a watcher to wait on (POLLIN: pulses to drain; their errors).
  virtual std::vector<int> pulseFds() const = 0;
  // Non-blocking: drains the neighbours' pulses and sends this rank's when one is due.
  // Returns how long until the next is due; zero when this bootstrap sends none
  // (CCL_PEER_SILENCE_MS=0, one rank, after abort() or goodbye()).
  virtual std::chrono::milliseconds pulse() = 0;
  // Any thread: a ring neighbour that has pulsed but sent none for CCL_PEER_SILENCE_MS while
  // its kernel still acknowledges this rank's (a process stopped, or whose watcher cannot
  // run), or -1. Not a loss by itself: what a call that timed out names (api/group.cc).
  // Assumes CCL_PEER_SILENCE_MS is alike on every rank.
  virtual int quietNeighbour() const = 0;
  // What an error says of the rank quietNeighbour found, after "rank N ".
  static constexpr const char* kQuietReason = "sends no pulses: stopped, or its process cannot run";
  // A call that timed out with no quiet neighbour of its own (api/group.cc) asks the ring:
  // a byte on both pulse connections that each rank's watcher answers (answerAsked) or
  // passes on, so that the neighbours of a stopped rank name it even when their own calls
  // have not timed out (they may be idle, their part of the call done). The answer comes as
  // the news of a loss (relayLost).
  virtual void askQuiet() = 0;
  // The watcher's part, after pulse(): when a neighbour asked since the last look, this
  // rank's quiet neighbour (to be declared lost), or -1 after passing the question on away
  // from the side it came from (at most once per CCL_PEER_SILENCE_MS each way, so that a
  // question nobody can answer dies out instead of circling the ring).
  virtual int answerAsked() = 0;

  // The id of a communicator of `ranks` (ascending, this rank among them), made without a
  // message: cclCommShrink's, whose survivors cannot count on this ring (a lost rank broke
  // it). Each rank keeps its rendezvous listener while the bootstrap lives; the id's root is
  // that of ranks.front(), its secret this communicator's. On that rank the call starts the
  // rendezvous for ranks.size() ranks whose connect passes `derivation` (every rank that
  // takes part passes the same ranks and derivation; a hello of the same number with another
  // agreement fails them all), after stopping the one this bootstrap served before (its
  // ranks are told that a later derivation superseded it).
  // That rendezvous also tells every rank left out: one serving a rendezvous of its own with
  // another view fails it, and this one too when the answer comes in time. So ranks that
  // disagree on who is gone end in an error, not in two communicators. Works after abort(),
  // which closes only the ring.
  virtual cclUniqueId derivedId(const std::vector<int>& ranks, const Derivation& derivation) = 0;
  // The ranks whose process is alive: its rendezvous listener accepts a connection within
  // `wait` (a refusal means the process is gone; a silent host, that its rank is).
  virtual std::vector<int> reachable(std::chrono::milliseconds wait) = 0;
};

}  // namespace ccl::bootstrap
