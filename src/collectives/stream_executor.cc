// SPDX-License-Identifier: BSD-3-Clause
#include "collectives/stream_executor.h"

#include "codecs/codec.h"

#include <algorithm>
#include <string>
#include <tuple>

#include "collectives/compute_steps.h"
#include "collectives/plan_graph.h"
#include "common/error.h"

namespace ccl::coll {
namespace {

bool isTransfer(StepKind k) { return k == StepKind::kSend || k == StepKind::kRecv; }

// Bytes the step that fills `slot` leaves room for: an encode's capacity, or a receive's.
std::vector<size_t> slotCapacities(const Plan& p) {
  std::vector<size_t> cap(p.lengthSlots, 0);
  for (const Step& s : p.steps)
    if (s.slot != kNoSlot && (s.kind == StepKind::kEncode || s.kind == StepKind::kRecv))
      cap[s.slot] = std::max(cap[s.slot], s.bytes);
  return cap;
}

}  // namespace

Schedule scheduleWaves(const std::function<Plan(int)>& planOf, int nranks, int rank) {
  return scheduleWaves(planOf, Shifts::none(nranks), rank);
}

Schedule scheduleWaves(const std::function<Plan(int)>& planOf, const Shifts& shifts, int rank) {
  const PlanGraph graph = PlanGraph::build(planOf, shifts, rank);
  // Longest chains: a transfer's wave is one more than the latest wave it follows.
  std::vector<int> after(graph.total(), -1), value(graph.total(), -1);
  for (size_t u : graph.topologicalOrder()) {
    value[u] = isTransfer(graph.step(u).kind) ? after[u] + 1 : after[u];
    for (size_t v : graph.succ[u]) after[v] = std::max(after[v], value[u]);
  }
  const std::vector<size_t>& first = graph.first;
  const std::vector<uint32_t>& order = graph.order;

  Schedule out;
  const int own = shifts.offsetOf(rank);
  const Plan& mine = graph.plans[static_cast<size_t>(own)];
  const size_t n = mine.steps.size();
  out.level.resize(n);
  out.postedBytes.assign(n, 0);
  std::vector<size_t> capacity = slotCapacities(mine);
  for (size_t k = 0; k < n; ++k) {
    const size_t id = first[own] + k;
    const Step& s = mine.steps[k];
    out.level[k] = value[graph.rep[id]];
    if (!isTransfer(s.kind)) continue;
    // Posted: a receive's room; a send's bytes, or its stream's room, which is its receive's
    // bound (the codec's for the elements it carries). Known from this plan alone; with the
    // plans of every rank (no shifts) checked against the other end.
    out.postedBytes[k] = s.kind == StepKind::kSend && s.slot != kNoSlot ? capacity[s.slot] : s.bytes;
    if (shifts.blocks == 1) {  // else the other end read is a shifted rank's: its sizes may differ
      const Step& o = graph.step(graph.partner[id]);
      const Step& recv = s.kind == StepKind::kRecv ? s : o;
      const Step& send = s.kind == StepKind::kSend ? s : o;
      CCL_CHECK(send.slot != kNoSlot || send.bytes == recv.bytes, cclInternalError,
                "scheduleWaves: a send of " + std::to_string(send.bytes) + " bytes meets a receive of " +
                    std::to_string(recv.bytes));
      // This rank's sends only: `capacity` is of this rank's slots.
      CCL_CHECK(s.kind == StepKind::kRecv || send.slot == kNoSlot || capacity[send.slot] == recv.bytes,
                cclInternalError, "scheduleWaves: an encoded stream's room differs from its receive's bound");
    }
    const size_t w = static_cast<size_t>(out.level[k]);
    if (out.waves.size() <= w) out.waves.resize(w + 1);
    out.waves[w].push_back(static_cast<StepId>(k));
  }
  for (auto& wave : out.waves)
    std::sort(wave.begin(), wave.end(), [&](StepId a, StepId b) {
      const Step &x = mine.steps[a], &y = mine.steps[b];
      return std::make_tuple(x.peer, x.kind, x.tag, order[first[own] + a]) <
             std::make_tuple(y.peer, y.kind, y.tag, order[first[own] + b]);
    });
  return out;
}

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

void HostKernels::enqueue(const std::shared_ptr<StreamRun>& run, StepId step, Stream& stream) {
  stream.enqueue([run, step] {
    if (run->failed.load(std::memory_order_acquire)) return;
    runCompute(*run->plan, run->plan->steps[step], run->buffers,
               ComputeContext{run->lengths.data(), run->callSeed, run->stats});
  });
}

namespace {

// One job of a batch as it is enqueued: its run, and which of its compute steps are queued.
struct Enqueuing {
  const StreamJob* job;
  std::shared_ptr<StreamRun> run;
  std::vector<std::vector<StepId>> computeAfter;  // compute steps by the wave they follow, plus one
  std::vector<char> queued, needed;
  size_t waves() const { return computeAfter.size() - 1; }
};

Enqueuing prepare(const StreamJob& job) {
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
    if (s.kind == StepKind::kRecv && s.slot != kNoSlot)
      run.slotBytes[s.slot] = std::max(run.slotBytes[s.slot], sched.postedBytes[i]);
  }
  // Compute steps by the wave they follow (level + 1), in plan order (a topological order).
  e.computeAfter.resize(sched.waves.size() + 1);
  for (size_t i = 0; i < n; ++i)
    if (!isTransfer(plan.steps[i].kind)) e.computeAfter[static_cast<size_t>(sched.level[i] + 1)].push_back(StepId(i));
  e.queued.assign(n, 0);
  e.needed.assign(n, 0);
  return e;
}

}  // namespace

void executeOnStream(const StreamJob& job, StreamLink& link, StreamKernels& kernels, Stream& caller, Stream& comm) {
  executeOnStream(std::span<const StreamJob>(&job, 1), link, kernels, caller, comm);
}

void executeOnStream(std::span<const StreamJob> jobs, StreamLink& link, StreamKernels& kernels, Stream& caller,
                     Stream& comm) {
  std::vector<Enqueuing> batch;
  batch.reserve(jobs.size());
  size_t waves = 0;
  for (const StreamJob& job : jobs) {
    batch.push_back(prepare(job));
    waves = std::max(waves, batch.back().waves());
  }
  // The first failure of the batch, whichever stream it happened on. A stream's failure is
  // every job's, as a group fails as a whole: the rest of their steps then do nothing.
  auto failure = std::make_shared<FirstFailure>();
  std::vector<std::shared_ptr<StreamRun>> runs;
  for (const Enqueuing& e : batch) runs.push_back(e.run);
  auto takeFailure = [runs, failure](Stream& s) {
    std::string m;
    const cclResult_t c = s.takeError(&m);
    if (c == cclSuccess) return;
    failure->record(c, std::move(m));
    for (const auto& r : runs) r->failed.store(true, std::memory_order_release);
  };
  auto compute = [&](Enqueuing& e, StepId id) {
    kernels.enqueue(e.run, id, caller);
    e.queued[id] = 1;
  };
  // Once per batch of compute steps, not per step: on a CUDA stream each host step costs a
  // callback. Steps after a failure in the same batch still run, on bounded buffers.
  auto collectFailure = [&] { caller.enqueue([takeFailure, &caller] { takeFailure(caller); }); };

  std::vector<StepId> stack;
  std::vector<Transfer> xs;
  for (size_t w = 0; w < waves; ++w) {
    // The compute steps this wave's sends wait for go first.
    bool any = false;
    for (Enqueuing& e : batch) {
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
      for (StepId id : e.computeAfter[w])
        if (e.needed[id]) compute(e, id), any = true;
    }
    if (any) collectFailure();
    comm.wait(caller.record());

    // One group: the jobs' transfers of this wave, job after job (every rank orders its jobs
    // alike, so a link that matches by order still pairs them).
    xs.clear();
    for (Enqueuing& e : batch) {
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
        if (s.slot != kNoSlot) {
          if (x.send)
            x.exact = &run.lengths[s.slot];
          else
            x.received = &run.lengths[s.slot];
        }
        xs.push_back(x);
      }
    }
    link.group(xs, comm);
    const bool exact = link.exactLengths();
    comm.enqueue([runs, takeFailure, &comm, w, exact] {
      takeFailure(comm);
      for (const auto& r : runs) {
        const Plan& p = *r->plan;
        const Schedule& sc = *r->schedule;
        if (w >= sc.waves.size()) continue;
        for (StepId id : sc.waves[w]) {
          const Step& s = p.steps[id];
          if (!exact && s.kind == StepKind::kRecv && s.slot != kNoSlot) r->lengths[s.slot] = sc.postedBytes[id];
          if (!r->stats || s.kind != StepKind::kSend) continue;
          const size_t sent = r->sent[id]                  ? r->sent[id]
                              : exact && s.slot != kNoSlot ? r->lengths[s.slot]
                                                           : sc.postedBytes[id];
          r->stats->wireBytes += sent;
          r->stats->rawBytes += sendRawBytes(p, s, sent);
        }
      }
    });
    const Event done = comm.record();
    // The rest overlaps the wave's transfers.
    any = false;
    for (Enqueuing& e : batch) {
      if (w >= e.waves()) continue;
      for (StepId id : e.computeAfter[w])
        if (!e.queued[id]) compute(e, id), any = true;
    }
    if (any) collectFailure();
    caller.wait(done);
  }
  for (Enqueuing& e : batch)
    for (StepId id : e.computeAfter[e.waves()]) compute(e, id);
  collectFailure();
  std::vector<std::function<void(cclResult_t, const std::string&)>> finished;
  for (const StreamJob& job : jobs)
    if (job.finished) finished.push_back(job.finished);
  caller.enqueue([failure, runs, finished = std::move(finished)] {
    for (const auto& r : runs)
      if (r->lastCheck) failure->run(r->lastCheck);
    std::string m;
    const cclResult_t c = failure->take(&m);
    for (const auto& f : finished) f(c, m);
    if (c != cclSuccess) throw Error(c, m);
  });
}

}  // namespace ccl::coll
