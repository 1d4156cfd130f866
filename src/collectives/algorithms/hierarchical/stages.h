// SPDX-License-Identifier: BSD-3-Clause
// What the hierarchical plans share (stages.cc): a flat plan spliced into a larger one as one
// of its stages, and each collective's view of this rank's node (its shape, its leaders, the
// calls among one rank per node or among a node's ranks).
#pragma once

#include <functional>
#include <vector>

#include "collectives/algorithms/algorithms.h"

namespace ccl::coll::hier {

// Where a spliced plan's buffers lie in the plan it joins.
struct Embedding {
  std::vector<int> ranks;  // the sub-plan's rank i is ranks[i]
  Ref send{Buf::kSend, 0}, recv{Buf::kRecv, 0};
  size_t feedback = 0;     // byte offset of its residual in Buf::kFeedback
  uint32_t tagOffset = 0;  // tags::stageOffset of its stage
  bool intra = false;      // its codec is the plan's intra-node codec (Step::intra)
};

// Appends `sub`'s steps to `p`, mapped by `e`. A step that touches bytes [offset, offset +
// bytes) of the sub-plan's send or receive buffer also waits for ready(offset, bytes): the
// steps of `p` that make those bytes (so a stage starts on the chunks the one before has
// finished, not after all of them). Returns the steps of `sub` no other step of it waits
// for: once they have run, all of it has.
using Ready = std::function<Deps(size_t offset, size_t bytes)>;
Deps splice(Plan& p, const Plan& sub, const Embedding& e, const Ready& ready);

// The shape of one rank's hierarchical allreduce.
struct Layout {
  const Topology& topo;
  int node, local, nodeSize;
  size_t shards;  // S: the smallest node's size
  Split split;    // the data cut into S shards
  bool owner() const { return static_cast<size_t>(local) < shards; }
};
Layout layoutOf(const CollArgs& a);

// The arguments of stage 1 of the allreduce for the owner of shard `l.local`: a flat
// allreduce, in place, among one rank per node, summing (an average divides once: at the end,
// or, where stage 0 keeps a 16-bit type's node sums in fp32, those before they cross).
CollArgs acrossNodes(const CollArgs& a, const Layout& l);

// Whether the steps inside a node go compressed: a codec for them, on a float sum.
bool intraCompressed(const CollArgs& a);

// This rank's node, for the allgather, reduce-scatter and all-to-all below; with a codec, `p`
// takes it (it carries their steps across nodes).
struct Place {
  const Topology& topo;
  int node;
  const std::vector<int>& members;  // the node's ranks
  bool squeeze;                     // a codec carries the steps across nodes
};
Place placeOf(const CollArgs& a, Plan& p);

// The nodes after `node` in order of distance (node + 1, node + 2, ..., modulo their number),
// `node` itself first when `self`: the order the allgather, reduce-scatter and all-to-all
// visit other nodes in, so at each step every node talks to a different one and none is
// sent to by all at once.
std::vector<int> byDistance(const Topology& t, int node, bool self = false);

// The rooted collectives' leaders: the root in the root's node, a node's first rank elsewhere.
struct Rooted {
  const Topology& topo;
  int node, rootNode;
  std::vector<int> leaders;  // per node
  int leader() const { return leaders[static_cast<size_t>(node)]; }
};
Rooted rootedOf(const CollArgs& a);

// A flat call among `size` ranks (this rank's index `index`, the root's `root`).
CollArgs among(const CollArgs& a, int index, int size, int root, bool inPlace, const codec::Params& codec);

// The codec of the steps inside a node: a.intraCodec where intraCompressed, else none.
const codec::Params& intraCodecOf(const CollArgs& a);

}  // namespace ccl::coll::hier
