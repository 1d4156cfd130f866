// SPDX-License-Identifier: BSD-3-Clause
#include "collectives/exec/executor.h"

#include <sched.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "collectives/exec/compute_steps.h"
#include "collectives/exec/reduce_kernels.h"
#include "common/dtype.h"
#include "common/error.h"

namespace ccl::coll {
namespace {

bool isCodecStep(StepKind k) { return encodesStream(k) || decodesStream(k); }

struct Inflight {
  StepId step;
  std::unique_ptr<transport::Request> request;
  bool landed = false;  // a kRecvReduce received into its landing, to be reduced from there
};

// A kRecvReduce's sink: each piece the transport hands over is reduced into the step's
// destination at once (dst = local op piece), so the message is read once, where it lies.
class ReduceSink final : public transport::Sink {
 public:
  void bind(const Plan& plan, const Step& s, const Buffers& b) {
    dst_ = bufferAt(b, s.dst);
    local_ = bufferAt(b, s.src);
    dtype_ = plan.dtype;
    op_ = plan.op;
    es_ = dataTypeSize(plan.dtype);
  }
  void take(size_t offset, const void* data, size_t bytes) override {
    reduce(dst_ + offset, local_ + offset, data, bytes / es_, dtype_, op_);
  }

 private:
  char* dst_ = nullptr;
  const char* local_ = nullptr;
  cclDataType_t dtype_ = cclFloat32;
  cclRedOp_t op_ = cclSum;
  size_t es_ = 1;
};

// Per-job run state: dependency counters, successor lists, the ready queue and the
// requests in flight.
class JobRun {
 public:
  // Prepares to run `job`, reusing the vectors of the previous run (no allocation once the
  // thread has run a plan this large).
  void reset(const Job& job) {
    job_ = &job;
    plan_ = job.plan;
    postSignature();
    head_ = 0;
    computeHead_ = 0;
    completed_ = 0;
    ready_.clear();
    readyCompute_.clear();
    inflight_.clear();
    deferredSends_.clear();
    deferredHead_ = 0;
    sendsInFlight_ = 0;
    lengths_.assign(plan_->lengthSlots, 0);
    const size_t n = plan_->steps.size();
    if (sinks_.size() < n) sinks_.resize(n);
    waiting_.resize(n);
    succStart_.assign(n + 1, 0);
    for (size_t i = 0; i < n; ++i) {
      const Step& s = plan_->steps[i];
      waiting_[i] = s.numDeps;
      for (uint32_t d = 0; d < s.numDeps; ++d) ++succStart_[plan_->deps[s.firstDep + d] + 1];
    }
    for (size_t i = 0; i < n; ++i) succStart_[i + 1] += succStart_[i];
    succ_.resize(succStart_[n]);
    fill_.assign(succStart_.begin(), succStart_.end() - 1);
    for (size_t i = 0; i < n; ++i) {
      const Step& s = plan_->steps[i];
      for (uint32_t d = 0; d < s.numDeps; ++d) succ_[fill_[plan_->deps[s.firstDep + d]]++] = static_cast<StepId>(i);
      if (s.numDeps == 0) makeReady(static_cast<StepId>(i));
    }
  }

  bool finished() const { return completed_ == plan_->steps.size() && sigRound_ >= sigRounds_ && !signatureInFlight(); }
  bool waitingOnTransport() const { return !inflight_.empty() || signatureInFlight(); }
  // What the job still waits for, for the timeout message: "3 of 12 steps pending; waiting
  // for recv from 1 tag 0x100003, send to 2 tag 0x5 ...".
  std::string describeWait() const {
    std::string d = std::to_string(plan_->steps.size() - completed_) + " of " + std::to_string(plan_->steps.size()) +
                    " steps pending";
    size_t shown = 0;
    for (const Inflight& f : inflight_) {
      if (shown++ == 4) {
        d += ", ...";
        break;
      }
      const Step& s = plan_->steps[f.step];
      char buf[96];
      std::snprintf(buf, sizeof(buf), "%s %s %d tag 0x%llx", shown == 1 ? "; waiting for" : ",",
                    s.kind == StepKind::kSend ? "send to" : "recv from", s.peer,
                    static_cast<unsigned long long>(job_->tagBase | s.tag));
      d += buf;
    }
    return d;
  }

  // Cancels what is still in flight (after a failure); the buffers are then free.
  void drop() {
    inflight_.clear();
    for (auto& s : signatureSends()) s.reset();
    sigRecv_.reset();
  }

  // Starts every ready send and receive, then runs ready compute steps, one at a time
  // while the transport has work in flight: between two of them the caller progresses the
  // transport, and a send a compute step makes ready is posted before the next one runs, so
  // the link is fed while a long run of encodes is still queued.
  bool startReady() {
    bool moved = startTransport();
    while (computeHead_ < readyCompute_.size()) {
      start(readyCompute_[computeHead_++]);
      moved = true;
      startTransport();
      if (waitingOnTransport()) break;
    }
    return moved;
  }

  bool pollRequests() {
    bool moved = pollSignature();
    for (size_t i = 0; i < inflight_.size();) {
      bool done = false;
      try {
        done = inflight_[i].request->test();
      } catch (const Error& e) {
        // A message longer than its receive: its sender called the operation otherwise, as
        // for one of another size (checkReceived), and every rank's call fails as for that.
        if (e.code() == cclInvalidUsage && isReceive(plan_->steps[inflight_[i].step].kind) &&
            !job_->transport->abortState().aborted)
          job_->transport->abortMismatch();
        throw;
      }
      if (!done) {
        ++i;
        continue;
      }
      StepId id = inflight_[i].step;
      checkReceived(id, *inflight_[i].request);
      if (inflight_[i].landed) sinks_[id].take(0, at(plan_->steps[id].in), plan_->steps[id].bytes);
      if (plan_->steps[id].kind == StepKind::kSend) {
        --sendsInFlight_;
        if (deferredHead_ < deferredSends_.size()) ready_.push_back(deferredSends_[deferredHead_++]);
      }
      inflight_[i] = std::move(inflight_.back());
      inflight_.pop_back();
      complete(id);
      moved = true;
    }
    return moved;
  }

  void checkAbort() const {
    if (job_->aborted && job_->aborted->load(std::memory_order_relaxed))
      throw Error(cclInvalidUsage, "the communicator was aborted during the operation");
  }

 private:
  bool startTransport() {
    bool moved = false;
    while (head_ < ready_.size()) {
      StepId id = ready_[head_++];
      if (plan_->steps[id].kind == StepKind::kSend && sendsInFlight_ >= kMaxSendsInFlight) {
        deferredSends_.push_back(id);
        continue;
      }
      start(id);
      moved = true;
    }
    return moved;
  }

  void makeReady(StepId id) {
    const StepKind k = plan_->steps[id].kind;
    (k == StepKind::kSend || isReceive(k) ? ready_ : readyCompute_).push_back(id);
  }

  // The call's digest reaches every rank in ceil(log2 n) rounds of a dissemination
  // exchange: in round k each rank sends the least and the greatest digest it has seen to
  // rank + 2^k and takes in those of rank - 2^k, so after the last round it has seen every
  // rank's. Comparing only the previous rank's let a rank whose neighbours called as it did
  // end a call that a rank further round made otherwise, with a result mixing the two,
  // whenever the ranks that saw the difference were slow to abort. Each round is one small
  // message, sent as soon as the previous round's came in, beside the plan's steps.
  void postSignature() {
    for (auto& s : signatureSends()) s.reset();
    sigRecv_.reset();
    sigRound_ = sigRounds_ = 0;
    const transport::Transport& t = *job_->transport;
    if (job_->signature == 0 || t.size() < 2) return;
    sigRounds_ = std::bit_width(static_cast<unsigned>(t.size() - 1));  // ceil(log2 n)
    seen_ = {job_->signature, job_->signature};
    postSignatureRound();
  }

  void postSignatureRound() {
    transport::Transport& t = *job_->transport;
    const int n = t.size(), hop = 1 << sigRound_;
    const uint64_t tag = job_->tagBase | tags::signatureTag(sigRound_);
    const auto round = static_cast<size_t>(sigRound_);
    sent_[round] = seen_;
    sigSends_[round] = t.isend((t.rank() + hop) % n, tag, &sent_[round], sizeof(DigestRange));
    sigRecv_ = t.irecv((t.rank() - hop % n + n) % n, tag, &peerSeen_, sizeof(peerSeen_));
  }

  // The sends of this job's rounds (the polls look at no more than those).
  std::span<std::unique_ptr<transport::Request>> signatureSends() {
    return std::span(sigSends_).first(static_cast<size_t>(sigRounds_));
  }
  bool signatureInFlight() const {
    return sigRecv_ ||
           std::any_of(sigSends_.begin(), sigSends_.begin() + sigRounds_, [](const auto& s) { return s != nullptr; });
  }

  bool pollSignature() {
    bool moved = false;
    for (auto& s : signatureSends()) {
      if (s && s->test()) {
        s.reset();
        moved = true;
      }
    }
    if (sigRecv_ && sigRecv_->test()) {
      const bool whole = sigRecv_->receivedBytes() == sizeof(peerSeen_);
      sigRecv_.reset();
      moved = true;
      transport::Transport& t = *job_->transport;
      const int previous = (t.rank() + t.size() - 1) % t.size();
      if (sigRound_ == 0 && (!whole || peerSeen_.lo != job_->signature || peerSeen_.hi != job_->signature)) {
        t.abortMismatch();
        throw Error(cclInvalidUsage, "rank " + std::to_string(previous) +
                                         " called this operation with another count, type, op, root or codec "
                                         "than this rank; the communicator is aborted");
      }
      seen_.lo = std::min(seen_.lo, peerSeen_.lo);
      seen_.hi = std::max(seen_.hi, peerSeen_.hi);
      if (!whole || seen_.lo != seen_.hi) {
        t.abortMismatch();
        throw Error(cclInvalidUsage,
                    "another rank called this operation with another count, type, op, root or codec than this rank "
                    "and its neighbours; the communicator is aborted");
      }
      if (++sigRound_ < sigRounds_) postSignatureRound();
    }
    return moved;
  }

  char* at(Ref r) const { return bufferAt(job_->buffers, r); }

  void start(StepId id) {
    const Step& s = plan_->steps[id];
    if (const StepFault fault = stepFault.load(std::memory_order_relaxed)) fault(*job_, s);
    switch (s.kind) {
      case StepKind::kSend: {
        size_t bytes = s.slot == kNoSlot ? s.bytes : lengths_[s.slot];
        if (job_->stats) {
          job_->stats->addSend(s.peer, sendRawBytes(*plan_, s, bytes), bytes);
        }
        inflight_.push_back({id, job_->transport->isend(s.peer, job_->tagBase | s.tag, at(s.src), bytes)});
        ++sendsInFlight_;
        return;
      }
      case StepKind::kRecv:
        inflight_.push_back({id, job_->transport->irecv(s.peer, job_->tagBase | s.tag, at(s.dst), s.bytes)});
        return;
      case StepKind::kRecvReduce: {
        // Bound before the post: a transport may hand over a message that is already here
        // from inside it. A landed message goes through the same sink, whole.
        sinks_[id].bind(*plan_, s, job_->buffers);
        transport::Transport& t = *job_->transport;
        if (auto r = t.irecvInPlace(s.peer, job_->tagBase | s.tag, s.bytes, &sinks_[id]))
          inflight_.push_back({id, std::move(r)});
        else
          inflight_.push_back({id, t.irecv(s.peer, job_->tagBase | s.tag, at(s.in), s.bytes), true});
        return;
      }
      default:
        try {
          runCompute(*plan_, s, job_->buffers, ComputeContext{lengths_.data(), job_->callSeed, job_->stats});
        } catch (const Error& e) {
          // A stream this rank refuses came from a peer that called the operation otherwise:
          // every rank's call fails, as for a message of the wrong size.
          if (e.code() == cclInvalidUsage && isCodecStep(s.kind)) job_->transport->abortMismatch();
          throw;
        }
        break;
    }
    complete(id);
  }

  void checkReceived(StepId id, const transport::Request& req) {
    const Step& s = plan_->steps[id];
    if (!isReceive(s.kind)) return;
    if (s.slot != kNoSlot) {
      lengths_[s.slot] = req.receivedBytes();
      return;
    }
    if (req.receivedBytes() != s.bytes) {
      job_->transport->abortMismatch();  // every rank's call fails, not only this one's
      throw sentOtherSize(s.peer, req.receivedBytes(), s.bytes);
    }
  }

  void complete(StepId id) {
    ++completed_;
    for (uint32_t i = succStart_[id]; i < succStart_[id + 1]; ++i)
      if (--waiting_[succ_[i]] == 0) makeReady(succ_[i]);
  }

  const Job* job_ = nullptr;
  const Plan* plan_ = nullptr;
  std::vector<uint32_t> waiting_;
  std::vector<uint32_t> succStart_;
  std::vector<uint32_t> fill_;
  std::vector<StepId> succ_;
  std::vector<StepId> ready_;  // sends and receives
  size_t head_ = 0;
  std::vector<StepId> readyCompute_;  // every other step
  size_t computeHead_ = 0;
  size_t completed_ = 0;
  std::vector<Inflight> inflight_;
  std::vector<ReduceSink> sinks_;  // by step: a kRecvReduce's, at a stable address while posted
  std::vector<size_t> lengths_;    // encoded-stream lengths, by slot
  // Sends beyond the window wait here, in the order they became ready.
  std::vector<StepId> deferredSends_;
  size_t deferredHead_ = 0;
  size_t sendsInFlight_ = 0;
  // The digest exchange (postSignature): the least and greatest digest seen so far.
  struct DigestRange {
    uint64_t lo, hi;
  };
  int sigRound_ = 0, sigRounds_ = 0;
  DigestRange seen_{}, peerSeen_{};
  std::array<DigestRange, tags::kMaxSignatureRounds> sent_{};  // each round's, until its send completes
  std::array<std::unique_ptr<transport::Request>, tags::kMaxSignatureRounds> sigSends_;
  std::unique_ptr<transport::Request> sigRecv_;
};

constexpr int kSpinPasses = 64;

// Aborts `transports` that are not aborted yet, so that the peers' requests fail now: they
// would otherwise wait for CCL_TIMEOUT for the messages this rank will never send (and their
// loss detection would find nothing: this rank is alive and still pulsing, so none of them
// takes it for lost). A plain abort, as cclCommRevoke's: the peers' calls fail with
// cclRemoteError naming this rank as the one that aborted. One already aborted (a mismatch
// found here, a peer's abort) keeps that abort's kind and rank. False when every transport
// was aborted already.
bool abortForPeers(std::span<transport::Transport* const> transports) {
  bool any = false;
  for (transport::Transport* t : transports) {
    if (!t || t->abortState().aborted) continue;
    t->abort();
    any = true;
    // UCX sends its abort notices from a progress call of the thread driving it, and no
    // later one may come on this communicator (transport_link.cc does the same).
    try {
      t->progress();
    } catch (...) {
      // The abort is applied all the same; this rank's error is the one being thrown.
    }
  }
  return any;
}

// The jobs' transports, for rethrowTellingPeers (on a failure only).
std::vector<transport::Transport*> transportsOf(std::span<const Job> jobs) {
  std::vector<transport::Transport*> t;
  for (const Job& j : jobs) t.push_back(j.transport);
  return t;
}

}  // namespace

[[noreturn]] void rethrowTellingPeers(std::span<transport::Transport* const> transports) {
  static constexpr const char* kAborted = "; the communicator is aborted, so that the other ranks' calls fail too";
  try {
    throw;
  } catch (const Error& e) {
    if (e.code() == cclRemoteError || !abortForPeers(transports)) throw;
    throw Error(e.code(), e.what() + std::string(kAborted));
  } catch (const std::bad_alloc&) {
    abortForPeers(transports);
    throw Error(cclSystemError, "out of memory during the operation" + std::string(kAborted));
  } catch (const std::exception& e) {
    abortForPeers(transports);
    throw Error(cclInternalError, e.what() + std::string(kAborted));
  } catch (...) {
    abortForPeers(transports);
    throw;
  }
}

namespace {

// Run state kept per thread between calls, so a call allocates nothing in the steady state.
thread_local std::vector<JobRun> tlsRuns;

}  // namespace

Error sentOtherSize(int peer, size_t got, size_t expected) {
  return Error(cclInvalidUsage,
               "rank " + std::to_string(peer) + " sent " + std::to_string(got) + " bytes where " +
                   std::to_string(expected) +
                   " were expected: ranks called the operation with different counts, types or codecs");
}

void execute(std::span<const Job> jobs, const ExecOptions& options) {
  try {
    if (tlsRuns.size() < jobs.size()) tlsRuns.resize(jobs.size());
  } catch (...) {
    rethrowTellingPeers(transportsOf(jobs));
  }
  std::span<JobRun> runs(tlsRuns.data(), jobs.size());

  // Whatever way this returns, nothing of this call may stay posted on the buffers.
  struct Dropper {
    std::span<JobRun> runs;
    ~Dropper() {
      for (JobRun& r : runs) r.drop();
    }
  } dropper{runs};
  try {
    for (size_t i = 0; i < jobs.size(); ++i) runs[i].reset(jobs[i]);
  } catch (...) {
    rethrowTellingPeers(transportsOf(jobs));
  }

  using Clock = std::chrono::steady_clock;
  // Set when the spinning ends (no clock read on the path of a call that never waits: at
  // 8 bytes one clock read was an eighth of a one-rank call's time).
  Clock::time_point lastMove{};
  int idlePasses = 0;
  for (;;) {
    bool moved = false, allDone = true, waiting = false;
    try {
      for (JobRun& r : runs) {
        moved |= r.startReady();
        waiting |= r.waitingOnTransport();
      }
      if (waiting)
        for (const Job& j : jobs) moved |= j.transport->progress();
      for (JobRun& r : runs) {
        moved |= r.pollRequests();
        moved |= r.startReady();
        allDone &= r.finished();
      }
    } catch (...) {
      rethrowTellingPeers(transportsOf(jobs));
    }
    if (allDone) return;
    if (moved) {
      idlePasses = 0;
      continue;
    }
    // Spin briefly (a peer on another core answers within microseconds), then give the
    // core away on every idle pass so that oversubscribed peers can run.
    if (++idlePasses < kSpinPasses) continue;
    if (idlePasses == kSpinPasses) lastMove = Clock::now();
    for (JobRun& r : runs) r.checkAbort();
    if (Clock::now() - lastMove > options.timeout) {
      std::string waits;
      for (const JobRun& r : runs) waits += " [" + r.describeWait() + "]";
      throw Error(cclSystemError, "no progress for " + std::to_string(options.timeout.count()) +
                                      " ms (CCL_TIMEOUT): a peer is not taking part in the operation;" + waits);
    }
    if (options.yieldWhenIdle) sched_yield();
  }
}

}  // namespace ccl::coll
