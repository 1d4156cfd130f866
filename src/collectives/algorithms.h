// SPDX-License-Identifier: BSD-3-Clause
// Plan builders for every collective on uncompressed data. Each takes the caller's view of
// the call (counts as NCCL defines them) and returns this rank's plan.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "ccl/ccl.h"
#include "codecs/codec.h"
#include "collectives/collective_info.h"
#include "collectives/plan.h"
#include "collectives/topology.h"

namespace ccl::coll {

enum class Algo { kAuto, kRing, kTree, kDirect, kTwoShot, kSparse, kHier };

// Parses CCL_ALGO values ("auto", "ring", "tree", "direct"); throws cclInvalidArgument.
Algo parseAlgo(const std::string& name);
const char* algoName(Algo a);

struct CollArgs {
  int rank = 0;
  int nranks = 1;
  size_t count = 0;  // the count argument of the call, in elements
  cclDataType_t dtype = cclFloat32;
  cclRedOp_t op = cclSum;
  int root = 0;
  bool inPlace = false;  // the send buffer is the in-place position inside the receive buffer
  size_t chunkBytes = 1 << 20;
  Algo algo = Algo::kAuto;
  size_t treeMaxBytes = 64 << 10;  // auto: allreduce up to this size uses recursive doubling
  size_t directMaxBytes = 1024;    // auto: allreduce up to this size goes to every rank in one round
  // Compression: codec none means the uncompressed plans. With `feedback` the caller passes
  // a residual buffer of feedbackFloats(args) fp32 values (Buf::kFeedback).
  codec::Params codec;
  bool feedback = false;
  // The communicator's nodes (not owned); nullptr: one node. Hierarchical plans need it.
  const Topology* topo = nullptr;
  // The codec of a hierarchical plan's steps inside a node (none: uncompressed); a.codec is
  // the codec of the steps across nodes. Applied to float sums and averages only.
  codec::Params intraCodec;
};

// Every algorithm of every collective that has a choice of them, one row each: CCL_ALGO's
// names (kAlgoNames), the builder, and when it applies beyond its collective and whether
// the call is compressed. The choice among the rows that apply is chooseAllReduce's and
// chooseCompressedAllReduce's; the hierarchical rows take any collective they exist for when
// hierarchicalApplies. AlgorithmTable.EveryRowBuildsAndIsNamed (api_tables_test) checks every row.
struct AlgoEntry {
  Algo algo;
  Coll coll;
  bool compressed;  // on a codec's streams (a.codec is a codec)
  Plan (*build)(const CollArgs&);
  bool (*applies)(const CollArgs&);  // nullptr: every call of its collective
};
std::span<const AlgoEntry> algorithmTable();
// The row of `algo` for collective c, compressed or not; throws cclInvalidArgument when it
// has none or it does not apply to `a`.
const AlgoEntry& algorithm(Coll c, bool compressed, Algo algo, const CollArgs& a);

// Whether a call with these arguments is carried compressed (float dtype, sum/avg, a codec).
bool compressible(const CollArgs& a);

// The algorithm allreduce uses for these arguments (resolving kAuto).
Algo chooseAllReduce(const CollArgs& a);

Plan planAllReduce(const CollArgs& a);
Plan planRingAllReduce(const CollArgs& a);  // the flat ring (reduce-scatter, then allgather)
Plan planReduceScatter(const CollArgs& a);  // count = recvcount
Plan planAllGather(const CollArgs& a);      // count = sendcount
Plan planBroadcast(const CollArgs& a);
Plan planReduce(const CollArgs& a);
Plan planAlltoAll(const CollArgs& a);  // count per peer
Plan planGather(const CollArgs& a);    // count per rank
Plan planScatter(const CollArgs& a);   // count per rank

// Hierarchical plans (hierarchical.cc): allreduce inside each node, across nodes (compressed
// when a.codec is a codec), inside each node again; broadcast, reduce, allgather,
// reduce-scatter and all-to-all across and inside.
// They apply when a.topo has more than one node and more than one rank in some node, and
// a.algo is kHier or kAuto.
bool hierarchicalApplies(const CollArgs& a);
Plan planHierarchicalAllReduce(const CollArgs& a);
Plan planHierarchicalBroadcast(const CollArgs& a);      // across nodes, then inside each
Plan planHierarchicalReduce(const CollArgs& a);         // inside each node, then across
Plan planHierarchicalAllGather(const CollArgs& a);      // inside, across among leaders, inside
Plan planHierarchicalReduceScatter(const CollArgs& a);  // to an owner per block inside, then across
Plan planHierarchicalAlltoAll(const CollArgs& a);       // one message per pair of nodes crosses
size_t hierarchicalFeedbackFloats(const CollArgs& a);

// Compressed plans (compressible(a) must hold; see compressed.cc for the algorithms).
Algo chooseCompressedAllReduce(const CollArgs& a);
Plan planCompressedAllReduce(const CollArgs& a);
Plan planCompressedReduceScatter(const CollArgs& a);
Plan planCompressedAllGather(const CollArgs& a);
Plan planCompressedBroadcast(const CollArgs& a);
Plan planCompressedAlltoAll(const CollArgs& a);
Plan planCompressedSend(const CollArgs& a, int peer, uint32_t tag);
Plan planCompressedRecv(const CollArgs& a, int peer, uint32_t tag);
// fp32 values of error-feedback state the plan of collective c with `a` (an allreduce,
// reduce-scatter, allgather or send of this rank) reads and updates.
size_t feedbackFloats(Coll c, const CollArgs& a);

// The plan of collective c (not point to point) for this rank: the compressed plan when
// a.codec is a codec and the collective has one, else the uncompressed one.
Plan planCollective(Coll c, const CollArgs& a);

// Point to point: one message of `bytes` to or from `peer`, matched by `tag`.
Plan planSend(int peer, uint32_t tag, size_t bytes);
Plan planRecv(int peer, uint32_t tag, size_t bytes);

// Shared by the builders.
namespace detail {
// The rows of the algorithm table for allreduce.
Plan directAllReduce(const CollArgs& a);
Plan recursiveDoublingAllReduce(const CollArgs& a);
Plan twoShotAllReduce(const CollArgs& a);
Plan compressedRingAllReduce(const CollArgs& a);  // random-k's values ring where they line up
Plan sparseAllReduce(const CollArgs& a);
inline int mod(int a, int n) { return ((a % n) + n) % n; }
Plan emptyPlan(const CollArgs& a);
// Chunks of a piece of `count` elements: at least one, each at most chunkBytes (rounded
// up so no plan needs more chunks per piece than the chunk tag field holds, common/tags.h).
Split chunks(size_t count, size_t elemSize, size_t chunkBytes);
// A tag unique within one plan for (phase, step, chunk): tags::stepTag.
uint32_t tag(int phase, int nranks, int step, size_t chunk);
// Adds an uncompressed ring allreduce of a.count elements of a.dtype held at `data` (the
// contribution, overwritten with the result), started after `after`. Returns every step
// that writes `data` or reads it for a reduction: the result is complete after all of them.
Deps ringAllReduceInPlace(Plan& p, const CollArgs& a, Ref data, const Deps& after);
}  // namespace detail

}  // namespace ccl::coll
