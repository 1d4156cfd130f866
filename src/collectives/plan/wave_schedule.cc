// SPDX-License-Identifier: BSD-3-Clause
#include "collectives/plan/wave_schedule.h"

#include <algorithm>
#include <string>
#include <tuple>

#include "collectives/plan/plan_graph.h"
#include "common/error.h"

namespace ccl::coll {

std::vector<size_t> slotCapacities(const Plan& p) {
  std::vector<size_t> cap(p.lengthSlots, 0);
  for (const Step& s : p.steps)
    if (s.slot != kNoSlot && (encodesStream(s.kind) || s.kind == StepKind::kRecv))
      cap[s.slot] = std::max(cap[s.slot], s.bytes);
  return cap;
}

Schedule scheduleWaves(const std::function<Plan(int)>& planOf, int nranks, int rank) {
  return scheduleWaves(planOf, Shifts::none(nranks), rank);
}

Schedule scheduleWaves(const std::function<Plan(int)>& planOf, const Shifts& shifts, int rank) {
  const PlanGraph graph = PlanGraph::build(planOf, shifts, rank);
  // Longest chains: a transfer's wave is one more than the latest wave it follows.
  std::vector<int> after(graph.total(), -1), value(graph.total(), -1);
  for (size_t u : graph.topologicalOrder()) {
    CCL_CHECK(graph.step(u).kind != StepKind::kRecvReduce, cclInternalError,
              "a plan for the host executor (a receive read in place) on a stream");
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

}  // namespace ccl::coll
