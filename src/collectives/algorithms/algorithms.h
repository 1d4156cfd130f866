// SPDX-License-Identifier: BSD-3-Clause
// Plan builders for every collective on uncompressed data. Each takes the caller's view of
// the call (counts as NCCL defines them) and returns this rank's plan.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>

#include "ccl/ccl.h"
#include "codecs/codec.h"
#include "collectives/plan/call_args.h"
#include "collectives/plan/collective_info.h"
#include "collectives/plan/plan.h"
#include "collectives/plan/topology.h"

namespace ccl::coll {

// Every algorithm of every collective, one row each: CCL_ALGO's name (kAlgoNames), the
// collective, whether it carries a codec's streams, the builder, when it can run a call,
// when CCL_ALGO=auto prefers it, and when its plans are the same at every rank up to a
// shift (the wave schedule then reads one block of plans: planShifts). The choice is
// chooseAlgorithm's: the row CCL_ALGO names when it has one for the collective and it
// applies, else the first row in table order that applies and is preferred. The last row of
// every collective applies to every call. AlgorithmTable.* checks every row
// (tests/unit/collectives/algorithms/algorithms_table_test.cc).
struct AlgoEntry {
  Algo algo;
  Coll coll;
  bool compressed;  // on a codec's streams (a.codec is a codec and the collective has them)
  Plan (*build)(const CollArgs&);
  bool (*applies)(const CollArgs&);    // nullptr: every call of its collective
  bool (*preferred)(const CollArgs&);  // by auto; nullptr: whenever it applies
  bool (*symmetric)(const CollArgs&);  // nullptr: never (a root, unequal nodes)
};
std::span<const AlgoEntry> algorithmTable();
// The row of `algo` for collective c, compressed or not; throws cclInvalidArgument when it
// has none or it does not apply to `a`.
const AlgoEntry& algorithm(Coll c, bool compressed, Algo algo, const CollArgs& a);
// The row that plans collective c (not point to point) with `a`.
const AlgoEntry& chooseAlgorithm(Coll c, const CollArgs& a);

// Whether a call with these arguments is carried compressed (float dtype, sum/avg, a codec).
bool compressible(const CollArgs& a);

// The plan of collective c (not point to point) for this rank: chooseAlgorithm(c, a)'s.
Plan planCollective(Coll c, const CollArgs& a);
// The shifts under which every rank's plan of collective c with `a` is the same (the rows'
// `symmetric`): of single ranks for flat plans, of whole nodes for hierarchical ones, by
// XOR where the ranks (or nodes) pair up by recursive doubling (shiftsByXor), else by
// rotation; Shifts::none when the plans differ.
Shifts planShifts(Coll c, const CollArgs& a);
// Whether algo's plans are shifts of each other by XOR (recursive doubling: rank r's partners
// are r ^ 2^i), not by rotation.
inline bool shiftsByXor(Algo algo) { return algo == Algo::kTree; }

inline Plan planAllReduce(const CollArgs& a) { return planCollective(Coll::kAllReduce, a); }
inline Plan planReduceScatter(const CollArgs& a) {
  return planCollective(Coll::kReduceScatter, a);
}  // count = recvcount
inline Plan planAllGather(const CollArgs& a) { return planCollective(Coll::kAllGather, a); }  // count = sendcount
inline Plan planBroadcast(const CollArgs& a) { return planCollective(Coll::kBroadcast, a); }
inline Plan planReduce(const CollArgs& a) { return planCollective(Coll::kReduce, a); }
inline Plan planAlltoAll(const CollArgs& a) { return planCollective(Coll::kAlltoAll, a); }  // count per peer
inline Plan planGather(const CollArgs& a) { return planCollective(Coll::kGather, a); }      // count per rank
inline Plan planScatter(const CollArgs& a) { return planCollective(Coll::kScatter, a); }    // count per rank

// Hierarchical plans (hierarchical/): allreduce inside each node, across nodes (compressed
// when a.codec is a codec), inside each node again; broadcast, reduce, allgather,
// reduce-scatter and all-to-all across and inside.
// They apply when a.topo has more than one node and more than one rank in some node.
bool hierarchicalApplies(const CollArgs& a);
Plan planHierarchicalAllReduce(const CollArgs& a);
Plan planHierarchicalBroadcast(const CollArgs& a);      // across nodes, then inside each
Plan planHierarchicalReduce(const CollArgs& a);         // inside each node, then across
Plan planHierarchicalAllGather(const CollArgs& a);      // inside, across among leaders, inside
Plan planHierarchicalReduceScatter(const CollArgs& a);  // to an owner per block inside, then across
Plan planHierarchicalAlltoAll(const CollArgs& a);       // one message per pair of nodes crosses
size_t hierarchicalFeedbackFloats(const CollArgs& a);
// Whether every rank's hierarchical allreduce is the same up to a shift of whole nodes: nodes
// of one size, and an allreduce across nodes whose plans are shifts of each other, the same
// kind (rotations, or XORs) for every shard.
bool hierarchicalAllReduceSymmetric(const CollArgs& a);
// The flat algorithm of the hierarchical allreduce's stage across nodes (local rank 0's shard).
Algo hierarchicalAllReduceAcross(const CollArgs& a);

// Compressed point to point (p2p.cc), a.misaligned's buffer staged (misaligned.h).
Plan planCompressedSend(const CollArgs& a, int peer, uint32_t tag);
Plan planCompressedRecv(const CollArgs& a, int peer, uint32_t tag);
// fp32 values of error-feedback state the plan of collective c with `a` (an allreduce,
// reduce-scatter, allgather or send of this rank) reads and updates.
size_t feedbackFloats(Coll c, const CollArgs& a);

// Point to point: one message of `bytes` to or from `peer`, matched by `tag`.
Plan planSend(int peer, uint32_t tag, size_t bytes);
Plan planRecv(int peer, uint32_t tag, size_t bytes);

// Shared by the builders.
namespace detail {
// The rows of the algorithm table (their collectives' trivial calls, no data or one rank,
// included), by family; each family's file holds its uncompressed and compressed rows.
// ring.cc:
Plan ringAllReduce(const CollArgs& a);  // reduce-scatter, then allgather
Plan ringReduceScatter(const CollArgs& a);
Plan ringAllGather(const CollArgs& a);
Plan compressedRingAllReduce(const CollArgs& a);  // random-k's values ring where they line up
bool compressedRingPreferred(const CollArgs& a);  // when auto prefers it
bool compressedRingSymmetric(const CollArgs& a);  // when its plans are the ring's rotations
// two_shot.cc:
Plan twoShotAllReduce(const CollArgs& a);
bool twoShotSymmetric(const CollArgs& a);
Plan compressedReduceScatter(const CollArgs& a);  // every rank's stream to each block's owner
// direct.cc:
Plan directAllReduce(const CollArgs& a);  // every rank to every rank, one round
Plan directBroadcast(const CollArgs& a);  // the root to every rank
Plan directReduce(const CollArgs& a);     // every rank to the root
Plan directAlltoAll(const CollArgs& a);
Plan directGather(const CollArgs& a);
Plan directScatter(const CollArgs& a);
Plan compressedAllGather(const CollArgs& a);  // each rank's stream to every rank
Plan compressedAlltoAll(const CollArgs& a);
// tree.cc:
Plan recursiveDoublingAllReduce(const CollArgs& a);  // CCL_ALGO=tree
// chain.cc:
Plan chainBroadcast(const CollArgs& a);  // CCL_ALGO=ring: pipelined along root, root+1, ...
Plan chainReduce(const CollArgs& a);     // CCL_ALGO=ring: root+1, root+2, ..., root
Plan compressedChainBroadcast(const CollArgs& a);
// sparse.cc:
Plan sparseAllReduce(const CollArgs& a);
// lowrank.cc (codec powersgd):
Plan powerSgdAllReduce(const CollArgs& a);
bool powerSgdSymmetric(const CollArgs& a);
// Shared by the builders (algorithms.cc; the compressed rows' own in codec_steps.h):
inline int mod(int a, int n) { return ((a % n) + n) % n; }
Plan emptyPlan(const CollArgs& a);
// The uncompressed allreduce that nothing crosses (no data, or one rank); nullopt otherwise.
std::optional<Plan> localAllReduce(const CollArgs& a);
// Whether the ring's n segments of `count` elements, chunked, all have as many chunks.
bool evenRingChunks(const CollArgs& a, size_t count, size_t elemSize);
// Chunks of a piece of `count` elements: at least one, each at most chunkBytes (rounded
// up so no plan needs more chunks per piece than the chunk tag field holds, common/tags.h).
Split chunks(size_t count, size_t elemSize, size_t chunkBytes);
// A tag unique within one plan for (phase, step, chunk): tags::stepTag.
uint32_t tag(int phase, int nranks, int step, size_t chunk);
// Adds an uncompressed ring allreduce of a.count elements of a.dtype held at `data` (the
// contribution, overwritten with the result), started after `after`, its tags moved by
// `tagOffset` (a second ring in one plan: tags::stageOffset). Returns every step that writes
// `data` or reads it for a reduction: the result is complete after all of them.
Deps ringAllReduceInPlace(Plan& p, const CollArgs& a, Ref data, const Deps& after, uint32_t tagOffset = 0);
}  // namespace detail

}  // namespace ccl::coll
