// SPDX-License-Identifier: BSD-3-Clause
// Every rank's steps of one call as one graph: each step a node, a message's send and
// receive one node, edges from each step's dependencies. Under Shifts (topology.h) only the
// plans of one block are read, a step of another block standing for the same step of its
// shifted rank in this block. The wave schedule (stream_executor.h) and the cost model
// (cost.h) both walk it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "collectives/plan/plan.h"
#include "collectives/plan/topology.h"

namespace ccl::coll {

struct PlanGraph {
  Shifts shifts;
  int home = 0;                           // the block whose plans are read
  std::vector<Plan> plans;                // of the home block, by offset
  std::vector<size_t> first;              // global id of each plan's step 0 (one more: the total)
  std::vector<size_t> rep;                // per step: its node (a receive's is its send's)
  std::vector<size_t> partner;            // per transfer: the other end (SIZE_MAX for compute steps)
  std::vector<uint32_t> order;            // per transfer: its place among equal (peer, tag) messages
  std::vector<std::vector<size_t>> succ;  // per node: the nodes that wait for it
  std::vector<uint32_t> indeg;            // per node: how many it waits for
  size_t nodes = 0;                       // steps that are their own node

  // Builds the graph of the block of `rank` (every rank's when shifts is Shifts::none).
  // Throws cclInternalError when a message has no other end.
  static PlanGraph build(const std::function<Plan(int)>& planOf, const Shifts& shifts, int rank);

  size_t total() const { return first.back(); }
  int planIndex(size_t g) const;  // the offset in the home block of step g's plan
  const Step& step(size_t g) const;
  int rankOf(size_t g) const { return shifts.rankAt(home, planIndex(g)); }
  // Nodes in an order where each follows every node it waits for; throws cclInternalError
  // when the plans wait on each other in a cycle.
  std::vector<size_t> topologicalOrder() const;
};

}  // namespace ccl::coll
