// SPDX-License-Identifier: BSD-3-Clause
#include "collectives/exec/stream_executor.h"

#include "codecs/codec.h"
#include "codecs/wire.h"

#include <algorithm>
#include <exception>
#include <string>
#include <tuple>

#include "collectives/exec/compute_steps.h"
#include "common/error.h"

namespace ccl::coll {

PostedBytes postedBytes(const Plan& plan, const Schedule& schedule) {
  PostedBytes b;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& s = plan.steps[i];
    if (s.kind != StepKind::kSend) continue;
    b.posted += schedule.postedBytes[i];
    b.raw += sendRawBytes(plan, s, schedule.postedBytes[i]);
  }
  return b;
}

void HostKernels::enqueue(const std::shared_ptr<StreamRun>& run, std::span<const StepId> steps, Stream& stream) {
  stream.enqueue([run, steps = std::vector<StepId>(steps.begin(), steps.end())] {
    std::exception_ptr failure;
    for (StepId id : steps) {
      const Step& s = run->plan->steps[id];
      if (!run->failed.load(std::memory_order_acquire)) {
        try {
          runCompute(*run->plan, s, run->buffers, ComputeContext{run->lengths.data(), run->callSeed, run->stats});
          continue;
        } catch (...) {
          run->failed.store(true, std::memory_order_release);  // the call's later steps do nothing
          failure = std::current_exception();
        }
      }
      // Nothing but the news: a stream this step would have sent says the call failed, so a
      // peer's call fails too instead of taking what this call left in the buffer (a stream
      // of an earlier call is valid, and would decode). The CUDA encoders do the same.
      if (encodesStream(s.kind))
        run->lengths[s.slot] = codec::writeFailedSender(bufferAt(run->buffers, s.dst), s.bytes);
    }
    if (failure) std::rethrow_exception(failure);
  });
}

namespace {

// One job of a batch as it is enqueued: its run, and which of its compute steps are queued.
struct Enqueuing {
  const StreamJob* job;
  std::shared_ptr<StreamRun> run;
  std::vector<std::vector<StepId>> computeAfter;  // compute steps by the wave they follow, plus one
  std::vector<char> queued, needed;
  std::vector<int> depth;  // while a set of steps is batched: its longest chain of steps in the set before it
  size_t waves() const { return computeAfter.size() - 1; }
};

Enqueuing prepare(const StreamJob& job, bool exactLengths) {
  CCL_CHECK(job.plan && job.schedule, cclInternalError, "executeOnStream: no plan or schedule");
  const Plan& plan = *job.plan;
  const Schedule& sched = *job.schedule;
  const size_t n = plan.steps.size();
  CCL_CHECK(sched.level.size() == n, cclInternalError, "executeOnStream: the schedule is of another plan");
  Enqueuing e;
  e.job = &job;
  e.run = std::make_shared<StreamRun>();
  StreamRun& run = *e.run;
  run.plan = job.plan;
  run.schedule = job.schedule;
  run.buffers = job.buffers;
  run.callSeed = job.callSeed;
  run.stats = job.stats;
  run.lengths.assign(plan.lengthSlots, 0);
  run.slotBytes = slotCapacities(plan);
  run.sent.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const Step& s = plan.steps[i];
    if (s.kind != StepKind::kRecv || s.slot == kNoSlot) continue;
    run.slotBytes[s.slot] = std::max(run.slotBytes[s.slot], sched.postedBytes[i]);
    // A link that cannot see lengths receives streams at their posted size; one that reports
    // what arrived (Transfer::received) overwrites it.
    if (!exactLengths) run.lengths[s.slot] = sched.postedBytes[i];
  }
  // Compute steps by the wave they follow (level + 1), in plan order (a topological order).
  e.computeAfter.resize(sched.waves.size() + 1);
  for (size_t i = 0; i < n; ++i)
    if (!isTransfer(plan.steps[i].kind)) e.computeAfter[static_cast<size_t>(sched.level[i] + 1)].push_back(StepId(i));
  e.queued.assign(n, 0);
  e.needed.assign(n, 0);
  e.depth.assign(n, -1);
  return e;
}

// Enqueues compute steps `ids` of one job (in plan order) as batches of one kind whose steps
// do not depend on each other: a step's batch comes after those of the steps of `ids` it
// depends on. Steps of one depth and kind are one batch, whatever their order in the plan:
// plans state every order their steps need as dependencies (the host executor runs them in
// whatever order they become ready).
void enqueueBatches(Enqueuing& e, const std::vector<StepId>& ids, StreamKernels& kernels, Stream& stream) {
  if (ids.empty()) return;
  const Plan& plan = *e.run->plan;
  int deepest = 0;
  for (StepId id : ids) {
    const Step& s = plan.steps[id];
    int d = 0;
    for (uint32_t k = 0; k < s.numDeps; ++k) d = std::max(d, e.depth[plan.deps[s.firstDep + k]] + 1);
    e.depth[id] = d;
    deepest = std::max(deepest, d);
  }
  std::vector<StepId> batch;
  for (int d = 0; d <= deepest; ++d) {
    uint32_t kinds = 0;  // the kinds at this depth, in the order they first appear
    for (StepId id : ids)
      if (e.depth[id] == d) kinds |= 1u << static_cast<unsigned>(plan.steps[id].kind);
    for (StepId first : ids) {
      const StepKind kind = plan.steps[first].kind;
      if (e.depth[first] != d || !(kinds & (1u << static_cast<unsigned>(kind)))) continue;
      kinds &= ~(1u << static_cast<unsigned>(kind));
      batch.clear();
      for (StepId id : ids)
        if (e.depth[id] == d && plan.steps[id].kind == kind) batch.push_back(id);
      kernels.enqueue(e.run, batch, stream);
    }
  }
  for (StepId id : ids) {
    e.depth[id] = -1;  // steps of a later set depend on this one from an earlier command
    e.queued[id] = 1;
  }
}

}  // namespace

void executeOnStream(const StreamJob& job, StreamLink& link, StreamKernels& kernels, Stream& caller, Stream& comm) {
  executeOnStream(std::span<const StreamJob>(&job, 1), link, kernels, caller, comm);
}

namespace {

// A call being enqueued: its jobs (copies: a launcher may finish the call after the caller's
// span is gone), their runs, and how far the loop over waves got.
struct Call {
  std::vector<StreamJob> jobs;
  std::vector<Enqueuing> batch;  // each one's job points into `jobs`
  std::vector<std::shared_ptr<StreamRun>> runs;
  size_t waves = 0;
  // Commands between the streams only where steps need them: the comm stream waits for the
  // compute stream's steps queued since it last did (and, before the first wave, for what
  // the caller enqueued before the call); compute steps that follow wave v wait for it.
  std::vector<Event> waveDone;
  bool computePending = true;
  size_t joined = 0;    // the compute stream has waited for waves [0, joined)
  size_t prepared = 0;  // waves [0, prepared) have the compute steps they wait for enqueued
  Stream* caller = nullptr;
};

std::shared_ptr<Call> prepareCall(std::span<const StreamJob> jobs, const StreamLink& link, Stream& caller) {
  auto c = std::make_shared<Call>();
  c->jobs.assign(jobs.begin(), jobs.end());
  c->batch.reserve(c->jobs.size());
  for (const StreamJob& job : c->jobs) {
    c->batch.push_back(prepare(job, link.exactLengths()));
    c->waves = std::max(c->waves, c->batch.back().waves());
  }
  for (const Enqueuing& e : c->batch) c->runs.push_back(e.run);
  c->waveDone.reserve(c->waves);
  c->caller = &caller;
  return c;
}

// The transfers of wave w, job after job (every rank orders its jobs alike, so a link that
// matches by order still pairs them).
void transfersOf(Call& c, size_t w, std::vector<Transfer>& xs) {
  xs.clear();
  for (Enqueuing& e : c.batch) {
    if (w >= e.waves()) continue;
    StreamRun& run = *e.run;
    const Plan& plan = *run.plan;
    const Schedule& sched = *run.schedule;
    for (StepId id : sched.waves[w]) {
      const Step& s = plan.steps[id];
      Transfer x;
      x.send = s.kind == StepKind::kSend;
      x.peer = s.peer;
      x.tag = e.job->tagBase | s.tag;
      x.buf = bufferAt(run.buffers, x.send ? s.src : s.dst);
      x.bytes = sched.postedBytes[id];
      if (x.send) x.sent = &run.sent[id];
      x.callFailed = &run.failed;
      if (s.slot != kNoSlot) {
        if (x.send)
          x.exact = &run.lengths[s.slot];
        else
          x.received = &run.lengths[s.slot];
      }
      xs.push_back(x);
    }
  }
}

// The call's one host function, once every step and wave has run: the failures of its steps
// (any of its streams'), of the link's groups, of its decodes (lastCheck); then the
// statistics of what the sends moved, and the jobs' `finished`.
void enqueueEnd(Call& c, StreamLink& link, Stream& compute, Stream& comm) {
  std::vector<std::function<void(cclResult_t, const std::string&)>> finished;
  for (const StreamJob& job : c.jobs)
    if (job.finished) finished.push_back(job.finished);
  std::vector<Stream*> streams{&comm, &compute};
  if (c.caller != &compute) streams.push_back(c.caller);
  compute.enqueue(
      [runs = c.runs, finished = std::move(finished), streams, linkCheck = link.failureCheck(), link = &link] {
        // The link's failure first: steps after it ran on what never arrived, and fail too.
        FirstFailure failure;
        std::string m;
        if (linkCheck) failure.run(linkCheck);
        for (Stream* s : streams)
          if (const cclResult_t code = s->takeError(&m); code != cclSuccess) failure.record(code, m);
        for (const auto& r : runs)
          if (r->lastCheck) failure.run(r->lastCheck);
        for (const auto& r : runs) {
          if (!r->stats) continue;
          const Plan& p = *r->plan;
          for (const auto& wave : r->schedule->waves)
            for (StepId id : wave) {
              const Step& s = p.steps[id];
              if (s.kind != StepKind::kSend) continue;
              const size_t sent = r->sent[id] ? r->sent[id] : r->schedule->postedBytes[id];
              r->stats->addSend(s.peer, sendRawBytes(p, s, sent), sent);
            }
        }
        const cclResult_t code = failure.take(&m);
        if (code != cclSuccess)
          for (const auto& r : runs) r->failed.store(true, std::memory_order_release);
        // The link outlives the call: the communicator drains its calls before the link goes.
        if (code != cclSuccess && code != cclRemoteError) link->tellPeers();
        for (const auto& f : finished) f(code, m);
        if (code != cclSuccess) throw Error(code, m);
      });
}

// What the link's groups enqueued so far write (lengths received, bytes sent) lives in the
// runs: a call that fails while enqueuing (an abort while it waits for staging) keeps them
// until the comm stream has passed those groups, or for good if it cannot say when.
void keepRuns(const Call& c, Stream& comm) {
  try {
    comm.enqueue([runs = c.runs] {});
  } catch (...) {
    new std::vector<std::shared_ptr<StreamRun>>(c.runs);  // leaked: better than written after free
  }
}

// Enqueues waves [from, waves) and the call's end on `compute` and `comm`. With a launcher,
// returns false (having handed the rest to it) where the link would block.
bool enqueueFrom(const std::shared_ptr<Call>& call, size_t from, StreamLink& link, StreamKernels& kernels,
                 Stream& compute, Stream& comm, Launcher* launcher);

// Hands waves [w, waves) to the launcher: its stream starts where `compute` is, the caller's
// stream waits for the flag it raises at the end.
void handOff(const std::shared_ptr<Call>& call, size_t w, StreamLink& link, StreamKernels& kernels, Stream& compute,
             Stream& comm, Launcher& launcher) {
  Stream& rest = launcher.stream();
  const Event start = compute.record();
  const uint64_t ticket = launcher.nextTicket();
  std::atomic<uint64_t>* flag = launcher.flag();
  call->caller->waitFlag(flag, ticket);
  // Everything on the launcher's stream is enqueued by its thread, in call order: a wait
  // enqueued from here could land inside an earlier call's work there, before the flag
  // that call raises and `start` waits for.
  launcher.post([call, w, &link, &kernels, &rest, &comm, flag, ticket, start] {
    try {
      rest.wait(start);
      enqueueFrom(call, w, link, kernels, rest, comm, nullptr);
      rest.setFlag(flag, ticket);
    } catch (const std::exception& e) {
      // The call returned long ago: its failure is its jobs' (the communicator's
      // asynchronous error), and the caller's stream must not wait for ever.
      keepRuns(*call, comm);
      flag->store(ticket, std::memory_order_release);
      const auto* err = dynamic_cast<const Error*>(&e);
      if (!err || err->code() != cclRemoteError) link.tellPeers();
      for (const StreamJob& job : call->jobs)
        if (job.finished) job.finished(err ? err->code() : cclInternalError, e.what());
    }
  });
}

bool enqueueFrom(const std::shared_ptr<Call>& call, size_t from, StreamLink& link, StreamKernels& kernels,
                 Stream& compute, Stream& comm, Launcher* launcher) {
  Call& c = *call;
  auto enqueue = [&](Enqueuing& e, const std::vector<StepId>& ids, size_t after) {
    if (ids.empty()) return;
    if (after > c.joined) {
      compute.wait(c.waveDone[after - 1]);
      c.joined = after;
    }
    enqueueBatches(e, ids, kernels, compute);
    c.computePending = true;
  };
  std::vector<StepId> stack, now;
  std::vector<Transfer> xs;
  for (size_t w = from; w < c.waves; ++w) {
    if (w >= c.prepared) {
      c.prepared = w + 1;
      // The compute steps this wave's sends wait for go first.
      for (Enqueuing& e : c.batch) {
        if (w >= e.waves()) continue;
        const Plan& plan = *e.run->plan;
        const auto& wave = e.run->schedule->waves[w];
        stack.assign(wave.begin(), wave.end());
        while (!stack.empty()) {
          const Step& s = plan.steps[stack.back()];
          stack.pop_back();
          for (uint32_t d = 0; d < s.numDeps; ++d) {
            const StepId dep = plan.deps[s.firstDep + d];
            if (e.queued[dep] || e.needed[dep] || isTransfer(plan.steps[dep].kind)) continue;
            e.needed[dep] = 1;
            stack.push_back(dep);
          }
        }
        now.clear();
        for (StepId id : e.computeAfter[w])
          if (e.needed[id]) now.push_back(id);
        enqueue(e, now, w);
      }
      if (c.computePending) comm.wait(compute.record());
      c.computePending = false;
    }
    transfersOf(c, w, xs);
    if (launcher && link.mayBlock(xs)) {
      handOff(call, w, link, kernels, compute, comm, *launcher);
      return false;
    }
    link.group(xs, comm);
    c.waveDone.push_back(comm.record());
    // The rest (steps that follow the wave before) overlaps this wave's transfers.
    for (Enqueuing& e : c.batch) {
      if (w >= e.waves()) continue;
      now.clear();
      for (StepId id : e.computeAfter[w])
        if (!e.queued[id]) now.push_back(id);
      enqueue(e, now, w);
    }
  }
  for (Enqueuing& e : c.batch) enqueue(e, e.computeAfter[e.waves()], e.waves());
  // The call ends on the compute stream once every wave has: the next call may reuse what
  // the comm stream still reads.
  if (c.joined < c.waves) compute.wait(c.waveDone.back());
  enqueueEnd(c, link, compute, comm);
  return true;
}

}  // namespace

void executeOnStream(std::span<const StreamJob> jobs, StreamLink& link, StreamKernels& kernels, Stream& caller,
                     Stream& comm, Launcher* launcher) {
  const std::shared_ptr<Call> call = prepareCall(jobs, link, caller);
  try {
    // While the launcher has calls to finish, this one follows them there, whole.
    if (launcher && launcher->busy()) {
      handOff(call, 0, link, kernels, caller, comm, *launcher);
      return;
    }
    enqueueFrom(call, 0, link, kernels, caller, comm, launcher);
  } catch (...) {
    keepRuns(*call, comm);
    throw;
  }
}

}  // namespace ccl::coll
