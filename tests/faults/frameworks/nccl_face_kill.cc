// SPDX-License-Identifier: BSD-3-Clause
// Fault trial: one rank of a 4-process NCCL program on ccl's NCCL face dies (SIGKILL) while
// every rank loops over ncclAllReduce, ncclBroadcast, ncclAllGather and ncclReduceScatter
// of random sizes on host memory. The program is written as for NVIDIA's NCCL (nccl.h only,
// linked against the drop-in libnccl.so.2, NEEDED libnccl.so.2) and handles the fault as an
// NCCL user does: a call that returns an error ends the loop, then
// ncclCommGetAsyncError is read and ncclCommAbort frees the communicator. The contract
// checked: every survivor's call returns an error (and the async error reports one) within
// CCL_TIMEOUT + 5 s of the kill, ncclCommAbort returns ncclSuccess, and the process exits
// normally; none hangs or dies of a signal; every call that returned ncclSuccess, before
// or after the kill, gave the right values (integer-valued data, exact). Why: NCCL programs
// (PyTorch's ProcessGroupNCCL among them) rely on exactly this to notice a dead peer and
// tear down instead of hanging until an outside watchdog kills the job.
//
//   nccl_face_kill --trials N --seed S [--ranks 4] [--max-count ELEMENTS]
//       [--timeout SECONDS (sets CCL_TIMEOUT; default: CCL_TIMEOUT or 10)] [--signal kill|stop]
//
// --signal stop stops the victim (SIGSTOP) instead: a peer that hangs rather than dies; the
// survivors' calls then fail when CCL_TIMEOUT passes without progress ("nccl_face_stop").
// --after shrink: the survivors go on instead ("nccl_face_shrink"), as ProcessGroupNCCL's
// shrink does: told which rank was lost (by their launcher: here the parent, on the command
// line), each calls ncclCommShrink with that rank excluded and NCCL_SHRINK_ABORT, checks
// three all-reduces on the smaller communicator, destroys it and aborts the failed one.
// The build's run path finds the drop-in (<build>/src/nccl/dropin); a copy elsewhere needs
// that folder on LD_LIBRARY_PATH. The program refuses to run on another libnccl.so.2.
// The parent makes each trial's id (its rendezvous service serves the ranks) and starts
// the ranks as processes of this program (fork and exec, --rank R); they report through a
// pipe each and end by returning from main. One JSON line per trial on stdout (the shape
// of tests/faults); exit status 0 when every trial is ok, 1 otherwise.
#include <errno.h>
#include <nccl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "nccl/nccl_2_30.h"

namespace {

double now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// What a rank tells the parent; one write each (smaller than PIPE_BUF, so never torn).
struct Report {
  enum Kind : int32_t { kProgress, kWrong, kError, kAborted, kShrunk };
  int32_t kind = kProgress;
  int32_t code = 0;       // kError: the call's result; kAborted: ncclCommAbort's; kShrunk: the first failure's
  int32_t asyncCode = 0;  // kError: ncclCommGetAsyncError's answer
  int32_t asyncCall = 0;  // kError: ncclCommGetAsyncError's own result
  int64_t iteration = 0;
  double t = 0;  // CLOCK_MONOTONIC, shared by the processes of one host
  char text[400] = {};
};
static_assert(sizeof(Report) < PIPE_BUF);

enum Collective { kAllReduce, kBroadcast, kAllGather, kReduceScatter, kCollectives };
const char* const kNames[] = {"ncclAllReduce", "ncclBroadcast", "ncclAllGather", "ncclReduceScatter"};

// One iteration's call, the same on every rank: drawn from the trial's seed and the
// iteration only.
struct Call {
  Collective what;
  size_t count;  // elements per rank (the recvcount of a reduce-scatter)
  ncclDataType_t type;
  ncclRedOp_t op;
  int root;
};

Call callOf(uint64_t seed, int trial, int64_t iteration, int nranks, size_t maxCount) {
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(trial),
                    static_cast<uint32_t>(iteration), static_cast<uint32_t>(iteration >> 32)};
  std::mt19937_64 rng(seq);
  Call c;
  c.what = static_cast<Collective>(rng() % kCollectives);
  // Sizes spread over every scale from 1 element to maxCount (log-uniform).
  const double logMax = std::log2(static_cast<double>(maxCount));
  c.count = std::clamp<size_t>(static_cast<size_t>(std::exp2(std::uniform_real_distribution<double>(0, logMax)(rng))),
                               1, maxCount);
  c.type = rng() % 2 ? ncclInt32 : ncclFloat32;
  c.op = rng() % 2 ? ncclSum : ncclMax;
  c.root = static_cast<int>(rng() % static_cast<uint64_t>(nranks));
  return c;
}

// Rank r's element i of iteration `it`: small integers, so float32 sums are exact.
int32_t valueOf(int rank, int64_t it, size_t i) {
  return static_cast<int32_t>((static_cast<uint64_t>(rank) * 7919 + static_cast<uint64_t>(it) * 104729 + i * 31) %
                              1009);
}

void fill(void* buf, ncclDataType_t type, int rank, int64_t it, size_t offset, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const int32_t v = valueOf(rank, it, offset + i);
    if (type == ncclInt32)
      static_cast<int32_t*>(buf)[i] = v;
    else
      static_cast<float*>(buf)[i] = static_cast<float>(v);
  }
}

double elementAt(const void* buf, ncclDataType_t type, size_t i) {
  return type == ncclInt32 ? static_cast<const int32_t*>(buf)[i] : static_cast<const float*>(buf)[i];
}

// The reduction of every rank's element `i` (exact in double and in the call's type).
double reduced(const Call& c, int nranks, int64_t it, size_t i) {
  double acc = c.op == ncclSum ? 0 : valueOf(0, it, i);
  for (int r = 0; r < nranks; ++r)
    acc = c.op == ncclSum ? acc + valueOf(r, it, i) : std::max<double>(acc, valueOf(r, it, i));
  return acc;
}

void tell(int fd, const Report& r) {
  const char* p = reinterpret_cast<const char*>(&r);
  size_t left = sizeof r;
  while (left > 0) {
    const ssize_t n = write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) _exit(4);  // the parent is gone
    p += n;
    left -= static_cast<size_t>(n);
  }
}

// --after shrink: the survivors' communicator without `lost`, checked with three all-reduces
// of integers (this rank's place among the survivors renumbered as NCCL's shrink does).
Report shrinkAndCheck(ncclComm_t comm, int rank, int nranks, int lost) {
  Report rep;
  rep.kind = Report::kShrunk;
  ncclComm_t small = nullptr;
  int excluded = lost;
  ncclResult_t r = ncclCommShrink(comm, &excluded, 1, &small, nullptr, NCCL_SHRINK_ABORT);
  const int want = rank < lost ? rank : rank - 1;
  int got = -1, count = 0;
  if (r == ncclSuccess && (ncclCommUserRank(small, &got) != ncclSuccess ||
                           ncclCommCount(small, &count) != ncclSuccess || got != want || count != nranks - 1)) {
    snprintf(rep.text, sizeof rep.text, "the shrunk communicator has this rank as %d of %d, not %d of %d", got, count,
             want, nranks - 1);
    r = ncclInternalError;
  } else if (r != ncclSuccess) {
    snprintf(rep.text, sizeof rep.text, "ncclCommShrink returned %s: %s", ncclGetErrorString(r),
             ncclGetLastError(comm));
  }
  std::vector<int32_t> buf(1000);
  for (int64_t it = 1000000; it < 1000003 && r == ncclSuccess; ++it) {
    fill(buf.data(), ncclInt32, want, it, 0, buf.size());
    r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclInt32, ncclSum, small, nullptr);
    if (r != ncclSuccess) {
      snprintf(rep.text, sizeof rep.text, "ncclAllReduce on the shrunk communicator returned %s: %s",
               ncclGetErrorString(r), ncclGetLastError(small));
      break;
    }
    const Call sum{kAllReduce, buf.size(), ncclInt32, ncclSum, 0};
    for (size_t i = 0; i < buf.size(); ++i)
      if (buf[i] != reduced(sum, nranks - 1, it, i)) {
        snprintf(rep.text, sizeof rep.text, "an all-reduce on the shrunk communicator gave %d at %zu, not %g", buf[i],
                 i, reduced(sum, nranks - 1, it, i));
        r = ncclInternalError;
        break;
      }
  }
  if (small) ncclCommDestroy(small);
  rep.code = r;
  rep.t = now();
  return rep;
}

// One rank: loops until a call fails, then handles the failure as an NCCL user would and
// returns from main (`lost` >= 0: it shrinks past that rank first). Exit status: 0 (handled,
// every checked result right), 1 (a wrong result), 2 (init failed), 3 (ncclCommAbort failed),
// 5 (the exec failed), 6 (the shrink or a call after it failed).
int rankMain(int rank, int nranks, const ncclUniqueId& id, uint64_t seed, int trial, size_t maxCount, int fd,
             int lost) {
  ncclComm_t comm = nullptr;
  Report rep;
  if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) {
    rep.kind = Report::kError;
    rep.code = -1;
    rep.t = now();
    snprintf(rep.text, sizeof rep.text, "ncclCommInitRank failed: %s", ncclGetLastError(nullptr));
    tell(fd, rep);
    return 2;
  }
  const size_t maxElems = maxCount * static_cast<size_t>(nranks);
  std::vector<int32_t> sendBuf(maxElems), recvBuf(maxElems);
  bool wrong = false;
  for (int64_t it = 0;; ++it) {
    const Call c = callOf(seed, trial, it, nranks, maxCount);
    const size_t n = c.count;
    void* sb = sendBuf.data();
    void* rb = recvBuf.data();
    const size_t total = c.what == kAllGather ? n * static_cast<size_t>(nranks) : n;
    std::fill(recvBuf.begin(), recvBuf.begin() + static_cast<ptrdiff_t>(total), -1);  // no valid value
    ncclResult_t r = ncclSuccess;
    switch (c.what) {
      case kAllReduce:
        fill(sb, c.type, rank, it, 0, n);
        r = ncclAllReduce(sb, rb, n, c.type, c.op, comm, nullptr);
        break;
      case kBroadcast:
        fill(sb, c.type, rank, it, 0, n);
        r = ncclBroadcast(sb, rb, n, c.type, c.root, comm, nullptr);
        break;
      case kAllGather:
        fill(sb, c.type, rank, it, 0, n);
        r = ncclAllGather(sb, rb, n, c.type, comm, nullptr);
        break;
      case kReduceScatter:
        fill(sb, c.type, rank, it, 0, n * static_cast<size_t>(nranks));
        r = ncclReduceScatter(sb, rb, n, c.type, c.op, comm, nullptr);
        break;
      default:
        break;
    }
    if (r != ncclSuccess) {
      rep.kind = Report::kError;
      rep.t = now();
      rep.code = r;
      rep.iteration = it;
      snprintf(rep.text, sizeof rep.text, "%s returned %s (%d): %s", kNames[c.what], ncclGetErrorString(r), r,
               ncclGetLastError(comm));
      ncclResult_t async = ncclSuccess;
      rep.asyncCall = ncclCommGetAsyncError(comm, &async);
      rep.asyncCode = async;
      tell(fd, rep);
      Report shrunk;
      if (lost >= 0) {
        shrunk = shrinkAndCheck(comm, rank, nranks, lost);
        tell(fd, shrunk);
      }
      Report done;
      done.kind = Report::kAborted;
      done.code = ncclCommAbort(comm);
      done.t = now();
      if (done.code != ncclSuccess) snprintf(done.text, sizeof done.text, "%s", ncclGetLastError(nullptr));
      tell(fd, done);
      if (done.code != ncclSuccess) return 3;
      if (lost >= 0 && shrunk.code != ncclSuccess) return 6;
      return wrong ? 1 : 0;
    }
    // The call returned success: its values must be right.
    size_t bad = SIZE_MAX;
    double got = 0, want = 0;
    for (size_t i = 0; i < total && bad == SIZE_MAX; ++i) {
      switch (c.what) {
        case kAllReduce:
          want = reduced(c, nranks, it, i);
          break;
        case kBroadcast:
          want = valueOf(c.root, it, i);
          break;
        case kAllGather:
          want = valueOf(static_cast<int>(i / n), it, i % n);
          break;
        case kReduceScatter:
          want = reduced(c, nranks, it, static_cast<size_t>(rank) * n + i);
          break;
        default:
          break;
      }
      got = elementAt(rb, c.type, i);
      if (got != want) bad = i;
    }
    Report p;
    p.iteration = it;
    p.t = now();
    if (bad != SIZE_MAX) {
      wrong = true;
      p.kind = Report::kWrong;
      snprintf(p.text, sizeof p.text, "iteration %" PRId64 " %s of %zu %s: element %zu is %g, not %g", it,
               kNames[c.what], n, c.type == ncclInt32 ? "int32" : "float32", bad, got, want);
    }
    tell(fd, p);
  }
}

struct Options {
  int trials = 1;
  uint64_t seed = 1;
  int ranks = 4;
  int timeout = 10;
  size_t maxCount = 1 << 16;
  bool stop = false;    // --signal stop: the victim is stopped (SIGSTOP), not killed
  bool shrink = false;  // --after shrink: the survivors shrink past the victim and go on
  int lost = -1;        // rank mode, --after shrink: the victim
  // Rank mode (the parent starts the ranks so): this rank, its trial, the id and the pipe.
  int rank = -1, trial = 0, reportFd = -1;
  std::string id;
};

std::string hexOf(const ncclUniqueId& id) {
  std::string out;
  char buf[3];
  for (size_t i = 0; i < sizeof id.internal; ++i) {
    snprintf(buf, sizeof buf, "%02x", static_cast<unsigned char>(id.internal[i]));
    out += buf;
  }
  return out;
}

bool idOf(const std::string& hex, ncclUniqueId& id) {
  if (hex.size() != 2 * sizeof id.internal) return false;
  for (size_t i = 0; i < sizeof id.internal; ++i)
    id.internal[i] = static_cast<char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return true;
}

struct RankState {
  pid_t pid = 0;
  int fd = -1;
  int64_t iterations = 0;                                               // progress reports read
  bool error = false, aborted = false, exited = false, killed = false;  // killed: by the parent
  bool shrunk = false;
  Report errorReport, abortReport, shrinkReport;
  int status = 0;
  double exitTime = 0;
};

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += static_cast<char>(ch);
    } else if (ch < 0x20) {
      out += ' ';
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out + "\"";
}

const char* resultName(int r) {
  static const char* const names[] = {"ncclSuccess",       "ncclUnhandledCudaError", "ncclSystemError",
                                      "ncclInternalError", "ncclInvalidArgument",    "ncclInvalidUsage",
                                      "ncclRemoteError",   "ncclInProgress"};
  return r >= 0 && r < 8 ? names[r] : "?";
}

// Reads what the pipes hold, waiting at most `ms` for the first report.
void drain(std::vector<RankState>& ranks, int ms, int& wrong, std::string& wrongText) {
  for (int round = 0; round < 1000; ++round, ms = 0) {
    std::vector<pollfd> fds;
    std::vector<int> who;
    for (size_t r = 0; r < ranks.size(); ++r)
      if (ranks[r].fd >= 0) {
        fds.push_back({ranks[r].fd, POLLIN, 0});
        who.push_back(static_cast<int>(r));
      }
    if (fds.empty() || poll(fds.data(), fds.size(), ms) <= 0) return;
    for (size_t k = 0; k < fds.size(); ++k) {
      if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      RankState& s = ranks[static_cast<size_t>(who[k])];
      Report rep;
      size_t got = 0;
      while (got < sizeof rep) {
        const ssize_t n = read(s.fd, reinterpret_cast<char*>(&rep) + got, sizeof rep - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += static_cast<size_t>(n);
      }
      if (got < sizeof rep) {  // end of file: the rank has exited
        close(s.fd);
        s.fd = -1;
        continue;
      }
      switch (rep.kind) {
        case Report::kProgress:
          ++s.iterations;
          break;
        case Report::kWrong:
          ++s.iterations;
          if (wrong++ == 0) wrongText = "rank " + std::to_string(who[k]) + ": " + rep.text;
          break;
        case Report::kError:
          s.error = true;
          s.errorReport = rep;
          break;
        case Report::kAborted:
          s.aborted = true;
          s.abortReport = rep;
          break;
        case Report::kShrunk:
          s.shrunk = true;
          s.shrinkReport = rep;
          break;
        default:
          break;
      }
    }
  }
}

void reap(std::vector<RankState>& ranks) {
  for (auto& s : ranks) {
    if (s.exited || s.pid <= 0) continue;
    if (waitpid(s.pid, &s.status, WNOHANG) == s.pid) {
      s.exited = true;
      s.exitTime = now();
    }
  }
}

// One trial; prints its JSON line and returns whether it was ok.
bool runTrial(const Options& o, int trial) {
  std::mt19937_64 rng(o.seed * 1000003 + static_cast<uint64_t>(trial));
  const int victim = static_cast<int>(rng() % static_cast<uint64_t>(o.ranks));
  const double delay = std::uniform_real_distribution<double>(0, 0.3)(rng);  // after the warm-up
  const int warmup = 3;                                                      // iterations every rank has done

  ncclUniqueId id;
  std::vector<RankState> ranks(static_cast<size_t>(o.ranks));
  std::string problem;
  if (ncclGetUniqueId(&id) != ncclSuccess) problem = std::string("ncclGetUniqueId: ") + ncclGetLastError(nullptr);
  fflush(stdout);
  for (int r = 0; r < o.ranks && problem.empty(); ++r) {
    int p[2];
    if (pipe(p) != 0) {
      problem = "pipe failed";
      break;
    }
    const pid_t pid = fork();
    if (pid == 0) {
      // A process of its own, as a launcher starts ranks: this program again, in rank mode,
      // with the id and the report pipe's descriptor on its command line.
      close(p[0]);
      for (int q = 0; q < r; ++q) close(ranks[static_cast<size_t>(q)].fd);
      std::vector<std::string> args = {"nccl_face_kill",
                                       "--rank",
                                       std::to_string(r),
                                       "--ranks",
                                       std::to_string(o.ranks),
                                       "--report-fd",
                                       std::to_string(p[1]),
                                       "--trial",
                                       std::to_string(trial),
                                       "--seed",
                                       std::to_string(o.seed),
                                       "--max-count",
                                       std::to_string(o.maxCount),
                                       "--id",
                                       hexOf(id)};
      if (o.shrink) args.insert(args.end(), {"--victim", std::to_string(victim)});
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv("/proc/self/exe", argv.data());
      _exit(5);
    }
    close(p[1]);
    if (pid < 0) {
      close(p[0]);
      problem = "fork failed";
      break;
    }
    ranks[static_cast<size_t>(r)].pid = pid;
    ranks[static_cast<size_t>(r)].fd = p[0];
  }

  int wrong = 0;
  std::string wrongText;
  double tKill = 0;
  const double startDeadline = now() + 60;
  while (problem.empty() && tKill == 0) {
    drain(ranks, 10, wrong, wrongText);
    reap(ranks);
    const bool warm =
        std::all_of(ranks.begin(), ranks.end(), [&](const RankState& s) { return s.iterations >= warmup; });
    if (std::any_of(ranks.begin(), ranks.end(), [](const RankState& s) { return s.error || s.exited; })) {
      problem = "a rank failed or exited before the fault was injected";
    } else if (now() > startDeadline) {
      problem = "the ranks did not start within 60 s";
    } else if (warm) {
      const double at = now() + delay;
      while (now() < at) drain(ranks, 1, wrong, wrongText);
      kill(ranks[static_cast<size_t>(victim)].pid, o.stop ? SIGSTOP : SIGKILL);
      tKill = now();
    }
  }
  // Survivors: an error by CCL_TIMEOUT + 5 s, an exit by CCL_TIMEOUT + 15 s (ncclCommAbort
  // may wait a few seconds for a stopped peer's endpoints). A stopped victim is killed below.
  const double errorDeadline = o.timeout + 5.0, exitDeadline = (tKill > 0 ? tKill : now()) + o.timeout + 15.0;
  // Without a fault (a problem before it) nothing is waited for: every rank is stopped.
  auto survivorsLeft = [&] {
    for (int r = 0; r < o.ranks && problem.empty(); ++r)
      if (r != victim && ranks[static_cast<size_t>(r)].pid > 0 && !ranks[static_cast<size_t>(r)].exited) return true;
    return false;
  };
  while (survivorsLeft() && now() < exitDeadline) {
    drain(ranks, 10, wrong, wrongText);
    reap(ranks);
  }
  int hangs = 0;
  for (int r = 0; r < o.ranks; ++r) {
    RankState& s = ranks[static_cast<size_t>(r)];
    if (s.pid <= 0 || s.exited) continue;
    if (r != victim && problem.empty()) ++hangs;
    kill(s.pid, SIGKILL);
    waitpid(s.pid, &s.status, 0);
    s.exited = s.killed = true;
  }
  for (int i = 0; i < 20; ++i) drain(ranks, 0, wrong, wrongText);  // reports written before exiting
  for (auto& s : ranks)
    if (s.fd >= 0) close(s.fd);

  int errors = 0, crashes = 0, survivors = 0;
  std::vector<double> tError;
  std::string detail, firstError;
  auto note = [&](const std::string& what) {
    if (!detail.empty()) detail += "; ";
    detail += what;
  };
  for (int r = 0; r < o.ranks; ++r) {
    if (r == victim) continue;
    ++survivors;
    const RankState& s = ranks[static_cast<size_t>(r)];
    const std::string who = "rank " + std::to_string(r);
    const double t = s.error ? s.errorReport.t - tKill : -1;
    if (s.error && tKill > 0) tError.push_back(t);
    if (s.killed) {
      note(who + (s.error ? " returned an error but did not exit" : " neither returned an error nor exited"));
    } else if (WIFSIGNALED(s.status)) {
      ++crashes;
      note(who + " died of signal " + std::to_string(WTERMSIG(s.status)));
    } else if (s.exitTime == 0) {
      note(who + (s.error ? " returned an error but did not exit" : " neither returned an error nor exited"));
    } else if (!s.error) {
      note(who + " exited with status " + std::to_string(WEXITSTATUS(s.status)) + " without an error");
    } else if (t > errorDeadline) {
      note(who + " got its error " + std::to_string(t) + " s after the kill");
    } else if (s.errorReport.asyncCall != ncclSuccess || s.errorReport.asyncCode == ncclSuccess) {
      note(who + ": ncclCommGetAsyncError returned " + resultName(s.errorReport.asyncCall) + " and reported " +
           resultName(s.errorReport.asyncCode) + " after " + s.errorReport.text);
    } else if (!s.aborted || s.abortReport.code != ncclSuccess) {
      note(who + ": ncclCommAbort " +
           (s.aborted ? std::string("returned ") + resultName(s.abortReport.code) + ": " + s.abortReport.text
                      : std::string("did not return")));
    } else if (o.shrink && (!s.shrunk || s.shrinkReport.code != ncclSuccess)) {
      note(who + (s.shrunk ? std::string(": ") + s.shrinkReport.text : std::string(" did not report its shrink")));
    } else if (!WIFEXITED(s.status) || (WEXITSTATUS(s.status) != 0 && WEXITSTATUS(s.status) != 1)) {
      note(who + " exited with status " + std::to_string(WEXITSTATUS(s.status)));
    } else {
      ++errors;  // a wrong result before the error (status 1) is counted in `wrong`
      if (firstError.empty())
        firstError =
            who + ": " + s.errorReport.text + "; async " + resultName(s.errorReport.asyncCode) +
            "; ncclCommAbort ok after " + std::to_string(s.abortReport.t - s.errorReport.t).substr(0, 5) + " s" +
            (o.shrink ? "; ncclCommShrink and 3 checked all-reduces on " + std::to_string(o.ranks - 1) + " ranks in " +
                            std::to_string(s.shrinkReport.t - s.errorReport.t).substr(0, 5) + " s"
                      : "");
    }
  }
  if (wrong > 0) detail = wrongText + (detail.empty() ? "" : "; " + detail);
  const bool ok = problem.empty() && errors == survivors && hangs == 0 && crashes == 0 && wrong == 0;
  std::string line = "victim rank " + std::to_string(victim) + ": ";
  if (!problem.empty()) {
    line += problem;
    for (int r = 0; r < o.ranks; ++r)  // the first rank's own words, when it reported any
      if (ranks[static_cast<size_t>(r)].error) {
        line += "; rank " + std::to_string(r) + ": " + ranks[static_cast<size_t>(r)].errorReport.text;
        break;
      }
  } else if (ok)
    line += firstError;
  else
    line += detail;
  std::string times;
  for (double t : tError) {
    char buf[32];
    snprintf(buf, sizeof buf, "%s%.3f", times.empty() ? "" : ", ", t);
    times += buf;
  }
  printf(
      "{\"kind\": \"%s\", \"trial\": %d, \"ok\": %s, \"survivors\": %d, \"errors\": %d, \"completed\": "
      "0, \"hangs\": %d, \"wrong\": %d, \"crashes\": %d, \"t_error\": [%s], \"detail\": %s}\n",
      o.shrink ? "nccl_face_shrink"
      : o.stop ? "nccl_face_stop"
               : "nccl_face_kill",
      trial, ok ? "true" : "false", survivors, errors, hangs, wrong, crashes, times.c_str(),
      jsonString(line.substr(0, 600)).c_str());
  fflush(stdout);
  return ok;
}

bool parse(int argc, char** argv, Options& o) {
  if (const char* t = getenv("CCL_TIMEOUT")) o.timeout = atoi(t) > 0 ? atoi(t) : o.timeout;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return false;
    const char* v = argv[++i];
    if (a == "--trials")
      o.trials = atoi(v);
    else if (a == "--seed")
      o.seed = strtoull(v, nullptr, 10);
    else if (a == "--ranks")
      o.ranks = atoi(v);
    else if (a == "--timeout")
      o.timeout = atoi(v);
    else if (a == "--max-count")
      o.maxCount = strtoull(v, nullptr, 10);
    else if (a == "--signal" && (std::string(v) == "kill" || std::string(v) == "stop"))
      o.stop = std::string(v) == "stop";
    else if (a == "--after" && (std::string(v) == "abort" || std::string(v) == "shrink"))
      o.shrink = std::string(v) == "shrink";
    else if (a == "--victim")
      o.lost = atoi(v);
    else if (a == "--rank")
      o.rank = atoi(v);
    else if (a == "--trial")
      o.trial = atoi(v);
    else if (a == "--report-fd")
      o.reportFd = atoi(v);
    else if (a == "--id")
      o.id = v;
    else
      return false;
  }
  return o.trials > 0 && o.ranks >= 2 && o.timeout > 0 && o.maxCount > 0 && !(o.shrink && o.stop);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    fprintf(stderr,
            "usage: nccl_face_kill --trials N --seed S [--signal kill|stop] [--after abort|shrink (kill only)] "
            "[--ranks 4] [--timeout SECONDS] [--max-count ELEMENTS]\n");
    return 2;
  }
  // The face must be ccl's: NVIDIA's library would not serve host memory.
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess || version != CCL_NCCL_ABI_VERSION_CODE) {
    fprintf(stderr, "nccl_face_kill: libnccl.so.2 is not ccl's drop-in (version %d); put it on LD_LIBRARY_PATH\n",
            version);
    return 2;
  }
  if (o.rank >= 0) {  // one rank of a trial; its exit status says how it ended (see rankMain)
    ncclUniqueId id;
    if (!idOf(o.id, id) || o.reportFd < 0) return 2;
    // The trial's stdout carries JSON lines only; UCX logs its warnings (those of an abort
    // that abandons sends to a dead peer among them) on stdout.
    dup2(STDERR_FILENO, STDOUT_FILENO);
    return rankMain(o.rank, o.ranks, id, o.seed, o.trial, o.maxCount, o.reportFd, o.lost);
  }
  setenv("CCL_TIMEOUT", std::to_string(o.timeout).c_str(), 1);  // the ranks inherit it
  signal(SIGPIPE, SIG_IGN);
  bool ok = true;
  for (int trial = 0; trial < o.trials; ++trial) ok &= runTrial(o, trial);
  return ok ? 0 : 1;
}
