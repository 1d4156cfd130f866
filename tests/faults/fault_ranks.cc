// SPDX-License-Identifier: BSD-3-Clause
// Ranks as processes (or threads) under faults and load, through the public API only: what a
// user of the library sees. One binary, four modes, each printing one JSON line per trial
// (tests/faults/README.md has the fields):
//   kill, stop  N ranks as processes over the default transport loop random checked
//               collectives (every kind, 8 B to --max-bytes, uncompressed or compressed, flat
//               or on two emulated nodes); the parent sends SIGKILL or SIGSTOP to a random
//               rank at a random moment. Every survivor must return an error within
//               CCL_TIMEOUT + 5 s (or complete correctly) and revoke its communicator; once
//               the lost rank is dead, the survivors shrink it to a working communicator
//               (cclCommShrink, CCL_SHRINK_ALIVE: no id handed out). A stopped rank that is
//               resumed afterwards must fail too, not hang. --victims K: K random ranks are
//               lost, each at its own random moment (kind "kill2", "stop2", ... for K > 1).
//   abort       the same with ranks as threads of one process: a random rank's communicator
//               is aborted from another thread while that rank waits inside a random call.
//   soak        N ranks loop random collectives (kinds, sizes, codecs, error feedback, groups,
//               host streams) for --calls and --minutes, each result checked; RSS and open
//               descriptors sampled after a warm-up and at the end.
//   churn       N ranks create, split, check and destroy (or abort) communicators --cycles
//               times; RSS and open descriptors sampled the same way.
// Inputs are small positive integers, so uncompressed sums are exact and a compressed
// result is checked against cclCodecErrorBound; a value outside it counts as wrong.
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dirent.h>
#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ccl/ccl.h"

namespace {

// ---- Clock, memory and descriptors ----

double now() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);  // one clock for every process of the machine
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// What a process holds: resident memory, heap in use (malloc's own count: a leak shows here
// even when freed blocks keep the resident size up) and open descriptors. Freed heap is
// handed back first (glibc keeps it in per-thread arenas otherwise).
struct Footprint {
  long rssKib = -1, heapKib = -1;
  int fds = -1;
};

Footprint measure() {
  malloc_trim(0);
  Footprint f;
  long pages = 0, resident = 0;
  if (FILE* s = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(s, "%ld %ld", &pages, &resident) == 2) f.rssKib = resident * (sysconf(_SC_PAGESIZE) / 1024);
    std::fclose(s);
  }
  const struct mallinfo2 m = mallinfo2();
  f.heapKib = static_cast<long>((m.uordblks + m.hblkhd) / 1024);
  if (DIR* d = opendir("/proc/self/fd")) {
    int n = 0;
    while (readdir(d)) ++n;
    closedir(d);
    f.fds = n - 3;  // ".", ".." and the directory's own descriptor
  }
  return f;
}

// The larger of each figure (over ranks).
Footprint maxOf(const Footprint& a, const Footprint& b) {
  return {std::max(a.rssKib, b.rssKib), std::max(a.heapKib, b.heapKib), std::max(a.fds, b.fds)};
}

// ---- Options ----

struct Options {
  std::string mode;
  int ranks = 4;
  int trials = 4;
  uint64_t seed = 1;
  int timeout = 5;  // CCL_TIMEOUT, seconds
  size_t maxBytes = size_t{64} << 20;
  long calls = 1000;             // soak
  double minutes = 0;            // soak: at least this long as well
  int cycles = 100;              // churn
  int victims = 1;               // kill, stop: ranks lost per trial
  std::vector<int> victimRanks;  // kill, stop: these ranks lost in every trial (else drawn)
  int patientRank = -1;          // kill, stop: this rank's calls time out at 3 x --timeout
  bool requireNamed = false;     // kill, stop: a survivor's error that does not say a lost rank is lost fails the trial
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(
      stderr,
      "fault_ranks: %s\nusage: fault_ranks kill|stop|abort|revoke|soak|churn [--ranks N] [--trials N] [--seed S] "
      "[--timeout SECONDS] [--max-bytes B] [--calls N] [--minutes M] [--cycles N] [--victims K] "
      "[--victim-ranks R,R,...] [--patient-rank R] [--require-named 0|1]\n",
      why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  if (argc < 2) usage("no mode");
  Options o;
  o.mode = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(("no value after " + a).c_str());
    const char* v = argv[++i];
    if (a == "--ranks")
      o.ranks = std::atoi(v);
    else if (a == "--trials")
      o.trials = std::atoi(v);
    else if (a == "--seed")
      o.seed = std::strtoull(v, nullptr, 10);
    else if (a == "--timeout")
      o.timeout = std::atoi(v);
    else if (a == "--max-bytes")
      o.maxBytes = std::strtoull(v, nullptr, 10);
    else if (a == "--calls")
      o.calls = std::atol(v);
    else if (a == "--minutes")
      o.minutes = std::atof(v);
    else if (a == "--cycles")
      o.cycles = std::atoi(v);
    else if (a == "--victims")
      o.victims = std::atoi(v);
    else if (a == "--victim-ranks")
      for (const char* p = v;; ++p) {
        char* end = nullptr;
        o.victimRanks.push_back(static_cast<int>(std::strtol(p, &end, 10)));
        if (end == p || (*end != ',' && *end != '\0')) usage("--victim-ranks takes ranks separated by commas");
        if (*end == '\0') break;
        p = end;
      }
    else if (a == "--patient-rank")
      o.patientRank = std::atoi(v);
    else if (a == "--require-named")
      o.requireNamed = std::atoi(v) != 0;
    else
      usage(("unknown option " + a).c_str());
  }
  if (o.ranks < 2 || o.ranks > 16) usage("--ranks must be 2..16");
  if (o.timeout < 1) usage("--timeout must be >= 1");
  if (!o.victimRanks.empty()) {
    o.victims = static_cast<int>(o.victimRanks.size());
    for (size_t i = 0; i < o.victimRanks.size(); ++i)
      if (o.victimRanks[i] < 0 || o.victimRanks[i] >= o.ranks ||
          std::count(o.victimRanks.begin(), o.victimRanks.begin() + static_cast<long>(i), o.victimRanks[i]) != 0)
        usage("--victim-ranks must name distinct ranks below --ranks");
  }
  if (o.victims < 1 || o.victims >= o.ranks) usage("--victims must be 1..ranks-1");
  if (o.patientRank < -1 || o.patientRank >= o.ranks) usage("--patient-rank must be below --ranks");
  return o;
}

// ---- Checked collectives ----

// Every kind a user can call; send/recv as a ring exchange in one group.
enum Kind { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kReduce, kAlltoAll, kGather, kScatter, kRing, kKinds };
const char* kKindNames[kKinds] = {"allreduce", "reducescatter", "allgather", "broadcast", "reduce",
                                  "alltoall",  "gather",        "scatter",   "sendrecv"};
bool compressible(Kind k) { return k != kReduce && k != kGather && k != kScatter; }

// Element i of rank r's input in call `call`: a small positive integer, so sums over up to 16
// ranks, maxima and minima are exact in fp32 and int32.
float input(int r, uint64_t call, size_t i) {
  return static_cast<float>(1 + (i * 7 + static_cast<size_t>(r) * 13 + call * 5) % 17);
}

struct Call {
  Kind kind = kAllReduce;
  size_t count = 0;  // elements per rank (the collective's count argument)
  cclDataType_t dtype = cclFloat32;
  cclRedOp_t op = cclSum;
  int root = 0;
  cclCodec_t codec = cclCodecNone;
  bool feedback = false;  // a residual error-feedback handle (allreduce only)
  bool stream = false;    // on a host stream
  int inGroup = 1;        // allreduces issued together in one group (soak)
};

// A random call, the same on every rank (same generator state).
Call randomCall(std::mt19937_64& g, int nranks, size_t maxBytes, bool soak) {
  Call c;
  c.kind = static_cast<Kind>(g() % kKinds);
  const bool wide = c.kind == kReduceScatter || c.kind == kAllGather || c.kind == kAlltoAll || c.kind == kGather ||
                    c.kind == kScatter;
  // Log-uniform bytes from 8 up to maxBytes for the largest buffer of the call.
  const double lo = std::log(8.0), hi = std::log(static_cast<double>(maxBytes) / (wide ? nranks : 1));
  const double bytes = std::exp(lo + (hi - lo) * static_cast<double>(g() % 1000000) / 1e6);
  c.count = std::max<size_t>(2, static_cast<size_t>(bytes) / 4);
  c.root = static_cast<int>(g() % static_cast<uint64_t>(nranks));
  const bool reduces = c.kind == kAllReduce || c.kind == kReduceScatter || c.kind == kReduce;
  static const cclRedOp_t ops[] = {cclSum, cclMax, cclMin, cclAvg};
  c.op = reduces ? ops[g() % 4] : cclSum;
  c.dtype = g() % 5 == 0 ? cclInt32 : cclFloat32;
  if (c.dtype == cclInt32 && c.op == cclAvg) c.op = cclSum;
  static const cclCodec_t codecs[] = {cclCodecInt8,  cclCodecInt4,  cclCodecFp8E4m3,
                                      cclCodecMxfp4, cclCodecNvfp4, cclCodecTopK};
  if (compressible(c.kind) && c.dtype == cclFloat32 && g() % 3 == 0) {
    c.codec = codecs[g() % (sizeof(codecs) / sizeof(codecs[0]))];
    if (reduces) c.op = cclSum;
  }
  if (soak) {
    c.feedback = c.kind == kAllReduce && c.codec != cclCodecNone && g() % 2 == 0;
    c.stream = g() % 4 == 0;
    c.inGroup = c.kind == kAllReduce && g() % 5 == 0 ? 2 : 1;
  }
  return c;
}

size_t inputCount(const Call& c, int n) {
  switch (c.kind) {
    case kReduceScatter:
    case kAlltoAll:
    case kScatter:
      return c.count * static_cast<size_t>(n);
    default:
      return c.count;
  }
}
size_t outputCount(const Call& c, int n) {
  switch (c.kind) {
    case kAllGather:
    case kAlltoAll:
    case kGather:
      return c.count * static_cast<size_t>(n);
    default:
      return c.count;
  }
}

// What rank `me` must hold after call `seq`, element i; NAN where nothing is defined.
double expected(const Call& c, int me, int n, uint64_t seq, size_t i) {
  auto reduce = [&](size_t at) {
    double acc = c.op == cclMax ? -1e300 : c.op == cclMin ? 1e300 : 0;
    for (int r = 0; r < n; ++r) {
      const double v = input(r, seq, at);
      acc = c.op == cclMax ? std::max(acc, v) : c.op == cclMin ? std::min(acc, v) : acc + v;
    }
    if (c.op == cclAvg) acc /= n;
    if (c.op == cclAvg && c.dtype == cclInt32) acc = std::trunc(acc);
    return acc;
  };
  const size_t k = c.count;
  switch (c.kind) {
    case kAllReduce:
      return reduce(i);
    case kReduceScatter:
      return reduce(static_cast<size_t>(me) * k + i);
    case kAllGather:
      return input(static_cast<int>(i / k), seq, i % k);
    case kBroadcast:
      return input(c.root, seq, i);
    case kReduce:
      return me == c.root ? reduce(i) : NAN;
    case kAlltoAll:
      return input(static_cast<int>(i / k), seq, static_cast<size_t>(me) * k + i % k);
    case kGather:
      return me == c.root ? input(static_cast<int>(i / k), seq, i % k) : NAN;
    case kScatter:
      return input(c.root, seq, static_cast<size_t>(me) * k + i);
    case kRing:
      return input((me + n - 1) % n, seq, i);
    default:
      return NAN;
  }
}

// How far a compressed element may be from `want` (cclCodecErrorBound with generous
// round trips: the algorithm's plus error feedback's); exact otherwise.
struct Tolerance {
  cclCompression_t comp = CCL_COMPRESSION_INITIALIZER;
  bool lossy = false;
  double absMax = 0;
  int quantizations = 0;
  double at(double want) const {
    if (!lossy) return std::fabs(want) * 1e-6;
    double b = 0;
    if (cclCodecErrorBound(&comp, std::fabs(want), absMax, quantizations, &b) != cclSuccess) return 0;
    return b * (1 + 1e-5) + absMax * 1e-6;
  }
};

// One rank's communicator and what it runs. Buffers live across calls (soak: a feedback
// handle needs the same buffer each time).
struct Rank {
  int rank = 0, nranks = 0;
  cclComm_t comm = nullptr;
  cclStream_t stream = nullptr;
  cclFeedback_t feedback = nullptr;
  std::vector<float> in, out, in2, out2;
  long wrong = 0;
  std::string firstWrong;
  std::string error;  // the failed call and the library's message
  cclResult_t code = cclSuccess;
};

bool ok(Rank& rk, cclResult_t r, const char* what) {
  if (r == cclSuccess) return true;
  if (rk.code == cclSuccess) {
    rk.code = r;
    const char* last = cclGetLastError(rk.comm);
    rk.error = std::string(what) + ": " + cclGetErrorString(r) + ": " + (last ? last : "");
  }
  return false;
}

void fill(std::vector<float>& buf, size_t n, const Call& c, int r, uint64_t seq) {
  buf.resize(std::max<size_t>(n, 1));
  if (c.dtype == cclInt32) {
    auto* p = reinterpret_cast<int32_t*>(buf.data());
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<int32_t>(input(r, seq, i));
  } else {
    for (size_t i = 0; i < n; ++i) buf[i] = input(r, seq, i);
  }
}

// Issues one call (and its group partner, its stream wait); false on an error.
bool issue(Rank& rk, const Call& c, uint64_t seq) {
  const int n = rk.nranks, me = rk.rank;
  fill(rk.in, inputCount(c, n), c, me, seq);
  rk.out.assign(std::max<size_t>(outputCount(c, n), 1), -1.0f);
  cclCompression_t comp = CCL_COMPRESSION_INITIALIZER;
  comp.codec = c.codec;
  comp.keepRatio = 0.25;
  const cclCompression_t* cp = c.codec == cclCodecNone ? nullptr : &comp;
  cclStream_t s = c.stream ? rk.stream : nullptr;
  const void* in = rk.in.data();
  void* out = rk.out.data();
  cclComm_t comm = rk.comm;
  cclResult_t r = cclSuccess;
  switch (c.kind) {
    case kAllReduce:
      if (c.inGroup > 1) {
        rk.in2 = rk.in;
        rk.out2.assign(rk.out.size(), -1.0f);
        if (!ok(rk, cclGroupStart(), "cclGroupStart")) return false;
        r = cclAllReduceEx(in, out, c.count, c.dtype, c.op, comm, s, cp, c.feedback ? rk.feedback : nullptr);
        const cclResult_t r2 =
            cclAllReduceEx(rk.in2.data(), rk.out2.data(), c.count, c.dtype, c.op, comm, s, cp, nullptr);
        const cclResult_t r3 = cclGroupEnd();
        if (!ok(rk, r, "cclAllReduceEx in a group") || !ok(rk, r2, "cclAllReduceEx in a group") ||
            !ok(rk, r3, "cclGroupEnd"))
          return false;
      } else {
        r = cclAllReduceEx(in, out, c.count, c.dtype, c.op, comm, s, cp, c.feedback ? rk.feedback : nullptr);
      }
      break;
    case kReduceScatter:
      r = cclReduceScatterEx(in, out, c.count, c.dtype, c.op, comm, s, cp, nullptr);
      break;
    case kAllGather:
      r = cclAllGatherEx(in, out, c.count, c.dtype, comm, s, cp, nullptr);
      break;
    case kBroadcast:
      r = cclBroadcastEx(in, out, c.count, c.dtype, c.root, comm, s, cp);
      break;
    case kReduce:
      r = cclReduce(in, out, c.count, c.dtype, c.op, c.root, comm, s);
      break;
    case kAlltoAll:
      r = cclAlltoAllEx(in, out, c.count, c.dtype, comm, s, cp);
      break;
    case kGather:
      r = cclGather(in, out, c.count, c.dtype, c.root, comm, s);
      break;
    case kScatter:
      r = cclScatter(in, out, c.count, c.dtype, c.root, comm, s);
      break;
    case kRing: {
      if (!ok(rk, cclGroupStart(), "cclGroupStart")) return false;
      const cclResult_t a = cclSendEx(in, c.count, c.dtype, (me + 1) % n, comm, s, cp, nullptr);
      const cclResult_t b = cclRecvEx(out, c.count, c.dtype, (me + n - 1) % n, comm, s, cp);
      r = cclGroupEnd();
      if (!ok(rk, a, "cclSendEx") || !ok(rk, b, "cclRecvEx")) return false;
      break;
    }
    default:
      break;
  }
  if (!ok(rk, r, kKindNames[c.kind])) return false;
  if (s && !ok(rk, cclHostStreamSynchronize(s), "cclHostStreamSynchronize")) return false;
  return true;
}

// Compares the output with what the call must give; counts and names the first wrong one.
void check(Rank& rk, const Call& c, uint64_t seq) {
  const int n = rk.nranks;
  Tolerance tol;
  if (c.codec != cclCodecNone) {
    tol.lossy = true;
    tol.comp.codec = c.codec;
    tol.comp.keepRatio = 0.25;
    tol.quantizations = n + (c.feedback ? 2 : 0);
    for (size_t i = 0; i < outputCount(c, n); ++i) {
      const double w = expected(c, rk.rank, n, seq, i);
      if (!std::isnan(w)) tol.absMax = std::max(tol.absMax, std::fabs(w));
    }
  }
  auto compare = [&](const std::vector<float>& got) {
    for (size_t i = 0; i < outputCount(c, n); ++i) {
      const double want = expected(c, rk.rank, n, seq, i);
      if (std::isnan(want)) continue;
      const double v = c.dtype == cclInt32 ? reinterpret_cast<const int32_t*>(got.data())[i] : got[i];
      if (std::fabs(v - want) <= tol.at(want)) continue;
      if (rk.wrong++ == 0) {
        char buf[256];
        std::snprintf(buf, sizeof buf, "%s count %zu codec %s op %d: element %zu is %.9g, not %.9g", kKindNames[c.kind],
                      c.count, cclCodecName(c.codec), static_cast<int>(c.op), i, v, want);
        rk.firstWrong = buf;
      }
      return;  // one wrong call counts once
    }
  };
  compare(rk.out);
  if (c.inGroup > 1) compare(rk.out2);
}

// ---- Shared state of a process trial (mapped before fork) ----

enum State : int { kRunning = 0, kFailed = 1, kRecovered = 2, kRecoveryFailed = 3, kDone = 4 };
// How the survivors of a kill/stop trial go on: shrink the failed communicator, join a new id
// (the fault came before some survivor had a communicator to shrink), or not at all.
enum Recovery : int { kShrink = 1, kJoin = 2, kNone = 3 };

struct Slot {
  std::atomic<int> state;
  std::atomic<long> calls;
  int code;
  double errorAt;        // CLOCK_MONOTONIC when the failing call returned
  double abortSeconds;   // how long cclCommRevoke took (cclCommAbort in the thread trials)
  double shrinkSeconds;  // how long cclCommShrink took (kill and stop trials)
  bool hasComm;          // the failed rank had a communicator (its init had completed)
  long wrong;
  Footprint before, after;
  char message[2048];  // a timeout lists what it waited for before the lost rank's name
  char firstWrong[256];
};

struct Shared {
  cclUniqueId id;
  cclUniqueId recoverId;          // kJoin's
  std::atomic<int> recoverReady;  // 0 until the parent decides; then a Recovery
  bool lost[16];                  // the trial's victims
  int patientRank;                // its communicator's timeout is patientMs (-1: none)
  int patientMs;
  Slot slots[16];
  // Rank r's place among the survivors (-1: a victim).
  int survivorRank(int r) const {
    if (lost[r]) return -1;
    int below = 0;
    for (int q = 0; q < r; ++q) below += lost[q] ? 1 : 0;
    return r - below;
  }
  int lostCount(int n) const {
    int k = 0;
    for (int q = 0; q < n; ++q) k += lost[q] ? 1 : 0;
    return k;
  }
};

Shared* mapShared() {
  void* p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    std::perror("mmap");
    std::exit(2);
  }
  std::memset(p, 0, sizeof(Shared));
  return static_cast<Shared*>(p);
}

void copyText(char* dst, size_t cap, const std::string& s) {
  std::snprintf(dst, cap, "%s", s.c_str());
  for (char* p = dst; *p; ++p)
    if (*p == '"' || *p == '\\' || *p == '\n') *p = ' ';  // the JSON line stays one line
}

cclResult_t initRank(const Shared* sh, cclComm_t* comm, int n, const cclUniqueId& id, int r, bool twoNodes) {
  cclConfig_t config = CCL_CONFIG_INITIALIZER;
  const std::string host = "fault-node-" + std::to_string(r / std::max(1, n / 2));
  if (twoNodes) config.hostId = host.c_str();
  if (r == sh->patientRank) config.timeoutMs = sh->patientMs;
  return cclCommInitRankConfig(comm, n, id, r, &config);
}

// Three checked calls on the survivors' communicator rk.comm (this rank rk.rank of
// rk.nranks), which is then freed.
bool checkSurvivors(Rank& rk, std::string* why) {
  std::mt19937_64 g(99);
  for (uint64_t i = 0; i < 3; ++i) {
    Call c = randomCall(g, rk.nranks, size_t{1} << 20, false);
    if (!issue(rk, c, 1000 + i)) break;
    check(rk, c, 1000 + i);
  }
  const bool good = rk.code == cclSuccess && rk.wrong == 0;
  *why = rk.code != cclSuccess ? rk.error : rk.firstWrong;
  if (rk.code != cclSuccess)
    cclCommAbort(rk.comm);
  else
    cclCommDestroy(rk.comm);
  rk.comm = nullptr;
  return good;
}

// Forms a communicator of the survivors from a fresh `id` and checks it.
bool joinSurvivors(int n, const cclUniqueId& id, int r, std::string* why) {
  Rank rk;
  rk.rank = r;
  rk.nranks = n;
  if (!ok(rk, cclCommInitRank(&rk.comm, n, id, r), "cclCommInitRank of the survivors")) {
    *why = rk.error;
    return false;
  }
  return checkSurvivors(rk, why);
}

// Shrinks the failed communicator to the ranks whose process is alive (cclCommShrink with
// CCL_SHRINK_ALIVE: no id handed out, no message over the failed one), which this rank must
// find as rank `expected` of n, and checks it. Frees `failed`.
bool shrinkSurvivors(cclComm_t failed, int n, int expected, double* seconds, std::string* why) {
  Rank rk;
  rk.rank = expected;
  rk.nranks = n;
  const double t0 = now();
  const bool shrunk =
      ok(rk, cclCommShrink(failed, nullptr, 0, &rk.comm, nullptr, CCL_SHRINK_ALIVE), "cclCommShrink of the survivors");
  *seconds = now() - t0;
  cclCommDestroy(failed);
  if (!shrunk) {
    *why = rk.error;
    return false;
  }
  int count = 0, rank = -1;
  cclCommCount(rk.comm, &count);
  cclCommUserRank(rk.comm, &rank);
  if (count != n || rank != expected) {
    *why = "the shrunk communicator has this rank as " + std::to_string(rank) + " of " + std::to_string(count) +
           ", not " + std::to_string(expected) + " of " + std::to_string(n);
    cclCommDestroy(rk.comm);
    return false;
  }
  return checkSurvivors(rk, why);
}

// One rank process of a kill/stop trial: calls until one fails, then revokes, then shrinks to
// the survivors once the parent says the lost rank is gone (a stopped one is killed first).
[[noreturn]] void faultRank(Shared* sh, int r, int n, uint64_t seed, size_t maxBytes, bool twoNodes) {
  Slot& me = sh->slots[r];
  Rank rk;
  rk.rank = r;
  rk.nranks = n;
  std::mt19937_64 g(seed);
  if (ok(rk, initRank(sh, &rk.comm, n, sh->id, r, twoNodes), "cclCommInitRank")) {
    // Memory and descriptors of a working communicator, before any call: what the process
    // holds again once the failed one and the survivors' one are destroyed.
    me.before = measure();
    for (uint64_t seq = 0; seq < 100000; ++seq) {
      const Call c = randomCall(g, n, maxBytes, false);
      if (!issue(rk, c, seq)) break;
      check(rk, c, seq);
      me.calls.fetch_add(1);
    }
  }
  me.wrong = rk.wrong;
  copyText(me.firstWrong, sizeof me.firstWrong, rk.firstWrong);
  if (rk.code == cclSuccess) {  // never failed: nobody was lost after all
    cclCommDestroy(rk.comm);
    me.state = kDone;
    _exit(0);
  }
  me.errorAt = now();
  me.code = rk.code;
  copyText(me.message, sizeof me.message, rk.error);
  const double t0 = now();
  cclComm_t failed = rk.comm;
  if (failed) cclCommRevoke(failed, 0);
  me.abortSeconds = now() - t0;
  rk.comm = nullptr;
  rk = Rank{};  // the call buffers go too
  me.hasComm = failed != nullptr;
  me.state = kFailed;
  // The parent says once every survivor has failed (or given up) and the lost rank is dead:
  // shrink, or (when the fault came before some survivor had a communicator) join a new id.
  const double deadline = now() + 120;
  while (sh->recoverReady.load() == 0 && now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const int how = sh->recoverReady.load();
  if ((how != kShrink && how != kJoin) || sh->lost[r]) {
    if (failed) cclCommDestroy(failed);
    _exit(0);
  }
  std::string why;
  const int newRank = sh->survivorRank(r), survivors = n - sh->lostCount(n);
  bool good = false;
  if (how == kShrink) {
    good = shrinkSurvivors(failed, survivors, newRank, &me.shrinkSeconds, &why);
  } else {
    if (failed) cclCommDestroy(failed);
    good = joinSurvivors(survivors, sh->recoverId, newRank, &why);
  }
  if (!good) copyText(me.message, sizeof me.message, "after the fault, the survivors' communicator: " + why);
  me.after = measure();
  me.state = good ? kRecovered : kRecoveryFailed;
  _exit(0);
}

// ---- JSON lines ----

// The JSON lines' stream: the process's original stdout. Everything else written to stdout
// (UCX prints its warnings there) goes to stderr instead, so the lines stay parseable.
FILE* jsonOut = stdout;

struct Line {
  std::string kind;
  int trial = 0;
  int survivors = 0, errors = 0, completed = 0, hangs = 0, wrong = 0, crashes = 0;
  std::vector<double> tError;
  Footprint before, after;
  long inputs = -1;
  int named = -1;  // kill and stop trials: survivors whose error names the lost rank
  bool good = true;
  std::string detail;
  void print() const {
    std::string t;
    for (double x : tError) t += (t.empty() ? "" : ", ") + std::to_string(x);
    std::fprintf(jsonOut,
                 "{\"kind\": \"%s\", \"trial\": %d, \"ok\": %s, \"survivors\": %d, \"errors\": %d, \"completed\": %d, "
                 "\"hangs\": %d, \"wrong\": %d, \"crashes\": %d, \"t_error\": [%s]",
                 kind.c_str(), trial, good ? "true" : "false", survivors, errors, completed, hangs, wrong, crashes,
                 t.c_str());
    if (before.rssKib >= 0)
      std::fprintf(jsonOut,
                   ", \"rss_before\": %ld, \"rss_after\": %ld, \"heap_before\": %ld, \"heap_after\": %ld, "
                   "\"fds_before\": %d, \"fds_after\": %d",
                   before.rssKib, after.rssKib, before.heapKib, after.heapKib, before.fds, after.fds);
    if (inputs >= 0) std::fprintf(jsonOut, ", \"inputs\": %ld", inputs);
    if (named >= 0) std::fprintf(jsonOut, ", \"named\": %d", named);
    std::string d = detail;
    std::replace(d.begin(), d.end(), '"', '\'');
    std::fprintf(jsonOut, ", \"detail\": \"%s\"}\n", d.c_str());
    std::fflush(jsonOut);
  }
};

// waitpid with a deadline; returns false (and leaves the child) when it did not end.
bool waitUntil(pid_t pid, double deadline, int* status) {
  while (true) {
    const pid_t w = waitpid(pid, status, WNOHANG);
    if (w == pid) return true;
    if (w < 0) return false;
    if (now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// One kill or stop trial of N processes.
// Whether an error message names rank `r` ("rank 3 is gone", "from rank 3", "recv from 3 ...").
bool namesRank(const char* message, int r) {
  const std::string m = message, want[] = {"rank " + std::to_string(r), "from " + std::to_string(r)};
  for (const std::string& w : want)
    for (size_t at = m.find(w); at != std::string::npos; at = m.find(w, at + 1)) {
      const size_t end = at + w.size();
      if (end == m.size() || !std::isdigit(static_cast<unsigned char>(m[end]))) return true;
    }
  return false;
}

// Whether an error message says that rank `r` was lost, in the words the library uses for a
// rank it found lost ("rank 3 is gone"), stopped ("rank 3 sends no pulses"), or that never
// came during the init ("rank 3 never joined", "rank 3, the previous one in the ring, never
// connected"); stricter than namesRank, which also takes a wait on the rank ("recv from 3")
// that any error may list.
bool declaresLost(const char* message, int r) {
  const std::string m = message, who = "rank " + std::to_string(r);
  for (const char* words : {" is gone", " sends no pulses", ", the previous one in the ring, never"})
    if (m.find(who + words) != std::string::npos) return true;
  // "timeout: rank 3 never joined", "timeout: ranks 1, 3 never joined"
  const size_t end = m.find(" never joined"), begin = m.rfind("timeout: rank", end);
  if (end == std::string::npos || begin == std::string::npos) return false;
  const std::string list = m.substr(begin, end - begin) + ",";
  return list.find(" " + std::to_string(r) + ",") != std::string::npos;
}

Line processTrial(const Options& o, int trial, std::mt19937_64& g) {
  const bool stop = o.mode == "stop";
  const int n = o.ranks;
  Line line;
  line.kind = std::string(stop ? "stop" : "kill");
  line.trial = trial;
  Shared* sh = mapShared();
  if (cclGetUniqueId(&sh->id) != cclSuccess) {
    line.good = false;
    line.detail = std::string("cclGetUniqueId: ") + cclGetLastError(nullptr);
    munmap(sh, sizeof(Shared));
    return line;
  }
  sh->patientRank = o.patientRank;
  sh->patientMs = 3000 * o.timeout;
  const uint64_t callSeed = g();
  const bool twoNodes = n >= 4 && g() % 2 == 0;
  // Each victim: its rank, the calls it completes first, and up to 20 ms more.
  struct Victim {
    int rank;
    long atCall;
    int delayUs;
  };
  std::vector<Victim> victims;
  for (int i = 0; i < o.victims; ++i) {
    int rank = static_cast<int>(g() % static_cast<uint64_t>(n));
    if (!o.victimRanks.empty()) rank = o.victimRanks[static_cast<size_t>(i)];
    while (sh->lost[rank]) rank = (rank + 1) % n;
    sh->lost[rank] = true;
    victims.push_back({rank, static_cast<long>(g() % 12), static_cast<int>(g() % 20000)});
  }
  auto isVictim = [&](int r) { return sh->lost[r]; };
  if (o.victims > 1) line.kind += std::to_string(o.victims);
  line.kind += twoNodes ? ".2nodes" : ".flat";
  std::vector<pid_t> pids(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const pid_t p = fork();
    if (p == 0) faultRank(sh, r, n, callSeed, o.maxBytes, twoNodes);
    pids[static_cast<size_t>(r)] = p;
  }
  // The faults, in turn: once a victim has completed its calls (or failed, after an earlier
  // victim's loss), after its delay. Times count from the first.
  const double startDeadline = now() + 120;
  double faultAt = 0;
  for (const Victim& vi : victims) {
    const Slot& v = sh->slots[vi.rank];
    while (v.calls.load() < vi.atCall && v.state.load() == kRunning && now() < startDeadline)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    std::this_thread::sleep_for(std::chrono::microseconds(vi.delayUs));
    if (faultAt == 0) faultAt = now();
    kill(pids[static_cast<size_t>(vi.rank)], stop ? SIGSTOP : SIGKILL);
  }
  // Every survivor must fail (or finish) within CCL_TIMEOUT + 5 s of the last fault.
  const double deadline = now() + o.timeout + 5;
  line.survivors = n - o.victims;
  line.named = 0;
  for (int r = 0; r < n; ++r) {
    if (isVictim(r)) continue;
    while (sh->slots[r].state.load() == kRunning && now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::string firstError;
  double worst = 0;
  for (int r = 0; r < n; ++r) {
    if (isVictim(r)) continue;
    const Slot& s = sh->slots[r];
    const int st = s.state.load();
    if (st == kRunning) {
      int status = 0;
      if (waitUntil(pids[static_cast<size_t>(r)], now(), &status) && WIFSIGNALED(status)) {
        ++line.crashes;
        line.detail += "rank " + std::to_string(r) + " died of signal " + std::to_string(WTERMSIG(status)) + "; ";
      } else {
        ++line.hangs;
        line.detail += "rank " + std::to_string(r) + " still in its call " + std::to_string(o.timeout + 5) +
                       " s after the fault; ";
      }
      continue;
    }
    if (st == kDone)
      ++line.completed;
    else {
      ++line.errors;
      const auto names = o.requireNamed ? declaresLost : namesRank;
      if (std::any_of(victims.begin(), victims.end(), [&](const Victim& vi) { return names(s.message, vi.rank); }))
        ++line.named;
      else if (line.detail.find("names no rank") == std::string::npos)  // the first such error, whole
        line.detail += "rank " + std::to_string(r) + "'s error names no rank: " + s.message + "; ";
      line.tError.push_back(std::max(0.0, s.errorAt - faultAt));
      worst = std::max(worst, s.abortSeconds);
      if (firstError.empty()) firstError = "rank " + std::to_string(r) + ": " + s.message;
    }
    line.wrong += s.wrong > 0 ? 1 : 0;
    if (s.wrong > 0) line.detail += "rank " + std::to_string(r) + " wrong: " + s.firstWrong + "; ";
  }
  // A stopped rank resumed now must fail too (its peers are gone), not hang.
  if (stop) {
    for (const Victim& vi : victims) kill(pids[static_cast<size_t>(vi.rank)], SIGCONT);
    const double resumedBy = now() + o.timeout + 5;
    for (const Victim& vi : victims) {
      const Slot& v = sh->slots[vi.rank];
      while (v.state.load() == kRunning && now() < resumedBy) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      if (v.state.load() == kRunning) {
        ++line.hangs;
        line.detail += "stopped rank " + std::to_string(vi.rank) + ", resumed, still ran " +
                       std::to_string(o.timeout + 5) + " s later; ";
      }
    }
  }
  for (const Victim& vi : victims) {
    kill(pids[static_cast<size_t>(vi.rank)], SIGKILL);
    waitpid(pids[static_cast<size_t>(vi.rank)], nullptr, 0);
  }
  // The survivors that failed shrink to a new communicator (all of them, or it cannot form),
  // now that the lost rank is dead.
  bool allHaveComm = true;
  for (int r = 0; r < n; ++r)
    if (!isVictim(r) && !sh->slots[r].hasComm) allHaveComm = false;
  if (line.hangs != 0 || line.crashes != 0 || line.completed != 0) {
    sh->recoverReady = kNone;
  } else if (allHaveComm) {
    sh->recoverReady = kShrink;
  } else {
    sh->recoverReady = cclGetUniqueId(&sh->recoverId) == cclSuccess ? kJoin : kNone;
  }
  int recovered = 0;
  double worstShrink = 0;
  for (int r = 0; r < n; ++r) {
    if (isVictim(r)) continue;
    int status = 0;
    if (!waitUntil(pids[static_cast<size_t>(r)], now() + o.timeout + 60, &status)) {
      kill(pids[static_cast<size_t>(r)], SIGKILL);
      waitpid(pids[static_cast<size_t>(r)], nullptr, 0);
      ++line.hangs;
      line.detail += "rank " + std::to_string(r) + " did not finish recovering; ";
      continue;
    }
    if (WIFSIGNALED(status)) {
      ++line.crashes;
      line.detail += "rank " + std::to_string(r) + " died of signal " + std::to_string(WTERMSIG(status)) + "; ";
    }
    const Slot& s = sh->slots[r];
    if (s.state.load() == kRecovered)
      ++recovered;
    else if (s.state.load() == kRecoveryFailed)
      line.detail += "rank " + std::to_string(r) + ": " + s.message + "; ";
    worstShrink = std::max(worstShrink, s.shrinkSeconds);
    line.before = maxOf(line.before, s.before);
    line.after = maxOf(line.after, s.after);
  }
  const bool needRecovery = line.errors == line.survivors;
  line.good = line.hangs == 0 && line.crashes == 0 && line.wrong == 0 && (!needRecovery || recovered == line.errors) &&
              (!o.requireNamed || line.named == line.errors);
  if (needRecovery && recovered != line.errors)
    line.detail += std::to_string(recovered) + " of " + std::to_string(line.errors) + " survivors recovered; ";
  std::string head;
  for (const Victim& vi : victims)
    head += "victim rank " + std::to_string(vi.rank) + " after " + std::to_string(vi.atCall) + " calls; ";
  char took[120];
  std::snprintf(took, sizeof took, "revoke took up to %.3f s, shrink up to %.3f s; ", worst, worstShrink);
  line.detail = head + took + line.detail + firstError;
  munmap(sh, sizeof(Shared));
  return line;
}

// ---- Ranks as threads: an abort (or a revoke) from another thread ----

// `revoke`: cclCommRevoke instead of cclCommAbort; the victim's handle then stays valid, and
// the victim destroys it itself.
Line threadTrial(const Options& o, int trial, std::mt19937_64& g, bool revoke) {
  const int n = o.ranks;
  Line line;
  line.kind = revoke ? "revoke.threads" : "abort.threads";
  line.trial = trial;
  line.survivors = n - 1;
  cclUniqueId id{};
  if (cclGetUniqueId(&id) != cclSuccess) {
    line.good = false;
    line.detail = "cclGetUniqueId failed";
    return line;
  }
  const uint64_t callSeed = g();
  const int victim = static_cast<int>(g() % static_cast<uint64_t>(n));
  const long atCall = static_cast<long>(g() % 12);
  g();  // the process trials' delay: the same draws keep the trials' calls alike
  std::vector<Rank> ranks(static_cast<size_t>(n));
  std::vector<std::atomic<long>> calls(static_cast<size_t>(n));
  std::vector<std::atomic<int>> state(static_cast<size_t>(n));
  std::vector<double> errorAt(static_cast<size_t>(n), 0), enteredAt(static_cast<size_t>(n), 0);
  std::atomic<cclComm_t> victimComm{nullptr};
  // The abort must find the victim inside a call: once it returns, the handle is freed and
  // no thread may pass it again (the API's rule, which TSan holds a test to). So the others
  // enter call `atCall` 200 ms late, the victim says when it enters, the abort comes 50 ms
  // after that (the victim then waits for its peers), and the victim stops after that call.
  std::atomic<bool> victimEntering{false}, abortDone{false};
  const Footprint before = measure();
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      Rank& rk = ranks[static_cast<size_t>(r)];
      rk.rank = r;
      rk.nranks = n;
      std::mt19937_64 cg(callSeed);
      if (ok(rk, cclCommInitRank(&rk.comm, n, id, r), "cclCommInitRank")) {
        if (r == victim) victimComm = rk.comm;
        for (uint64_t seq = 0; seq < 100000; ++seq) {
          const Call c = randomCall(cg, n, std::min(o.maxBytes, size_t{16} << 20), false);
          const bool faulted = static_cast<long>(seq) == atCall;
          if (faulted && r == victim) victimEntering = true;
          if (faulted && r != victim) std::this_thread::sleep_for(std::chrono::milliseconds(200));
          if (faulted) enteredAt[static_cast<size_t>(r)] = now();
          const bool issued = issue(rk, c, seq);
          if (issued) check(rk, c, seq);
          calls[static_cast<size_t>(r)].fetch_add(issued ? 1 : 0);
          if (faulted && r == victim) {
            while (!abortDone.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
            if (issued) rk.code = cclInvalidUsage, rk.error = "the call completed before the abort";
            break;
          }
          if (!issued) break;
        }
      }
      errorAt[static_cast<size_t>(r)] = now();
      // The victim's communicator was freed by the abort (a revoked one is destroyed here);
      // the others abort their own.
      if (r == victim && revoke && rk.comm) cclCommDestroy(rk.comm);
      if (r != victim && rk.comm) cclCommAbort(rk.comm);
      state[static_cast<size_t>(r)] = rk.code == cclSuccess ? kDone : kFailed;
    });
  }
  const double startDeadline = now() + 120;
  while (!victimEntering.load() && state[static_cast<size_t>(victim)].load() == kRunning && now() < startDeadline)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const double faultAt = now();
  const cclResult_t aborted = !victimEntering.load() || !victimComm.load() ? cclInternalError
                              : revoke                                     ? cclCommRevoke(victimComm.load(), 0)
                                                                           : cclCommAbort(victimComm.load());
  abortDone = true;
  const double deadline = faultAt + o.timeout + 5;
  for (int r = 0; r < n; ++r)
    while (state[static_cast<size_t>(r)].load() == kRunning && now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  std::string firstError;
  for (int r = 0; r < n; ++r) {
    const Rank& rk = ranks[static_cast<size_t>(r)];
    if (state[static_cast<size_t>(r)].load() == kRunning) {
      ++line.hangs;
      continue;
    }
    line.wrong += rk.wrong > 0 ? 1 : 0;
    if (rk.wrong > 0) line.detail += "rank " + std::to_string(r) + " wrong: " + rk.firstWrong + "; ";
    if (r == victim) continue;
    if (rk.code == cclSuccess)
      ++line.completed;
    else {
      ++line.errors;
      // From the abort, or from the rank's entering the faulted call if that came later.
      const double from = std::max(faultAt, enteredAt[static_cast<size_t>(r)]);
      line.tError.push_back(std::max(0.0, errorAt[static_cast<size_t>(r)] - from));
      if (firstError.empty()) firstError = "rank " + std::to_string(r) + ": " + rk.error;
    }
  }
  if (line.hangs > 0) {
    // A thread still blocked cannot be joined: report and leave the process.
    line.good = false;
    line.detail = std::to_string(line.hangs) + " rank threads still blocked " + std::to_string(o.timeout + 5) +
                  " s after the abort; " + line.detail;
    line.print();
    _exit(1);
  }
  for (std::thread& t : threads) t.join();
  ranks.clear();  // the call buffers
  // The survivors (threads) form a new communicator and check it.
  cclUniqueId again{};
  int recovered = 0;
  if (cclGetUniqueId(&again) == cclSuccess) {
    std::vector<std::thread> ts;
    std::atomic<int> good{0};
    std::vector<std::string> why(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      if (r == victim) continue;
      ts.emplace_back([&, r] {
        if (joinSurvivors(n - 1, again, r < victim ? r : r - 1, &why[static_cast<size_t>(r)])) good.fetch_add(1);
      });
    }
    for (std::thread& t : ts) t.join();
    recovered = good.load();
    for (const std::string& w : why)
      if (!w.empty()) line.detail += "recovery: " + w + "; ";
  }
  line.before = before;
  line.after = measure();
  line.good = aborted == cclSuccess && line.wrong == 0 && recovered == n - 1;
  char head[160];
  std::snprintf(head, sizeof head, "victim rank %d after %ld calls; %s returned %s; ", victim, atCall,
                revoke ? "cclCommRevoke" : "cclCommAbort", cclGetErrorString(aborted));
  line.detail = head + line.detail + firstError;
  return line;
}

// ---- Load: soak and churn ----

struct LoadSlot {
  std::atomic<long> progress;  // calls or cycles done
  std::atomic<int> state;
  long wrong;
  Footprint warm, end;
  char message[2048];  // a timeout lists what it waited for before the lost rank's name
  char firstWrong[256];
};
struct LoadShared {
  cclUniqueId id;
  LoadSlot slots[16];
};

// A soak rank: random calls (with the soak's extras) until both --calls and --minutes are
// reached; every 1,000th call a barrier-free agreement: all ranks draw the same call
// sequence, and the stop decision is an allreduce of "want to stop" flags, so all stop
// together.
[[noreturn]] void soakRank(LoadShared* sh, int r, int n, const Options& o) {
  LoadSlot& me = sh->slots[r];
  Rank rk;
  rk.rank = r;
  rk.nranks = n;
  std::mt19937_64 g(o.seed);
  const double until = now() + o.minutes * 60;
  bool good = ok(rk, cclCommInitRank(&rk.comm, n, sh->id, r), "cclCommInitRank") &&
              ok(rk, cclHostStreamCreate(&rk.stream), "cclHostStreamCreate") &&
              ok(rk, cclFeedbackCreate(&rk.feedback, cclFeedbackResidual, 0, 0), "cclFeedbackCreate");
  const long warm = std::max<long>(1, o.calls / 10);
  for (uint64_t seq = 0; good; ++seq) {
    if (seq % 1000 == 999) {
      float stop = static_cast<long>(seq) + 1 >= o.calls && now() >= until ? 1.0f : 0.0f;
      good = ok(rk, cclAllReduce(&stop, &stop, 1, cclFloat32, cclMin, rk.comm, nullptr), "the soak's stop vote");
      if (!good || stop == 1.0f) break;
    }
    const Call c = randomCall(g, n, size_t{1} << 20, true);
    // A feedback handle follows one tensor: a call with feedback on a different count
    // resets it (documented), which the bound below allows for.
    good = issue(rk, c, seq);
    if (!good) break;
    check(rk, c, seq);
    me.progress.fetch_add(1);
    if (static_cast<long>(seq) + 1 == warm) {
      me.warm = measure();
    }
  }
  me.end = measure();
  me.wrong = rk.wrong;
  copyText(me.firstWrong, sizeof me.firstWrong, rk.firstWrong);
  copyText(me.message, sizeof me.message, rk.error);
  if (rk.feedback) cclFeedbackDestroy(rk.feedback);
  if (rk.stream) cclHostStreamDestroy(rk.stream);
  if (rk.comm) cclCommDestroy(rk.comm);
  me.state = good ? kDone : kFailed;
  _exit(0);
}

// A churn rank: per cycle a split (random colours and keys) checked with an allreduce and
// destroyed or aborted; every 10th cycle also a whole new communicator from an id rank 0
// makes and broadcasts over the parent.
[[noreturn]] void churnRank(LoadShared* sh, int r, int n, const Options& o) {
  LoadSlot& me = sh->slots[r];
  Rank parent;
  parent.rank = r;
  parent.nranks = n;
  std::mt19937_64 g(o.seed);
  bool good = ok(parent, cclCommInitRank(&parent.comm, n, sh->id, r), "cclCommInitRank");
  const int warm = std::max(1, o.cycles / 10);
  for (int cycle = 0; good && cycle < o.cycles; ++cycle) {
    const int colours = 1 + static_cast<int>(g() % 3);
    std::vector<int> colour(static_cast<size_t>(n)), key(static_cast<size_t>(n));
    for (int q = 0; q < n; ++q) colour[static_cast<size_t>(q)] = static_cast<int>(g() % colours);
    for (int q = 0; q < n; ++q) key[static_cast<size_t>(q)] = static_cast<int>(g() % 100);
    const bool abortIt = g() % 4 == 0;
    Rank child;
    child.rank = 0;
    good =
        ok(parent,
           cclCommSplit(parent.comm, colour[static_cast<size_t>(r)], key[static_cast<size_t>(r)], &child.comm, nullptr),
           "cclCommSplit");
    if (!good) break;
    cclCommUserRank(child.comm, &child.rank);
    cclCommCount(child.comm, &child.nranks);
    if (child.nranks > 1) {
      Call c;
      c.count = 1000 + static_cast<size_t>(cycle);
      good = issue(child, c, static_cast<uint64_t>(cycle));
      if (good) check(child, c, static_cast<uint64_t>(cycle));
      parent.wrong += child.wrong;
      if (!good) parent.error = child.error;
    }
    // An abort is not collective: one right after this rank's call returned would fail peers
    // still finishing theirs, so an aborting cycle waits for every rank first. A destroy
    // needs no wait: this rank's part of the call is done.
    if (abortIt) {
      float one = 1;
      good = good && ok(parent, cclAllReduce(&one, &one, 1, cclFloat32, cclSum, parent.comm, nullptr), "barrier");
      cclCommAbort(child.comm);
    } else {
      cclCommDestroy(child.comm);
    }
    if (good && cycle % 10 == 9) {
      cclUniqueId id{};
      if (r == 0) good = ok(parent, cclGetUniqueId(&id), "cclGetUniqueId");
      good = good && ok(parent, cclBroadcast(&id, &id, sizeof id, cclUint8, 0, parent.comm, nullptr), "cclBroadcast");
      Rank fresh;
      fresh.rank = r;
      fresh.nranks = n;
      good = good && ok(fresh, cclCommInitRank(&fresh.comm, n, id, r), "cclCommInitRank (churn)");
      if (good) {
        const Call c{kAllReduce, 777};
        good = issue(fresh, c, static_cast<uint64_t>(cycle));
        if (good) check(fresh, c, static_cast<uint64_t>(cycle));
        parent.wrong += fresh.wrong;
      }
      if (!good && parent.error.empty()) parent.error = fresh.error;
      if (fresh.comm) cclCommDestroy(fresh.comm);
    }
    me.progress.fetch_add(1);
    if (cycle + 1 == warm) {
      me.warm = measure();
    }
  }
  me.end = measure();
  me.wrong = parent.wrong;
  copyText(me.firstWrong, sizeof me.firstWrong, parent.firstWrong);
  copyText(me.message, sizeof me.message, parent.error);
  if (parent.comm) cclCommDestroy(parent.comm);
  me.state = good ? kDone : kFailed;
  _exit(0);
}

// Runs a load mode's ranks; a rank without progress for CCL_TIMEOUT + 60 s is a hang.
Line loadRun(const Options& o) {
  const bool soak = o.mode == "soak";
  const int n = o.ranks;
  Line line;
  line.kind = o.mode;
  line.survivors = n;
  auto* sh = static_cast<LoadShared*>(
      mmap(nullptr, sizeof(LoadShared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (sh == MAP_FAILED) {
    std::perror("mmap");
    std::exit(2);
  }
  std::memset(static_cast<void*>(sh), 0, sizeof(LoadShared));
  if (cclGetUniqueId(&sh->id) != cclSuccess) usage("cclGetUniqueId failed");
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    const pid_t p = fork();
    if (p == 0) {
      if (soak) soakRank(sh, r, n, o);
      churnRank(sh, r, n, o);
    }
    pids.push_back(p);
  }
  long last = -1;
  double lastMove = now(), lastReport = now();
  const double start = now();
  std::vector<bool> ended(static_cast<size_t>(n), false);
  int left = n;
  while (left > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    long progress = 0;
    for (int r = 0; r < n; ++r) progress += sh->slots[r].progress.load();
    if (progress != last) last = progress, lastMove = now();
    if (now() - lastReport > 60) {
      std::fprintf(stderr, "%s: %ld %s over %d ranks after %.0f s\n", o.mode.c_str(), last / n,
                   soak ? "calls" : "cycles", n, now() - start);
      lastReport = now();
    }
    for (int r = 0; r < n; ++r) {
      int status = 0;
      if (ended[static_cast<size_t>(r)] || waitpid(pids[static_cast<size_t>(r)], &status, WNOHANG) == 0) continue;
      ended[static_cast<size_t>(r)] = true;
      --left;
      if (WIFSIGNALED(status)) {
        ++line.crashes;
        line.detail += "rank " + std::to_string(r) + " died of signal " + std::to_string(WTERMSIG(status)) + "; ";
      }
    }
    if (now() - lastMove > o.timeout + 60) {
      for (int r = 0; r < n; ++r)
        if (!ended[static_cast<size_t>(r)]) {
          ++line.hangs;
          kill(pids[static_cast<size_t>(r)], SIGKILL);
          waitpid(pids[static_cast<size_t>(r)], nullptr, 0);
        }
      line.detail += "no progress for " + std::to_string(o.timeout + 60) + " s; ";
      break;
    }
  }
  line.inputs = last / n;
  for (int r = 0; r < n; ++r) {
    const LoadSlot& s = sh->slots[r];
    if (s.state.load() == kDone)
      ++line.completed;
    else if (s.state.load() == kFailed) {
      ++line.errors;
      line.detail += "rank " + std::to_string(r) + ": " + s.message + "; ";
    }
    if (s.wrong > 0) {
      line.wrong += static_cast<int>(s.wrong);
      line.detail += "rank " + std::to_string(r) + " wrong: " + s.firstWrong + "; ";
    }
    line.before = maxOf(line.before, s.warm);
    line.after = maxOf(line.after, s.end);
  }
  char head[160];
  std::snprintf(head, sizeof head,
                "%ld %s per rank in %.0f s; RSS and descriptors after the first tenth and at the end; ", line.inputs,
                soak ? "calls" : "cycles", now() - start);
  line.detail = head + line.detail;
  line.good = line.completed == n && line.wrong == 0 && line.hangs == 0 && line.crashes == 0;
  munmap(sh, sizeof(LoadShared));
  return line;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  // Every wait of the library ends by CCL_TIMEOUT; the trials measure against it.
  setenv("CCL_TIMEOUT", std::to_string(o.timeout).c_str(), 1);
  signal(SIGPIPE, SIG_IGN);
  const int json = dup(STDOUT_FILENO);
  if (json >= 0 && dup2(STDERR_FILENO, STDOUT_FILENO) >= 0) jsonOut = fdopen(json, "w");
  if (!jsonOut) jsonOut = stdout;
  std::mt19937_64 g(o.seed);
  bool all = true;
  if (o.mode == "kill" || o.mode == "stop" || o.mode == "abort" || o.mode == "revoke") {
    for (int t = 0; t < o.trials; ++t) {
      const bool threads = o.mode == "abort" || o.mode == "revoke";
      const Line line = threads ? threadTrial(o, t, g, o.mode == "revoke") : processTrial(o, t, g);
      line.print();
      all = all && line.good;
    }
  } else if (o.mode == "soak" || o.mode == "churn") {
    const Line line = loadRun(o);
    line.print();
    all = line.good;
  } else {
    usage(("unknown mode " + o.mode).c_str());
  }
  return all ? 0 : 1;
}
