// SPDX-License-Identifier: BSD-3-Clause
// bootstrap_fuzz: the bootstrap's rendezvous port (the root address inside a cclUniqueId) fed
// hostile traffic while a real communicator of 2 to 4 ranks (threads) is being made on it:
// random bytes of random lengths, slow-loris connections (silent, or dribbling a byte every
// ~100 ms, many at once), hellos replayed from an earlier init or forged with this init's
// secret but a wrong rank, nranks or a real rank's number, truncated hellos and hellos with
// megabytes after them. Each trial passes when the real init still succeeds (checked with an
// allreduce: every rank in its place, no stranger among them) or every rank fails with a
// clear error; never a crash, a call past CCL_TIMEOUT + 5 s, or some ranks joined and others
// not. Attacks that do not know the secret must not stop the init at all. One JSON line per
// trial on stdout; "inputs" counts the hostile connections.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ccl/ccl.h"
#include "fuzz_common.h"
#include "transport/bootstrap/wire.h"

namespace {

using ccl::bootstrap::Hello;
using ccl::bootstrap::IdLayout;
using ccl::bootstrap::WireAddr;
using fuzz::Clock;
using fuzz::InCall;
using fuzz::mix;
using fuzz::Rng;

constexpr const char* kKind = "bootstrap_fuzz";
constexpr int kMaxRanks = 4;
constexpr int kMainSlot = 8;

fuzz::Tally tally;
std::atomic<uint64_t> trialNo{0};
uint64_t seedValue = 1;

std::string context() { return "trial " + std::to_string(trialNo.load()) + " of --seed " + std::to_string(seedValue); }

IdLayout layoutOf(const cclUniqueId& id) {
  IdLayout l;
  std::memcpy(&l, id.internal, sizeof(l));
  return l;
}

socklen_t fillSockaddr(const WireAddr& w, sockaddr_storage* out) {
  std::memset(out, 0, sizeof(*out));
  if (w.family == AF_INET6) {
    auto* s = reinterpret_cast<sockaddr_in6*>(out);
    s->sin6_family = AF_INET6;
    s->sin6_port = w.port;
    s->sin6_scope_id = w.scopeId;
    std::memcpy(&s->sin6_addr, w.addr, 16);
    return sizeof(sockaddr_in6);
  }
  auto* s = reinterpret_cast<sockaddr_in*>(out);
  s->sin_family = AF_INET;
  s->sin_port = w.port;
  std::memcpy(&s->sin_addr, w.addr, 4);
  return sizeof(sockaddr_in);
}

// A blocking TCP connection to `to` within 2 s; -1 when refused or out of descriptors.
int connectTo(const WireAddr& to) {
  sockaddr_storage ss;
  const socklen_t len = fillSockaddr(to, &ss);
  const int fd = ::socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 && errno != EINPROGRESS) {
    ::close(fd);
    return -1;
  }
  pollfd p{fd, POLLOUT, 0};
  int err = 0;
  socklen_t elen = sizeof(err);
  if (::poll(&p, 1, 2000) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0 || err != 0) {
    ::close(fd);
    return -1;
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

// Sends what the socket takes within `ms` milliseconds (a peer that stops reading, or closes,
// ends it early). Returns the bytes sent.
size_t sendFor(int fd, const void* data, size_t bytes, int ms) {
  const auto until = Clock::now() + std::chrono::milliseconds(ms);
  size_t done = 0;
  while (done < bytes && Clock::now() < until) {
    const ssize_t n = ::send(fd, static_cast<const char*>(data) + done, bytes - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) break;
    pollfd p{fd, POLLOUT, 0};
    ::poll(&p, 1, 20);
  }
  return done;
}

void closeWithReset(int fd) {
  linger l{1, 0};  // an RST instead of a FIN: the root sees ECONNRESET
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  ::close(fd);
}

// A listener the fuzzer owns: connections to it are accepted by the kernel and never
// answered (a forged hello can point the ring at it).
struct SilentListener {
  int fd = -1;
  WireAddr addr{};
  explicit SilentListener(const WireAddr& like) {
    sockaddr_storage ss;
    WireAddr w = like;
    w.port = 0;
    const socklen_t len = fillSockaddr(w, &ss);
    fd = ::socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 || ::listen(fd, 64) != 0) return;
    socklen_t l = sizeof(ss);
    getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &l);
    addr = w;
    addr.port = ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                         : reinterpret_cast<sockaddr_in*>(&ss)->sin_port;
  }
  ~SilentListener() {
    if (fd >= 0) ::close(fd);
  }
};

// ---------------------------------------------------------------------------------------
// Attacks.

enum class Attack {
  kRandomBytes,  // random bytes of a random length, then close (FIN or RST) or hold
  kSilent,       // many connections that send nothing, held to the end of the trial
  kDribble,      // connections that send a byte every ~100 ms (a hello's worth, slowly)
  kOldId,        // a hello with an earlier init's secret, any rank
  kBadRank,      // this init's secret, a rank or nranks no rank could have
  kOtherNranks,  // this init's secret, a valid rank of another nranks
  kDuplicate,    // this init's secret, a real rank's number, a ring address of ours
  kTruncated,    // part of a hello, then close or hold
  kOversized,    // a hello (old secret or a bad rank) and megabytes after it
  kFlood,        // thousands of silent connections from another process (descriptors)
  kRingIdle,     // silent connections to the ranks' ring ports, found as an attacker would
  kNum
};

const char* attackName(Attack a) {
  static const char* names[] = {"random-bytes", "silent",    "dribble",   "old-id", "bad-rank", "other-nranks",
                                "duplicate",    "truncated", "oversized", "flood",  "ring-idle"};
  return names[static_cast<int>(a)];
}

// Whether the attack knows this init's secret and claims a place it could take: the root may
// then refuse the init (every rank fails), as it must when ranks disagree.
bool mayStopInit(Attack a) { return a == Attack::kOtherNranks || a == Attack::kDuplicate; }

struct Plan {
  Attack kind;
  int delayMs;  // after the trial starts
  int connections;
  uint64_t seed;
};

struct Trial {
  int n = 2;
  cclUniqueId id{};
  IdLayout layout{};
  IdLayout previous{};  // an earlier init's id (its secret), or this one's with another secret
  std::vector<Plan> plans;
  // When each rank calls cclCommInitRank, after the trial starts. Real ranks arrive over
  // seconds; one rank comes after the attacks have begun, so they meet an open rendezvous.
  std::vector<int> joinMs;
  std::set<int> knownPorts;  // listening before the trial: not the ranks' ring ports
};

class Attacker {
 public:
  Attacker(const Trial& t, const SilentListener& ring) : t_(t), ring_(ring) {}
  ~Attacker() { stop(); }

  void start() {
    start_ = Clock::now();
    for (const Plan& p : t_.plans) threads_.emplace_back([this, p] { run(p); });
  }
  // Ends the attacks and closes every connection still held.
  void stop() {
    done_ = true;
    for (auto& th : threads_) th.join();
    threads_.clear();
    std::lock_guard<std::mutex> lock(mutex_);
    for (int fd : held_) ::close(fd);
    held_.clear();
  }
  uint64_t connections() const { return connections_.load(); }

 private:
  int open() {
    const int fd = connectTo(t_.layout.root);
    if (fd >= 0) connections_.fetch_add(1);
    return fd;
  }
  void hold(int fd) {
    std::lock_guard<std::mutex> lock(mutex_);
    held_.push_back(fd);
  }
  void finish(int fd, Rng& g) {
    const uint64_t k = g.below(3);
    if (k == 0) {
      ::close(fd);
    } else if (k == 1) {
      closeWithReset(fd);
    } else {
      hold(fd);
    }
  }
  void sleepMs(int ms) {
    const auto until = Clock::now() + std::chrono::milliseconds(ms);
    while (!done_ && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

  Hello hello(const IdLayout& id, int rank, int nranks, Rng& g) const {
    Hello h{};
    h.magic = ccl::bootstrap::kHelloMagic;
    std::memcpy(h.secret, id.secret, sizeof(h.secret));
    h.rank = rank;
    h.nranks = nranks;
    const uint64_t k = g.below(4);
    if (k == 0) {
      h.listen = ring_.addr;  // accepts, never answers
    } else if (k == 1) {
      h.listen = t_.layout.root;  // the root itself: closed once the rendezvous ends
      h.listen.port = htons(1);
    } else if (k == 2) {
      h.listen = t_.layout.root;
    } else {
      for (auto& b : h.listen.addr) b = static_cast<uint8_t>(g.next());
      h.listen.family = static_cast<uint16_t>(g.next());  // not an address family
      h.listen.port = static_cast<uint16_t>(g.next());
    }
    return h;
  }

  void run(const Plan& p) {
    Rng g(p.seed);
    sleepMs(p.delayMs);
    const int n = t_.n;
    std::vector<int> dribbling;
    if (p.kind == Attack::kFlood) return;
    if (p.kind == Attack::kRingIdle) return ringIdle(p);
    for (int c = 0; c < p.connections && !done_; ++c) {
      const int fd = open();
      if (fd < 0) continue;
      switch (p.kind) {
        case Attack::kRandomBytes: {
          std::vector<uint8_t> junk(g.chance(0.3) ? sizeof(Hello) : g.below(4097));
          for (auto& b : junk) b = static_cast<uint8_t>(g.next());
          if (g.chance(0.3) && junk.size() >= 8)  // a hello's magic, then noise
            std::memcpy(junk.data(), &ccl::bootstrap::kHelloMagic, 8);
          sendFor(fd, junk.data(), junk.size(), 200);
          finish(fd, g);
          break;
        }
        case Attack::kSilent:
          hold(fd);
          break;
        case Attack::kDribble:
          // Dribbled below: a valid-looking hello with another secret.
          hold(fd);
          dribbling.push_back(fd);
          break;
        case Attack::kOldId: {
          const Hello h = hello(t_.previous, static_cast<int>(g.below(n)), g.chance(0.8) ? n : n + 1, g);
          sendFor(fd, &h, sizeof(h), 200);
          finish(fd, g);
          break;
        }
        case Attack::kBadRank: {
          const int cases[][2] = {{-1, n}, {n, n}, {n + 7, n}, {0, 0}, {0, -5}, {INT32_MIN, n}, {INT32_MAX, n}};
          const auto* rn = cases[g.below(7)];
          const Hello h = hello(t_.layout, rn[0], rn[1], g);
          sendFor(fd, &h, sizeof(h), 200);
          finish(fd, g);
          break;
        }
        case Attack::kOtherNranks: {
          static const int others[] = {1, 5, 17, 1000, 1 << 30};  // 2^30: the root's table must stay bounded
          const int nr = g.chance(0.5) ? n + 1 : others[g.below(5)];
          const Hello h = hello(t_.layout, static_cast<int>(g.below(static_cast<uint64_t>(nr))), nr, g);
          sendFor(fd, &h, sizeof(h), 200);
          finish(fd, g);
          break;
        }
        case Attack::kDuplicate: {
          const Hello h = hello(t_.layout, static_cast<int>(g.below(n)), n, g);
          sendFor(fd, &h, sizeof(h), 200);
          finish(fd, g);
          break;
        }
        case Attack::kTruncated: {
          const Hello h = hello(g.chance(0.5) ? t_.layout : t_.previous, static_cast<int>(g.below(n)), n, g);
          sendFor(fd, &h, 1 + g.below(sizeof(h) - 1), 200);
          finish(fd, g);
          break;
        }
        case Attack::kOversized: {
          const bool bad = g.chance(0.5);
          const Hello h = bad ? hello(t_.layout, n + 3, n, g) : hello(t_.previous, 0, n, g);
          std::vector<uint8_t> big(sizeof(h) + (1u << 20) + g.below(1u << 20));
          for (size_t i = sizeof(h); i < big.size(); i += 8) big[i] = static_cast<uint8_t>(g.next());
          std::memcpy(big.data(), &h, sizeof(h));
          sendFor(fd, big.data(), big.size(), 300);
          finish(fd, g);
          break;
        }
        case Attack::kRingIdle:  // ringIdle below
        case Attack::kFlood:     // Flood below, from another process
        case Attack::kNum:
          break;
      }
    }
    if (p.kind != Attack::kDribble) return;
    // A byte of a wrong-secret hello every ~100 ms on every dribbling connection.
    const Hello h = hello(t_.previous, 0, n, g);
    const auto* bytes = reinterpret_cast<const uint8_t*>(&h);
    for (size_t i = 0; !done_; i = (i + 1) % sizeof(h)) {
      for (int fd : dribbling) ::send(fd, bytes + i, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      sleepMs(100);
    }
  }

  // Every ring port that opens before the last rank joins (ranks that joined wait there for
  // their previous rank) gets `connections` silent connections. Later ports may be the
  // transport's, which is not what this fuzzer attacks.
  void ringIdle(const Plan& p) {
    std::set<int> seen = t_.knownPorts;
    const int lastJoin = *std::max_element(t_.joinMs.begin(), t_.joinMs.end());
    const auto until = start_ + std::chrono::milliseconds(lastJoin);
    while (!done_ && Clock::now() < until) {
      for (const int port : fuzz::listeningPorts()) {
        if (!seen.insert(port).second) continue;
        WireAddr to = t_.layout.root;
        to.port = htons(static_cast<uint16_t>(port));
        for (int c = 0; c < p.connections; ++c) {
          const int fd = connectTo(to);
          if (fd < 0) continue;
          connections_.fetch_add(1);
          hold(fd);
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  const Trial& t_;
  const SilentListener& ring_;
  Clock::time_point start_;  // when the ranks' join times count from
  std::vector<std::thread> threads_;
  std::atomic<bool> done_{false};
  std::atomic<uint64_t> connections_{0};
  std::mutex mutex_;
  std::vector<int> held_;
};

// Thousands of silent connections held by another process (the idle_connections helper), so
// that they cost this process (the one that runs the root and the ranks) only the
// descriptors the root keeps for them. For the trial this process runs at a soft descriptor
// limit of what it has open plus kFloodHeadroom, as a process at a common default limit
// (1024) would, set before the flood arrives so that the root meets it while accepting.
constexpr rlim_t kFloodHeadroom = 512;

class Flood {
 public:
  Flood(const WireAddr& root, int connections) {
    int fds = 0;
    for (int fd = 0; fd < 65536; ++fd) fds += fcntl(fd, F_GETFD) != -1 ? 1 : 0;
    getrlimit(RLIMIT_NOFILE, &saved_);
    rlimit tight = saved_;
    tight.rlim_cur = std::min<rlim_t>(saved_.rlim_cur, static_cast<rlim_t>(fds) + kFloodHeadroom);
    setrlimit(RLIMIT_NOFILE, &tight);
    char host[INET6_ADDRSTRLEN] = "";
    inet_ntop(root.family, root.addr, host, sizeof(host));
    helper_ = std::make_unique<fuzz::IdleProcess>(CCL_IDLE_CONNECTIONS, host, ntohs(root.port), connections);
  }
  ~Flood() {
    helper_.reset();
    setrlimit(RLIMIT_NOFILE, &saved_);
  }
  Flood(const Flood&) = delete;
  Flood& operator=(const Flood&) = delete;
  int held() const { return helper_ ? helper_->held() : 0; }

 private:
  rlimit saved_{};
  std::unique_ptr<fuzz::IdleProcess> helper_;
};

// ---------------------------------------------------------------------------------------
// A trial: the real init under attack, then its communicator checked.

Trial makeTrial(Rng& g, const IdLayout* previous) {
  Trial t;
  t.n = static_cast<int>(g.range(2, kMaxRanks));
  const int k = static_cast<int>(g.range(1, 3));
  for (int i = 0; i < k; ++i) {
    Plan p;
    // Secretless attacks most of the time; forged places with the secret now and then.
    static const Attack secretless[] = {Attack::kRandomBytes, Attack::kSilent, Attack::kDribble, Attack::kOldId,
                                        Attack::kOversized,   Attack::kFlood,  Attack::kRingIdle};
    const uint64_t r = g.below(100);
    p.kind = r < 70   ? secretless[g.below(7)]
             : r < 85 ? (g.chance(0.5) ? Attack::kBadRank : Attack::kTruncated)
                      : (g.chance(0.5) ? Attack::kOtherNranks : Attack::kDuplicate);
    p.delayMs = static_cast<int>(g.below(4) == 0 ? 0 : g.below(300));
    p.connections = p.kind == Attack::kFlood      ? static_cast<int>(g.range(1000, 3000))
                    : p.kind == Attack::kRingIdle ? static_cast<int>(g.range(1, 5))
                    : p.kind == Attack::kSilent   ? static_cast<int>(g.range(10, 400))
                    : p.kind == Attack::kDribble  ? static_cast<int>(g.range(1, 30))
                    : mayStopInit(p.kind)         ? 1
                                                  : static_cast<int>(g.range(1, 40));
    p.seed = g.next();
    t.plans.push_back(p);
  }
  int last = 0;
  for (const Plan& p : t.plans) last = std::max(last, p.delayMs);
  for (int r = 0; r < t.n; ++r) t.joinMs.push_back(static_cast<int>(g.below(600)));
  t.joinMs[g.below(t.n)] = last + static_cast<int>(g.range(100, 600));
  if (previous) t.previous = *previous;
  return t;
}

struct RankResult {
  cclResult_t rc = cclSuccess;
  std::string message;
  double seconds = 0;
  cclComm_t comm = nullptr;
};

std::string describe(const Trial& t) {
  std::string s = std::to_string(t.n) + " ranks joining at";
  for (int ms : t.joinMs) s += " " + std::to_string(ms);
  s += " ms;";
  for (const Plan& p : t.plans)
    s += std::string(" ") + attackName(p.kind) + " x" + std::to_string(p.connections) + " at " +
         std::to_string(p.delayMs) + " ms;";
  return s;
}

void runTrial(Rng& g, cclUniqueId* last, bool haveLast) {
  Trial t;
  cclUniqueId id;
  fuzz::bindSlot(kMainSlot);
  {
    InCall in("cclGetUniqueId");
    if (cclGetUniqueId(&id) != cclSuccess) {
      tally.problem(context() + ": cclGetUniqueId failed: " + cclGetLastError(nullptr));
      return;
    }
  }
  const IdLayout mine = layoutOf(id);
  IdLayout previous = haveLast ? layoutOf(*last) : mine;
  if (!haveLast) previous.secret[0] ^= 0x5a;  // no earlier init yet: the same id, another secret
  t = makeTrial(g, &previous);
  t.id = id;
  t.layout = mine;
  *last = id;

  SilentListener ring(mine.root);
  Attacker attacker(t, ring);
  std::vector<RankResult> res(t.n);
  std::unique_ptr<Flood> flood;
  for (const Plan& p : t.plans)
    if (p.kind == Attack::kFlood && !flood) flood = std::make_unique<Flood>(mine.root, p.connections);
  t.knownPorts = fuzz::listeningPorts();
  attacker.start();
  std::vector<std::thread> ranks;
  for (int r = 0; r < t.n; ++r)
    ranks.emplace_back([&, r] {
      fuzz::bindSlot(r);
      std::this_thread::sleep_for(std::chrono::milliseconds(t.joinMs[r]));
      const auto began = Clock::now();
      {
        InCall in("cclCommInitRank");
        res[r].rc = cclCommInitRank(&res[r].comm, t.n, id, r);
      }
      res[r].seconds = std::chrono::duration<double>(Clock::now() - began).count();
      if (res[r].rc != cclSuccess) res[r].message = cclGetLastError(nullptr);
    });
  for (auto& th : ranks) th.join();
  attacker.stop();
  tally.inputs += attacker.connections() + (flood ? static_cast<uint64_t>(flood->held()) : 0);
  flood.reset();

  const std::string what = describe(t);
  const bool secretless =
      std::none_of(t.plans.begin(), t.plans.end(), [](const Plan& p) { return mayStopInit(p.kind); });
  int ok = 0;
  for (const RankResult& r : res) ok += r.rc == cclSuccess ? 1 : 0;
  for (int r = 0; r < t.n; ++r) {
    const RankResult& x = res[r];
    if (x.rc == cclSuccess) continue;
    tally.errors += 1;
    if (static_cast<int>(x.rc) < 0 || static_cast<int>(x.rc) >= cclNumResults)
      tally.problem(context() + ": rank " + std::to_string(r) + " init returned " + std::to_string(x.rc));
    if (x.message.size() < 8 || x.message.compare(0, 3, "ccl") != 0)
      tally.problem(context() + ": rank " + std::to_string(r) + " failed without a clear message: '" + x.message + "'");
  }
  if (ok > 0 && ok < t.n) {
    std::string why;
    for (int r = 0; r < t.n; ++r)
      if (res[r].rc != cclSuccess) why += " rank " + std::to_string(r) + ": " + res[r].message;
    tally.problem(context() + ": " + std::to_string(ok) + " of " + std::to_string(t.n) +
                  " ranks made a communicator, the others failed (" + what + ")" + why);
  }
  // A rank's init takes well under a second after the last rank joined (they join within
  // one); attacks without the secret must not hold one up until its deadline (past which it
  // may or may not still succeed).
  double held = 0;
  for (const RankResult& r : res) held = std::max(held, r.seconds);
  if (ok == t.n && secretless && held >= 0.9 * fuzz::cclTimeoutSeconds())
    tally.problem(context() + ": attacks without the secret held a rank's init up for " + std::to_string(held) +
                  " s, to its deadline (" + what + ")");
  if (ok == 0 && secretless) {
    tally.problem(context() + ": attacks without the secret stopped the init (" + what +
                  "): rank 0: " + res[0].message);
  }
  if (ok == t.n) {
    // Every rank in its place, and an allreduce over exactly these ranks.
    const uint64_t salt = g.next();
    std::vector<std::string> bad(t.n);
    std::vector<std::thread> check;
    for (int r = 0; r < t.n; ++r)
      check.emplace_back([&, r] {
        fuzz::bindSlot(r);
        int rank = -1, count = -1;
        cclCommUserRank(res[r].comm, &rank);
        cclCommCount(res[r].comm, &count);
        if (rank != r || count != t.n) {
          bad[r] = "rank " + std::to_string(r) + " is rank " + std::to_string(rank) + " of " + std::to_string(count);
          return;
        }
        std::vector<int64_t> in(257), out(257, -1);
        for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int64_t>(mix(salt, i) % 1000) * (r + 1);
        cclResult_t rc;
        {
          InCall inCall("cclAllReduce");
          rc = cclAllReduce(in.data(), out.data(), in.size(), cclInt64, cclSum, res[r].comm, nullptr);
        }
        if (rc != cclSuccess) {
          bad[r] = std::string("allreduce failed: ") + cclGetLastError(nullptr);
          return;
        }
        const int64_t ranksSum = static_cast<int64_t>(t.n) * (t.n + 1) / 2;
        for (size_t i = 0; i < in.size(); ++i)
          if (out[i] != static_cast<int64_t>(mix(salt, i) % 1000) * ranksSum) {
            bad[r] = "allreduce gave a wrong sum: a rank is missing or a stranger joined";
            return;
          }
      });
    for (auto& th : check) th.join();
    for (int r = 0; r < t.n; ++r)
      if (!bad[r].empty()) tally.problem(context() + ": " + bad[r] + " (" + what + ")");
    for (const RankResult& r : res) cclCommDestroy(r.comm);
    tally.completed += t.n;
  } else {
    for (const RankResult& r : res)
      if (r.comm) cclCommDestroy(r.comm);
  }
  double slowest = 0;
  for (const RankResult& r : res) slowest = std::max(slowest, r.seconds);
  const std::string summary = what + (ok == t.n ? " init ok" : " init failed (" + res[0].message + ")") + " in " +
                              std::to_string(slowest).substr(0, 5) + " s";
  std::fprintf(stderr, "trial %llu: %s\n", static_cast<unsigned long long>(trialNo.load()), summary.c_str());
  fuzz::emitLine(kKind, trialNo, tally, summary);
}

}  // namespace

int main(int argc, char** argv) {
  const fuzz::Options opt = fuzz::parseOptions(argc, argv, "--trials", 10);
  setenv("CCL_TIMEOUT", "3", 0);
  setenv("CCL_DEBUG", "NONE", 0);
  seedValue = opt.seed;
  fuzz::installCrashReport(kKind, &trialNo);
  fuzz::startWatchdog(kKind, &tally, &trialNo, std::chrono::milliseconds(1000 * (fuzz::cclTimeoutSeconds() + 5)),
                      context);
  Rng g(opt.seed);
  const auto start = Clock::now();
  bool allOk = true;
  cclUniqueId last{};
  for (uint64_t i = 0;; ++i) {
    if (opt.count && i >= opt.count) break;
    if (opt.seconds > 0 && std::chrono::duration<double>(Clock::now() - start).count() >= opt.seconds) break;
    trialNo = i;
    tally.reset();
    runTrial(g, &last, i > 0);
    allOk = allOk && tally.ok();
  }
  return allOk ? 0 : 1;
}
