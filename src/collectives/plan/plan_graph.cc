// SPDX-License-Identifier: BSD-3-Clause
#include "collectives/plan/plan_graph.h"

#include <algorithm>
#include <string>
#include <tuple>

#include "common/error.h"

namespace ccl::coll {

int PlanGraph::planIndex(size_t g) const {
  return static_cast<int>(std::upper_bound(first.begin(), first.end(), g) - first.begin()) - 1;
}

const Step& PlanGraph::step(size_t g) const {
  const int o = planIndex(g);
  return plans[static_cast<size_t>(o)].steps[g - first[static_cast<size_t>(o)]];
}

PlanGraph PlanGraph::build(const std::function<Plan(int)>& planOf, const Shifts& shifts, int rank) {
  const int nranks = shifts.nranks();
  CCL_CHECK(nranks > 0 && rank >= 0 && rank < nranks && shifts.blocks > 0, cclInternalError, "scheduleWaves: bad rank");
  PlanGraph g;
  g.shifts = shifts;
  // The plans of this rank's block: one per offset. Every other rank's plan is one of them
  // shifted, so a step of (block c, offset o) stands for the step of (this block, o).
  const int home = g.home = shifts.blockOf(rank), size = shifts.size;
  g.first.assign(static_cast<size_t>(size) + 1, 0);
  g.plans.reserve(static_cast<size_t>(size));
  for (int o = 0; o < size; ++o) {
    g.plans.push_back(planOf(shifts.rankAt(home, o)));
    g.first[o + 1] = g.first[o] + g.plans[o].steps.size();
  }
  const size_t total = g.total();

  // Pair every send with its receive: same ends and tag, in posting order among equals. A
  // send of plan o to (block c, offset q) is received, shifted into this block, by plan q
  // from (block shifts.sourceOf(home, c), offset o): 2*home - c under rotations, c under XOR.
  struct End {
    int plan, peer;
    uint32_t tag, order;
    size_t id;
    auto key() const { return std::make_tuple(plan, peer, tag, order); }
  };
  std::vector<End> sends, recvs;
  for (int o = 0; o < size; ++o)
    for (size_t i = 0; i < g.plans[o].steps.size(); ++i) {
      const Step& s = g.plans[o].steps[i];
      if (s.kind == StepKind::kSend) sends.push_back({o, s.peer, s.tag, 0, g.first[o] + i});
      if (isReceive(s.kind)) recvs.push_back({o, s.peer, s.tag, 0, g.first[o] + i});
    }
  // Posting order among equal (plan, peer, tag): steps are numbered in plan order.
  auto number = [](std::vector<End>& ends) {
    std::stable_sort(ends.begin(), ends.end(), [](const End& a, const End& b) {
      return std::make_tuple(a.plan, a.peer, a.tag) < std::make_tuple(b.plan, b.peer, b.tag);
    });
    for (size_t i = 1; i < ends.size(); ++i)
      if (std::make_tuple(ends[i].plan, ends[i].peer, ends[i].tag) ==
          std::make_tuple(ends[i - 1].plan, ends[i - 1].peer, ends[i - 1].tag))
        ends[i].order = ends[i - 1].order + 1;
  };
  number(sends);
  number(recvs);
  g.order.assign(total, 0);
  for (const End& e : sends) g.order[e.id] = e.order;
  for (const End& e : recvs) g.order[e.id] = e.order;
  // Each send as the receive it meets would name it.
  std::vector<End> met;
  met.reserve(sends.size());
  for (const End& e : sends) {
    const int c = shifts.blockOf(e.peer), q = shifts.offsetOf(e.peer);
    const int from = shifts.rankAt(shifts.sourceOf(home, c), e.plan);
    met.push_back({q, from, e.tag, e.order, e.id});
  }
  auto byKey = [](const End& a, const End& b) { return a.key() < b.key(); };
  std::sort(met.begin(), met.end(), byKey);
  std::sort(recvs.begin(), recvs.end(), byKey);
  g.rep.resize(total);
  g.partner.assign(total, SIZE_MAX);
  for (size_t i = 0; i < total; ++i) g.rep[i] = i;
  size_t i = 0, j = 0;
  while (i < met.size() || j < recvs.size()) {
    if (j == recvs.size() || (i < met.size() && met[i].key() < recvs[j].key())) {
      const End& e = met[i];
      throw Error(cclInternalError, "scheduleWaves: rank " + std::to_string(e.peer) + " sends tag " +
                                        std::to_string(e.tag) + " to rank " +
                                        std::to_string(shifts.rankAt(home, e.plan)) + ", which does not receive it");
    }
    if (i == met.size() || recvs[j].key() < met[i].key()) {
      const End& e = recvs[j];
      throw Error(cclInternalError, "scheduleWaves: rank " + std::to_string(shifts.rankAt(home, e.plan)) +
                                        " receives tag " + std::to_string(e.tag) + " from rank " +
                                        std::to_string(e.peer) + ", which sends no such message");
    }
    g.rep[recvs[j].id] = met[i].id;
    g.partner[recvs[j].id] = met[i].id;
    g.partner[met[i].id] = recvs[j].id;
    ++i, ++j;
  }

  g.succ.resize(total);
  g.indeg.assign(total, 0);
  for (int o = 0; o < size; ++o)
    for (size_t k = 0; k < g.plans[o].steps.size(); ++k) {
      const Step& s = g.plans[o].steps[k];
      const size_t to = g.rep[g.first[o] + k];
      for (uint32_t d = 0; d < s.numDeps; ++d) {
        const size_t from = g.rep[g.first[o] + g.plans[o].deps[s.firstDep + d]];
        g.succ[from].push_back(to);
        ++g.indeg[to];
      }
    }
  for (size_t k = 0; k < total; ++k) g.nodes += g.rep[k] == k;
  return g;
}

std::vector<size_t> PlanGraph::topologicalOrder() const {
  std::vector<uint32_t> waiting = indeg;
  std::vector<size_t> ready, out;
  out.reserve(nodes);
  for (size_t k = 0; k < total(); ++k)
    if (rep[k] == k && waiting[k] == 0) ready.push_back(k);
  while (!ready.empty()) {
    const size_t u = ready.back();
    ready.pop_back();
    out.push_back(u);
    for (size_t v : succ[u])
      if (--waiting[v] == 0) ready.push_back(v);
  }
  CCL_CHECK(out.size() == nodes, cclInternalError, "scheduleWaves: the plans wait on each other in a cycle");
  return out;
}

}  // namespace ccl::coll
