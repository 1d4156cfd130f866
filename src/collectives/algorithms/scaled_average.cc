// SPDX-License-Identifier: BSD-3-Clause
#include "collectives/algorithms/scaled_average.h"

#include <algorithm>
#include <vector>

#include "collectives/algorithms/misaligned.h"
#include "common/dtype.h"

namespace ccl::coll {

bool scalesInputs(const AlgoEntry& e, Coll c, const CollArgs& a) {
  return a.op == cclAvg && averageScalesInputs(a.dtype) && !e.compressed && collInfo(c).reduction && a.nranks > 1 &&
         a.count > 0;
}

Plan withoutDivisions(const Plan& p) {
  Plan q = p;
  q.steps.clear();
  q.deps.clear();
  // For each step of p: its id in q, or, dropped, the q steps it waited for.
  std::vector<Deps> in(p.steps.size());
  for (StepId i = 0; i < p.steps.size(); ++i) {
    const Step& s = p.steps[i];
    Deps after;
    for (uint32_t k = 0; k < s.numDeps; ++k) {
      const Deps& d = in[p.deps[s.firstDep + k]];
      after.insert(after.end(), d.begin(), d.end());
    }
    std::sort(after.begin(), after.end());
    after.erase(std::unique(after.begin(), after.end()), after.end());
    if (s.kind == StepKind::kDivide || s.kind == StepKind::kDivideFloat) {
      in[i] = std::move(after);
      continue;
    }
    Step t = s;
    t.divide = false;
    in[i] = {q.add(t, after)};
  }
  return q;
}

Plan planScaledAverage(const AlgoEntry& e, Coll c, const CollArgs& a) {
  if (c != Coll::kAllReduce) return stageBuffers(withoutDivisions(e.build(a)), c, a, {.send = true, .scale = true});
  // The allreduce of the receive buffer in place, after the scaled input is written there.
  CollArgs inPlace = a;
  inPlace.inPlace = true;
  const Plan p = withoutDivisions(e.build(inPlace));
  Plan q = p;
  q.steps.clear();
  q.deps.clear();
  const Ref recv{Buf::kRecv, 0};
  const StepId scaled = q.divide(recv, a.inPlace ? recv : Ref{Buf::kSend, 0}, a.count);
  // In place the two buffers are one: the plan's send references are the receive buffer's.
  appendAfter(q, p, {scaled}, [](Ref r) { return r.buf == Buf::kSend ? Ref{Buf::kRecv, r.offset} : r; });
  return q;
}

}  // namespace ccl::coll
