// SPDX-License-Identifier: BSD-3-Clause
// Hierarchical rooted collectives: across nodes among one leader per node, then inside each node.
//
// A node's leader is the root in the root's node and its first rank elsewhere. Broadcast: the
// root's data goes to the leaders (a flat broadcast of the call's codec), then each leader
// broadcasts it inside its node (uncompressed, or a.intraCodec). Reduce: each node's sum goes
// to its leader inside the node, then the leaders' sums to the root. Both stages are flat
// plans spliced in; the second waits for the first.
#include <algorithm>
#include <tuple>
#include <vector>

#include "codecs/codec.h"
#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/hierarchical/stages.h"
#include "common/dtype.h"
#include "common/error.h"
#include "common/tags.h"

namespace ccl::coll {

using namespace hier;  // NOLINT: the stages of this folder's plans

Plan planHierarchicalBroadcast(const CollArgs& a) {
  Plan p = detail::emptyPlan(a);
  if (a.count == 0) return p;
  const Rooted g = rootedOf(a);
  const int n = a.nranks;
  const Ref out{Buf::kRecv, 0};
  const std::vector<int>& members = g.topo.members[static_cast<size_t>(g.node)];
  Deps across;
  if (a.rank == g.leader()) {
    Embedding e;
    e.ranks = g.leaders;
    e.recv = out;
    e.tagOffset = tags::stageOffset(1, n);
    const CollArgs s = among(a, g.node, g.topo.nodes(), g.rootNode, a.rank == a.root && a.inPlace, a.codec);
    across = splice(p, planCollective(Coll::kBroadcast, s), e, [](size_t, size_t) { return Deps{}; });
  }
  // With a codec inside nodes, a node of one rank takes its data through it too: every rank
  // then holds the same bits.
  if (members.size() > 1 || intraCodecOf(a).codec != cclCodecNone) {
    Embedding e;
    e.ranks = members;
    e.send = e.recv = out;
    e.tagOffset = tags::stageOffset(2, n);
    const int local = g.topo.localRank[static_cast<size_t>(a.rank)];
    const CollArgs s = among(a, local, static_cast<int>(members.size()),
                             g.topo.localRank[static_cast<size_t>(g.leader())], true, intraCodecOf(a));
    e.intra = true;
    splice(p, planCollective(Coll::kBroadcast, s), e, [&](size_t, size_t) { return across; });
  }
  return p;
}

Plan planHierarchicalReduce(const CollArgs& a) {
  Plan p = detail::emptyPlan(a);
  if (a.count == 0) return p;
  const Rooted g = rootedOf(a);
  const int n = a.nranks;
  const size_t bytes = a.count * dataTypeSize(a.dtype);
  const Ref out{Buf::kRecv, 0};
  const std::vector<int>& members = g.topo.members[static_cast<size_t>(g.node)];
  const bool leader = a.rank == g.leader(), root = a.rank == a.root;
  // Where this rank's node sum lands: the root's output, a leader's scratch.
  const Ref nodeSum = root ? out : leader ? p.scratch(bytes) : out;
  Deps inside;
  if (members.size() > 1) {
    Embedding e;
    e.ranks = members;
    e.recv = nodeSum;
    e.tagOffset = tags::stageOffset(0, n);
    const CollArgs s = among(a, g.topo.localRank[static_cast<size_t>(a.rank)], static_cast<int>(members.size()),
                             g.topo.localRank[static_cast<size_t>(g.leader())], root && a.inPlace, codec::Params{});
    inside = splice(p, planCollective(Coll::kReduce, s), e, [](size_t, size_t) { return Deps{}; });
  }
  Deps done = inside;
  if (leader && g.topo.nodes() > 1) {
    Embedding e;
    e.ranks = g.leaders;
    const bool summed = members.size() > 1;  // the node's sum is in nodeSum, else the input
    e.send = summed ? nodeSum : Ref{Buf::kSend, 0};
    e.recv = root ? out : nodeSum;
    e.tagOffset = tags::stageOffset(1, n);
    const bool inPlace = root ? (summed || a.inPlace) : summed;
    const CollArgs s = among(a, g.node, g.topo.nodes(), g.rootNode, inPlace, codec::Params{});
    done = splice(p, planCollective(Coll::kReduce, s), e, [&](size_t, size_t) { return inside; });
    done.insert(done.end(), inside.begin(), inside.end());
  }
  if (root && a.op == cclAvg) p.divide(out, a.count, done);
  return p;
}

}  // namespace ccl::coll
