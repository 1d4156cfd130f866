// SPDX-License-Identifier: BSD-3-Clause
// The wave schedule of a call (wave_schedule.cc): every transfer's wave, the longest chain of
// transfers before it over every rank's plan, so that the two ends of each message post it
// in the same wave; what the stream executor (exec/stream_executor.h) runs a plan by, and
// what the cost model's graph (plan_graph.h) is shared with.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "collectives/plan/plan.h"
#include "collectives/plan/topology.h"

namespace ccl::coll {

// One rank's part of the wave schedule of a call.
struct Schedule {
  // Transfer steps per wave, in the order the link posts them: by peer, then sends before
  // receives, then by message (tag and order among equal tags) — the same order at both ends.
  std::vector<std::vector<StepId>> waves;
  // Per step: a transfer's wave; a compute step's last wave it follows (-1: none).
  std::vector<int> level;
  // Per step: bytes a transfer posts when lengths are not known on the host: the matched
  // receive's size (an encoded stream's bound). Equal at both ends of every message.
  std::vector<size_t> postedBytes;
};

// Builds `rank`'s schedule from every rank's plan (planOf(r) for r in [0, nranks)). Throws
// cclInternalError when the plans do not pair up (a send without its receive) or wait on
// each other in a cycle.
Schedule scheduleWaves(const std::function<Plan(int)>& planOf, int nranks, int rank);
// The same schedule from the plans of `rank`'s block only, when the plans are the same under
// `shifts` (planShifts, algorithms.h): the steps of a rank in another block are those of its
// shifted rank in this block, so the longest chains over one block's steps are those over
// every rank's. A ring of 65,536 ranks is scheduled from one plan instead of 65,536.
Schedule scheduleWaves(const std::function<Plan(int)>& planOf, const Shifts& shifts, int rank);

// Bytes the step that fills each of `p`'s length slots leaves room for: an encode's
// capacity, or a receive's.
std::vector<size_t> slotCapacities(const Plan& p);

}  // namespace ccl::coll
