// SPDX-License-Identifier: BSD-3-Clause
// The root of the rendezvous: createUniqueId() and the thread that collects every rank's
// Hello, checks that they agree, and sends each rank the table of ring addresses.
#include <poll.h>
#include <pthread.h>
#include <sys/random.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/log.h"
#include "common/tags.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/bootstrap/wire.h"

namespace ccl::bootstrap {
namespace {

// A connection whose Hello has not fully arrived yet.
struct Pending {
  Socket sock;
  Hello hello{};
  size_t got = 0;
};

struct Joined {
  Socket sock;
  Hello hello;
};

}  // namespace

// serveRendezvous's handle. The next derived service on the same listener sets `stop`; the
// service, which looks at it at least every kStopPoll, answers its ranks, leaves in
// `handover` the connections whose hello is not yet read or is of a later derivation, and
// sets `done` (also when it ends by itself), after which it touches none of them.
struct DerivedService {
  std::atomic<bool> stop{false};
  std::mutex mutex;
  std::condition_variable ended;
  bool done = false;
  std::vector<Pending> handover;
};

namespace {

constexpr std::chrono::milliseconds kStopPoll{50};

// The size of the communicator an id's creator joins, when that process joins it: what the
// root's table is bounded by. Registered per id (by its secret) while its service runs.
struct CreatorRanks {
  // 0: not known (yet, or ever: a creator need not be a rank); -1: the creator's own ranks
  // disagree, so the hellos' agreement decides (and fails them all).
  std::atomic<int> nranks{0};
};
using Secret = std::array<uint8_t, kSecretBytes>;

// Held by every service thread except while it waits in poll(), and taken by fork() first
// (pthread_atfork), so a process forks only while its services allocate nothing. UCX's
// libucm hooks mmap and madvise in every process that loads it, UCX context or not, and a
// hooked call holds libucm's event read lock for its duration. A service's first allocation
// makes its thread's malloc arena with mmap; forked meanwhile, the child gets that lock held
// by a thread it does not have, and its first UCX context (ucp_init installing its memory
// hooks, which takes the lock to write) waits forever: a rank forked after createUniqueId
// hung so (process.fork_collectives_2x2, about one run in 200 under load). Left open: the
// madvise of the thread's own exit, after the gate is released.
std::mutex& forkGate() {
  static std::mutex* gate = [] {
    auto* m = new std::mutex;  // never destroyed: detached threads hold it
    pthread_atfork([] { forkGate().lock(); }, [] { forkGate().unlock(); }, [] { forkGate().unlock(); });
    return m;
  }();
  return *gate;
}

std::mutex& registryMutex() {
  static std::mutex m;
  return m;
}
std::map<Secret, std::weak_ptr<CreatorRanks>>& registry() {
  static auto* r = new std::map<Secret, std::weak_ptr<CreatorRanks>>;  // never destroyed: detached threads use it
  return *r;
}
Secret secretOf(const uint8_t* bytes) {
  Secret s;
  std::memcpy(s.data(), bytes, kSecretBytes);
  return s;
}

class RootService {
 public:
  RootService(Socket listener, const IdLayout& id, Deadline deadline, std::shared_ptr<CreatorRanks> creator,
              const Derivation& derivation, std::vector<Socket> probes, std::vector<int> labels,
              std::shared_ptr<DerivedService> control, std::vector<Pending> inherited)
      : listener_(std::move(listener)),
        id_(id),
        deadline_(deadline),
        creator_(std::move(creator)),
        derivation_(derivation),
        labels_(std::move(labels)),
        control_(std::move(control)),
        inherited_(std::move(inherited)) {
    for (Socket& s : probes) probes_.push_back(Probe{std::move(s)});
    // Allocated up front, on the caller's thread: an idle service then makes no allocation,
    // so a process that forks its ranks right after createUniqueId does not copy a lock
    // held by this thread (malloc's, or the mmap hooks UCX's libucm installs) into a child.
    fds_.reserve(kReserve);
    pending_.reserve(kReserve);
  }

  // Serves until all ranks joined (or the timeout). Never throws: it runs on a detached thread.
  void run() noexcept;

 private:
  void serve();
  bool stopped() const { return control_ && control_->stop.load(std::memory_order_acquire); }
  // Stopped by the next derivation served on this listener: this one's ranks are told, and
  // the connections meant for later ones are left to it.
  void handOver();
  void pollOnce();
  void acceptAll();
  void readPending();
  void readProbes();
  void admit(Pending& p);
  // Once the creator's size is known, ranks admitted under another size are refused.
  void reconcile();
  void refuse(Socket& s, const Hello& h, const std::string& why);
  void fail(cclResult_t code, const std::string& message);
  void sendReply(Socket& s, cclResult_t code, const std::string& message, const std::vector<WireAddr>* table);
  bool complete() const { return expected_ > 0 && joinedCount_ == expected_; }
  // Serving a derived id (serveRendezvous), whose ranks all know its size and agreement.
  bool derived() const { return !labels_.empty(); }

  static constexpr size_t kReserve = 256;
  // Connections kept while their hello is incomplete. Anyone who reaches the port can open
  // connections and send nothing; kept without bound until the deadline they would use up
  // the process's descriptors (its ranks' sockets too). A rank sends its hello as soon as it
  // connects, so at the bound the complete hellos are read first and then the connection
  // that has waited longest is dropped.
  static constexpr size_t kMaxPending = 128;

  Socket listener_;
  IdLayout id_;
  std::vector<pollfd> fds_;
  Deadline deadline_;
  std::vector<Pending> pending_;
  std::shared_ptr<CreatorRanks> creator_;
  Derivation derivation_;  // every hello must carry it (wire.h, Hello)
  // Probes this rendezvous sent to the ranks it leaves out, until each answers or closes.
  struct Probe {
    Socket sock;
    Reply reply{};
    size_t got = 0;
  };
  std::vector<Probe> probes_;
  // A derived rendezvous's ranks by their rank in the parent, which its errors name.
  std::vector<int> labels_;
  std::shared_ptr<DerivedService> control_;  // a derived rendezvous's; null for a fresh id's
  std::vector<Pending> inherited_;           // from the service stopped before this one
  std::vector<Pending> parked_;              // hellos of a later derivation (handOver)
  // By rank: only ranks that joined take memory, whatever size a hello claims.
  std::map<int, Joined> joined_;
  int expected_ = -1;
  int joinedCount_ = 0;
  cclResult_t errorCode_ = cclSuccess;  // set once ranks disagreed; later joiners get it too
  std::string error_;
  bool warnedDescriptors_ = false;
};

void RootService::run() noexcept {
  std::unique_lock<std::mutex> gate(forkGate());
  try {
    serve();
  } catch (const std::exception& e) {
    CCL_WARN("bootstrap root %s failed: %s", toString(id_.root).c_str(), e.what());
  }
  if (control_) {
    std::lock_guard<std::mutex> lock(control_->mutex);
    control_->done = true;
    control_->ended.notify_all();
  }
}

void RootService::serve() {
  // What the previous service on this listener left: hellos already read are admitted (or
  // parked again) before any new connection.
  for (Pending& p : inherited_) {
    if (p.got == sizeof(Hello)) {
      admit(p);
    } else {
      pending_.push_back(std::move(p));
    }
  }
  inherited_.clear();
  while (!complete() && Clock::now() < deadline_ && !stopped()) pollOnce();
  // A rendezvous that completed forms, even when the next one asked it to stop meanwhile.
  if (complete()) {
    std::vector<WireAddr> table(expected_);
    for (auto& [r, j] : joined_) table[r] = j.hello.listen;
    for (auto& [r, j] : joined_) sendReply(j.sock, cclSuccess, "", &table);
    CCL_INFO("bootstrap root %s: %d ranks joined", toString(id_.root).c_str(), expected_);
  } else if (stopped()) {
    handOver();
  } else if (errorCode_ == cclSuccess && expected_ > 0) {
    // The ranks that came are told which did not, so each error names the ranks at fault.
    std::string missing;
    int named = 0;
    for (int r = 0; r < expected_ && named < 8; ++r)
      if (!joined_.count(r)) missing += (named++ ? ", " : "") + std::to_string(derived() ? labels_[r] : r);
    if (expected_ - joinedCount_ > named) missing += ", ...";
    fail(cclSystemError, std::string("timeout: ") + (expected_ - joinedCount_ > 1 ? "ranks " : "rank ") + missing +
                             (derived() ? " of the parent communicator" : "") + " never joined the rendezvous of " +
                             std::to_string(expected_) + " ranks (gone, or alive but not calling)");
  } else if (errorCode_ == cclSuccess) {
    CCL_WARN("bootstrap root %s: timeout before any rank joined", toString(id_.root).c_str());
  }
}

void RootService::handOver() {
  if (errorCode_ == cclSuccess && joinedCount_ > 0)
    fail(cclRemoteError, "its root (rank " + std::to_string(labels_.front()) +
                             " of the parent) gave this communicator up for a later one (a retried shrink)");
  std::lock_guard<std::mutex> lock(control_->mutex);
  for (Pending& p : pending_) control_->handover.push_back(std::move(p));
  for (Pending& p : parked_) control_->handover.push_back(std::move(p));
  pending_.clear();
  parked_.clear();
}

void RootService::pollOnce() {
  reconcile();
  fds_.clear();
  fds_.push_back({listener_.fd(), POLLIN, 0});
  for (auto& p : pending_) fds_.push_back({p.sock.fd(), POLLIN, 0});
  for (auto& p : probes_) fds_.push_back({p.sock.fd(), POLLIN, 0});
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
  // While the creator's size may still come (or change to a conflict), or the next derived
  // service may ask this one to stop, look every 50 ms.
  if (creator_->nranks.load(std::memory_order_acquire) <= 0 || control_)
    left = std::min<long long>(left, kStopPoll.count());
  const int timeoutMs = static_cast<int>(std::clamp<long long>(left + 1, 0, 1 << 30));
  forkGate().unlock();
  int rc = poll(fds_.data(), fds_.size(), timeoutMs);
  forkGate().lock();
  if (rc < 0 && errno != EINTR) throwSystemError("poll", errno);
  if (rc <= 0) return;
  if (fds_[0].revents) acceptAll();
  readPending();
  readProbes();
}

// A rank this rendezvous leaves out answered its probe with an error: it is forming another
// communicator from the same parent, so neither may form.
void RootService::readProbes() {
  for (size_t i = 0; i < probes_.size();) {
    Probe& p = probes_[i];
    bool drop = false;
    try {
      p.got += p.sock.recvSome(reinterpret_cast<char*>(&p.reply) + p.got, sizeof(Reply) - p.got);
      if (p.got == sizeof(Reply)) {
        p.reply.message[sizeof(p.reply.message) - 1] = '\0';
        if (p.reply.status != cclSuccess && errorCode_ == cclSuccess)
          fail(static_cast<cclResult_t>(p.reply.status), p.reply.message);
        drop = true;
      }
    } catch (const Error&) {
      drop = true;  // closed without an answer: nothing forms there
    }
    if (drop) {
      probes_.erase(probes_.begin() + static_cast<long>(i));
    } else {
      ++i;
    }
  }
}

void RootService::acceptAll() {
  for (;;) {
    if (pending_.size() >= kMaxPending) {
      readPending();
      if (pending_.size() >= kMaxPending) pending_.erase(pending_.begin());
    }
    int fd = ::accept4(listener_.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      pending_.push_back(Pending{Socket(fd)});
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno == EMFILE || errno == ENFILE) {
      // Out of descriptors: the connection that has waited longest for its hello gives its
      // own to the newcomer. With none to give, wait a little instead of spinning on a
      // listener that stays readable (and warn once, not at every turn).
      if (!warnedDescriptors_)
        CCL_WARN("bootstrap root %s: accept: %s (%zu connections without a hello)", toString(id_.root).c_str(),
                 std::strerror(errno), pending_.size());
      warnedDescriptors_ = true;
      if (!pending_.empty()) {
        pending_.erase(pending_.begin());
        continue;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK) CCL_WARN("bootstrap root: accept: %s", std::strerror(errno));
    return;
  }
}

void RootService::readPending() {
  for (size_t i = 0; i < pending_.size();) {
    Pending& p = pending_[i];
    bool drop = false, done = false;
    try {
      p.got += p.sock.recvSome(reinterpret_cast<char*>(&p.hello) + p.got, sizeof(Hello) - p.got);
      done = p.got == sizeof(Hello);
    } catch (const Error& e) {
      CCL_INFO("bootstrap root: dropped a connection before its hello: %s", e.what());
      drop = true;
    }
    if (done) {
      admit(p);
      drop = true;  // admitted sockets were moved out; rejected ones are closed
    }
    if (drop) {
      pending_.erase(pending_.begin() + i);
    } else {
      ++i;
    }
  }
}

void RootService::admit(Pending& p) {
  const Hello& h = p.hello;
  if (h.magic != kHelloMagic || !sameSecret(h.secret, id_.secret)) {
    CCL_WARN("bootstrap root %s: dropped a connection that did not present the secret", toString(id_.root).c_str());
    return;
  }
  if (h.rank == kProbeRank) {
    // Another root of the same parent leaves this one out: the ranks disagree on who is gone.
    const std::string why = "the ranks that go on disagree on who is gone: a communicator forming at " +
                            toString(h.listen) + " leaves out ranks of the one forming at " + toString(id_.root);
    if (errorCode_ == cclSuccess) fail(cclInvalidUsage, why);
    sendReply(p.sock, cclInvalidUsage, why, nullptr);
    return;
  }
  if (derived() && h.derivation < derivation_.number) {
    // Late for a derivation its root already gave up: refused alone, so that the ranks of
    // this one go on and it can retry.
    sendReply(p.sock, cclRemoteError,
              "its root (rank " + std::to_string(labels_.front()) + " of the parent) gave this communicator up for " +
                  "a later one (a retried shrink)",
              nullptr);
    return;
  }
  if (derived() && h.derivation > derivation_.number) {
    // A rank that gave this derivation up and began a later one: this one cannot form. Its
    // hello waits for the root's own later derivation (handOver).
    // (Its rank is numbered in that later one, so the error cannot name it.)
    if (errorCode_ == cclSuccess)
      fail(cclRemoteError, "a rank that takes part gave this communicator up for a later one (a retried shrink)");
    if (parked_.size() >= kMaxPending) parked_.erase(parked_.begin());
    parked_.push_back(std::move(p));
    return;
  }
  if (errorCode_ != cclSuccess) {
    sendReply(p.sock, errorCode_, error_, nullptr);
    return;
  }
  reconcile();  // the creator's size may have come since the last poll
  if (h.nranks < 1 || h.rank < 0 || h.rank >= h.nranks) {
    sendReply(p.sock, cclInvalidArgument, "invalid rank " + std::to_string(h.rank) + " of " + std::to_string(h.nranks),
              nullptr);
    return;
  }
  // The table is bounded by the creator's size, or by the most ranks a communicator can
  // have while that is not known: a hello beyond either is refused alone, and the ranks
  // that agree go on.
  if (h.nranks > tags::kMaxRanks) {
    refuse(p.sock, h, "a communicator has at most " + std::to_string(tags::kMaxRanks) + " ranks");
    return;
  }
  const int creator = creator_->nranks.load(std::memory_order_acquire);
  if (derived() && (h.nranks != creator || h.agreement != derivation_.agreement)) {
    // A derived rendezvous's ranks all know its size and agreement: a hello with either
    // wrong is a rank with another view of who is gone, and none of them may form one.
    joined_.emplace(-1 - int(joined_.size()), Joined{std::move(p.sock), h});
    fail(cclInvalidUsage, "the ranks disagree on which of them take part (they passed different lists)");
    return;
  }
  if (creator > 0 && h.nranks != creator) {
    refuse(p.sock, h, "the communicator of this id has " + std::to_string(creator) + " ranks (its creator's init)");
    return;
  }
  if (expected_ < 0) expected_ = h.nranks;
  if (h.nranks != expected_) {
    // Neither side is known to be right: every rank gets the error, none waits for ever.
    joined_.emplace(-1 - int(joined_.size()), Joined{std::move(p.sock), h});  // so that fail() answers it too
    fail(cclInvalidUsage, "ranks disagree on the number of ranks (" + std::to_string(expected_) + " vs " +
                              std::to_string(h.nranks) + ")");
    return;
  }
  if (joined_.count(h.rank)) {
    joined_.emplace(-1 - int(joined_.size()), Joined{std::move(p.sock), h});
    fail(cclInvalidUsage, "rank " + std::to_string(h.rank) + " joined twice");
    return;
  }
  joined_.emplace(h.rank, Joined{std::move(p.sock), h});
  ++joinedCount_;
}

void RootService::reconcile() {
  const int creator = creator_->nranks.load(std::memory_order_acquire);
  if (creator <= 0 || expected_ < 0 || expected_ == creator || errorCode_ != cclSuccess) return;
  // Ranks joined under a size that the creator's own init now contradicts: each is told so.
  for (auto& [r, j] : joined_)
    refuse(j.sock, j.hello,
           "the communicator of this id has " + std::to_string(creator) + " ranks (its creator's init)");
  joined_.clear();
  joinedCount_ = 0;
  expected_ = creator;
}

void RootService::refuse(Socket& s, const Hello& h, const std::string& why) {
  const std::string message =
      "rank " + std::to_string(h.rank) + " claims " + std::to_string(h.nranks) + " ranks, refused: " + why;
  CCL_WARN("bootstrap root %s: %s", toString(id_.root).c_str(), message.c_str());
  sendReply(s, cclInvalidUsage, message, nullptr);
}

// Every rank that joined, and every rank that joins later, gets the error: no rank waits
// for a communicator that can no longer form.
void RootService::fail(cclResult_t code, const std::string& message) {
  CCL_WARN("bootstrap root %s: %s", toString(id_.root).c_str(), message.c_str());
  errorCode_ = code;
  error_ = message;
  for (auto& [r, j] : joined_) sendReply(j.sock, code, message, nullptr);
  joined_.clear();
  expected_ = 0;
  joinedCount_ = -1;  // never complete
}

void RootService::sendReply(Socket& s, cclResult_t code, const std::string& message,
                            const std::vector<WireAddr>* table) {
  Reply r{};
  r.status = code;
  std::strncpy(r.message, message.c_str(), sizeof(r.message) - 1);
  try {
    Deadline d = std::min(deadline_, deadlineAfter(std::chrono::seconds(10)));
    s.sendAll(&r, sizeof(r), d);
    if (table) s.sendAll(table->data(), table->size() * sizeof(WireAddr), d);
  } catch (const Error& e) {
    CCL_WARN("bootstrap root: could not answer a rank: %s", e.what());
  }
}

void fillRandom(uint8_t* out, size_t bytes) {
  while (bytes > 0) {
    ssize_t n = getrandom(out, bytes, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throwSystemError("getrandom", errno);
    }
    out += n, bytes -= static_cast<size_t>(n);
  }
}

// Runs `service` on a detached thread: it owns all it touches, so it can outlive the caller
// or be cut short by process exit, and it ends by itself once all ranks joined or at the
// timeout. The caller waits until the thread runs: starting a thread takes locks (the
// allocator's, a sanitizer's thread registry), and a process that forks its ranks right
// after must not copy them held into a child.
void startService(std::unique_ptr<RootService> service) {
  forkGate();  // the fork handlers, registered before the caller can fork
  std::promise<void> started;
  std::future<void> running = started.get_future();
  std::thread([svc = std::move(service), started = std::move(started)]() mutable {
    started.set_value();
    svc->run();
  }).detach();
  running.wait();
}

}  // namespace

void createUniqueId(cclUniqueId* id) {
  CCL_CHECK(id, cclInvalidArgument, "createUniqueId: null id");
  IdLayout layout{};
  layout.magic = kIdMagic;
  fillRandom(layout.secret, kSecretBytes);
  Socket listener = Socket::listenOn(pickLocalAddress());
  layout.root = listener.localAddr();
  auto creator = std::make_shared<CreatorRanks>();
  {
    std::lock_guard<std::mutex> lock(registryMutex());
    auto& reg = registry();
    for (auto it = reg.begin(); it != reg.end();) it = it->second.expired() ? reg.erase(it) : std::next(it);
    reg[secretOf(layout.secret)] = creator;
  }
  startService(std::make_unique<RootService>(std::move(listener), layout, defaultDeadline(), std::move(creator),
                                             Derivation{}, std::vector<Socket>{}, std::vector<int>{}, nullptr,
                                             std::vector<Pending>{}));
  std::memset(id->internal, 0, sizeof(id->internal));
  std::memcpy(id->internal, &layout, sizeof(layout));
  CCL_INFO("bootstrap root listening on %s", toString(layout.root).c_str());
}

void noteCreatorRanks(const uint8_t* secret, int nranks) {
  std::lock_guard<std::mutex> lock(registryMutex());
  auto it = registry().find(secretOf(secret));
  if (it == registry().end()) return;  // the id was made in another process
  if (auto creator = it->second.lock()) {
    int seen = 0;
    if (!creator->nranks.compare_exchange_strong(seen, nranks, std::memory_order_acq_rel) && seen != nranks)
      creator->nranks.store(-1, std::memory_order_release);  // two inits here disagree: neither is the size
  }
}

std::shared_ptr<DerivedService> serveRendezvous(Socket listener, const IdLayout& id, const Derivation& derivation,
                                                std::vector<Socket> probes, std::vector<int> labels,
                                                std::shared_ptr<DerivedService> previous) {
  std::vector<Pending> inherited;
  if (previous) {
    // Both would accept on the same listener: a hello of this derivation taken by the
    // previous one would fail it. The previous one looks at `stop` every kStopPoll.
    previous->stop.store(true, std::memory_order_release);
    std::unique_lock<std::mutex> lock(previous->mutex);
    previous->ended.wait(lock, [&] { return previous->done; });
    inherited = std::move(previous->handover);
  }
  auto creator = std::make_shared<CreatorRanks>();
  creator->nranks.store(static_cast<int>(labels.size()));
  auto control = std::make_shared<DerivedService>();
  startService(std::make_unique<RootService>(std::move(listener), id, defaultDeadline(), std::move(creator), derivation,
                                             std::move(probes), std::move(labels), control, std::move(inherited)));
  return control;
}

}  // namespace ccl::bootstrap
