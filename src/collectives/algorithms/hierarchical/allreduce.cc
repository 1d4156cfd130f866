// SPDX-License-Identifier: BSD-3-Clause
// The hierarchical allreduce over a communicator's nodes (collectives/plan/topology.h; the other
// collectives' are this folder's other files). It runs three stages as one plan:
//
//   0  inside each node, a reduce-scatter: the data is cut into S shards (S the size of the
//      smallest node); local rank s of every node owns shard s and receives every local
//      rank's chunks of it, which it adds in local-rank order. Uncompressed unless
//      a.intraCodec says otherwise: the links inside a node are fast, and a codec there
//      costs more than it saves (perf/README.md, "Compression on shared memory"). A
//      compressed call of a 16-bit type sums in fp32 (as a two-shot allreduce does) and
//      rounds the node's sum to the type once, an average divided first (in fp32): a
//      node's sum of fp16 values may not fit fp16 where their average does (ccl.h), and
//      stage 1 takes the call's type (a spliced plan has the plan's), so the average is
//      the sum over nodes of these node sums divided by every rank.
//   1  across nodes, for each shard s, an allreduce among the owners of shard s (one rank per
//      node): a flat plan of the communicator's codec (two-shot, ring, sparse; error feedback
//      on the owner's shard), spliced in with its peers mapped to the owners' ranks. Each of
//      its steps waits for the chunks of stage 0 it touches, so the stages overlap.
//   2  inside each node, an allgather: every owner sends its shard to the node's other ranks
//      (with a.intraCodec: encoded once, decoded by every rank of the node, the owner too).
//
// Only stage 1 crosses nodes, so a node's link carries what a flat allreduce of one rank per
// node would, however many ranks the node has. With nodes of unequal size, local ranks S and
// above of the larger nodes own no shard: they hand their data to the owners and receive the
// result. Every rank ends with the same bits: each shard is summed by one owner per node, the
// flat plan of stage 1 gives its ranks the same bits, and stage 2 copies them.
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

namespace {

// The flat allreduce across nodes of the shard that local rank `local` owns.
const AlgoEntry& acrossRow(const CollArgs& a, int local, CollArgs* across) {
  CollArgs owner = a;
  owner.rank = a.topo->rankOf(0, local);
  *across = acrossNodes(owner, layoutOf(owner));
  return chooseAlgorithm(Coll::kAllReduce, *across);
}

}  // namespace

bool hierarchicalAllReduceSymmetric(const CollArgs& a) {
  if (!a.topo || !a.topo->uniform()) return false;
  // Inside a node, ranks of one local index have the same part in every node; across nodes
  // each shard's owners run a flat allreduce, which must be the same on every node, and
  // shift the same way for every shard (the largest and the smallest shard's are checked).
  const Topology& t = *a.topo;
  bool byXor = false;
  for (int local : {0, t.nodeSize(0) - 1}) {
    CollArgs across;
    const AlgoEntry& e = acrossRow(a, local, &across);
    if (!e.symmetric || !e.symmetric(across)) return false;
    if (local == 0)
      byXor = shiftsByXor(e.algo);
    else if (shiftsByXor(e.algo) != byXor)
      return false;
  }
  return true;
}

Algo hierarchicalAllReduceAcross(const CollArgs& a) {
  CollArgs across;
  return acrossRow(a, 0, &across).algo;
}

size_t hierarchicalFeedbackFloats(const CollArgs& a) {
  const Layout l = layoutOf(a);
  return l.owner() ? feedbackFloats(Coll::kAllReduce, acrossNodes(a, l)) : 0;
}

namespace {

// One rank's hierarchical allreduce as it is built, stage by stage, in the order its steps
// are added: stage 0 (a shard's chunks to its owner, which sums them), stage 1 (the owners
// allreduce their shard across nodes), stage 2 (the owners send it back inside the node).
// What a stage leaves the next is kept here: the steps that read a shard's chunks for its
// owner (`sent_`), and those that made each chunk of the owner's sum (`made_`, `shardDone_`).
class AllReduceBuilder {
 public:
  explicit AllReduceBuilder(const CollArgs& a)
      : a_(a),
        p_(detail::emptyPlan(a)),
        l_(layoutOf(a)),
        es_(dataTypeSize(a.dtype)),
        in_(a.inPlace ? Ref{Buf::kRecv, 0} : Ref{Buf::kSend, 0}),
        squeeze_(intraCompressed(a)),
        wide_((squeeze_ || compressible(a)) && a.dtype != cclFloat32),
        sent_(l_.shards) {
    // Compressed inside the node (a.intraCodec): each contribution goes as a stream the owner
    // adds into an fp32 sum (its own contribution exact, as in a two-shot allreduce).
    if (squeeze_) p_.intraCodec = a.intraCodec;
  }

  Plan build() {
    for (size_t s = 0; s < l_.shards; ++s) {
      if (owns(s))
        sumShard(s);
      else
        sendShard(s);
    }
    const Deps reduced = reduceAcrossNodes();
    for (size_t s = 0; s < l_.shards; ++s) gatherShard(s, reduced);
    return std::move(p_);
  }

 private:
  // A chunk of the owner's sum: its bytes in the shard, and the steps that made it.
  struct Made {
    size_t begin, end;
    Deps by;
  };

  int localRank(int local) const { return l_.topo.rankOf(l_.node, local); }
  int ownerOf(size_t s) const { return localRank(static_cast<int>(s)); }
  bool owns(size_t s) const { return ownerOf(s) == a_.rank; }
  // Chunk j's tag in stage 0 (inside the node, to the owner) or 2 (back from it).
  uint32_t tagOf(int stage, size_t j) const {
    return tags::stageOffset(stage, a_.nranks) + detail::tag(0, a_.nranks, 0, j);
  }
  Split chunksOf(size_t s) const { return detail::chunks(l_.split.size(s), es_, a_.chunkBytes); }

  std::tuple<Ref, size_t, Slot> intraStream(size_t count) {
    const size_t cap = codec::maxEncodedBytes(a_.intraCodec, count);
    return std::make_tuple(p_.scratch(cap), cap, p_.newSlot());
  }
  // `salt` separates the stochastic-rounding draws of different streams.
  std::tuple<Ref, Slot, StepId> encodeIntra(Ref src, size_t count, uint32_t salt, const Deps& after) {
    auto [buf, cap, slot] = intraStream(count);
    const StepId e = p_.encode(buf, cap, slot, src, a_.dtype, count, nullptr, after);
    p_.steps[e].intra = true;
    p_.steps[e].seedSalt = salt;
    return std::make_tuple(buf, slot, e);
  }

  // Stage 0 where this rank does not own shard s: its chunks to the owner.
  void sendShard(size_t s) {
    const size_t off = l_.split.offset(s);
    const Split ch = chunksOf(s);
    for (size_t j = 0; j < ch.parts; ++j) {
      const Ref src = in_ + (off + ch.offset(j)) * es_;
      if (!squeeze_) {
        sent_[s].push_back(p_.send(ownerOf(s), tagOf(0, j), src, ch.size(j) * es_));
        continue;
      }
      // Draws of this rank's own, for each of its contributions.
      auto [buf, slot, e] =
          encodeIntra(src, ch.size(j), static_cast<uint32_t>(a_.rank + 1) * 0x10000u + sent_[s].size(), {});
      sent_[s].push_back(e);
      p_.sendStream(ownerOf(s), tagOf(0, j), buf, slot, ch.size(j), {e});
    }
  }

  // Stage 0 at shard s's owner: the node's sum, in place in the output, or in fp32 scratch
  // for a compressed bf16/fp16 sum (narrowed into the output at the end, an average divided).
  void sumShard(size_t s) {
    const size_t off = l_.split.offset(s), cnt = l_.split.size(s);
    const Split ch = chunksOf(s);
    const Ref acc = wide_ ? p_.scratch(cnt * sizeof(float)) : out_ + off * es_;
    const size_t accSize = wide_ ? sizeof(float) : es_;
    // Read in place (kRecvReduce): the first contribution is added to this rank's own as it
    // arrives, into the output, so the own one needs no copy there first.
    const bool fuse = a_.readInPlace && !squeeze_ && !wide_ && l_.nodeSize > 1;
    Deps have;
    if (wide_ && cnt)
      have = {p_.widen(acc, in_ + off * es_, cnt)};
    else if (!a_.inPlace && cnt && !fuse)
      have = {p_.copy(out_ + off * es_, in_ + off * es_, cnt * es_)};
    for (size_t j = 0; j < ch.parts; ++j) {
      const Ref chunk = acc + ch.offset(j) * accSize;
      Deps last = addContributions(chunk, in_ + (off + ch.offset(j)) * es_, ch.size(j), j, fuse, have);
      if (wide_ && ch.size(j))
        last = {p_.narrow(out_ + (off + ch.offset(j)) * es_, chunk, ch.size(j), a_.op == cclAvg, last)};
      shardDone_.insert(shardDone_.end(), last.begin(), last.end());
      made_.push_back({ch.offset(j) * es_, (ch.offset(j) + ch.size(j)) * es_, last});
    }
  }

  // The node's other ranks' chunk j added into `chunk` (this rank's own at `own`), in
  // local-rank order; returns the step that added the last.
  Deps addContributions(Ref chunk, Ref own, size_t size, size_t j, bool fuse, Deps last) {
    bool first = true;
    for (int k = 0; k < l_.nodeSize; ++k) {
      if (k == l_.local) continue;
      if (fuse && first) {
        // The later contributions wait for this one (the sum's order is fixed), so only
        // the first is posted at once and read in place.
        first = false;
        last = {p_.recvReduce(localRank(k), tagOf(0, j), chunk, own, p_.scratch(size * es_), size)};
        continue;
      }
      Deps after = last;
      if (squeeze_) {
        auto [buf, cap, slot] = intraStream(size);
        after.push_back(p_.recvStream(localRank(k), tagOf(0, j), buf, cap, slot));
        const StepId d = p_.decodeAdd(chunk, buf, slot, size, after);
        p_.steps[d].intra = true;
        last = {d};
        continue;
      }
      const Ref tmp = p_.scratch(size * es_);
      after.push_back(p_.recv(localRank(k), tagOf(0, j), tmp, size * es_));
      last = {wide_ ? p_.reduceWide(chunk, chunk, tmp, size, after) : p_.reduce(chunk, chunk, tmp, size, after)};
    }
    return last;
  }

  // Stage 1: the owners of each shard, one per node, allreduce it. Each step of the
  // allreduce across nodes waits for the chunks of the node's sum it touches.
  Deps reduceAcrossNodes() {
    if (!l_.owner()) return shardDone_;
    const CollArgs across = acrossNodes(a_, l_);
    Embedding e;
    for (int node = 0; node < l_.topo.nodes(); ++node) e.ranks.push_back(l_.topo.rankOf(node, l_.local));
    const size_t off = l_.split.offset(static_cast<size_t>(l_.local));
    e.send = e.recv = out_ + off * es_;
    e.tagOffset = tags::stageOffset(1, a_.nranks);
    auto ready = [&](size_t offset, size_t bytes) {
      Deps d;
      for (const Made& m : made_)
        if (m.begin < offset + std::max<size_t>(bytes, 1) && offset < std::max(m.end, m.begin + 1))
          d.insert(d.end(), m.by.begin(), m.by.end());
      return d.empty() ? shardDone_ : d;
    };
    Deps reduced = splice(p_, planCollective(Coll::kAllReduce, across), e, ready);
    reduced.insert(reduced.end(), shardDone_.begin(), shardDone_.end());
    // Node sums kept in fp32 were divided before they crossed (sumShard).
    if (a_.op == cclAvg && !wide_ && across.count) reduced = {p_.divide(out_ + off * es_, across.count, reduced)};
    return reduced;
  }

  // Stage 2: shard s from its owner to the node's other ranks. Compressed inside the node,
  // the owner encodes each chunk once and takes the decoded values too, so every rank has
  // the same bits.
  void gatherShard(size_t s, const Deps& reduced) {
    const Split ch = chunksOf(s);
    for (size_t j = 0; j < ch.parts; ++j) {
      const Ref chunk = out_ + (l_.split.offset(s) + ch.offset(j)) * es_;
      const size_t size = ch.size(j);
      const uint32_t t = tagOf(2, j);
      if (!owns(s)) {
        // In place, the chunk is where stage 0 read this rank's contribution from.
        if (!squeeze_) {
          p_.recv(ownerOf(s), t, chunk, size * es_, {sent_[s][j]});
          continue;
        }
        auto [buf, cap, slot] = intraStream(size);
        const StepId got = p_.recvStream(ownerOf(s), t, buf, cap, slot);
        const StepId d = p_.decode(chunk, a_.dtype, buf, slot, size, {got, sent_[s][j]});
        p_.steps[d].intra = true;
        continue;
      }
      if (!squeeze_) {
        for (int k = 0; k < l_.nodeSize; ++k)
          if (k != l_.local) p_.send(localRank(k), t, chunk, size * es_, reduced);
        continue;
      }
      // The same draws at every node's owner of this shard: they encode the same sum, and so
      // send every rank of every node the same bits.
      auto [buf, slot, e] = encodeIntra(chunk, size, 0x80000000u + static_cast<uint32_t>(s * ch.parts + j), reduced);
      for (int k = 0; k < l_.nodeSize; ++k)
        if (k != l_.local) p_.sendStream(localRank(k), t, buf, slot, size, {e});
      const StepId d = p_.decode(chunk, a_.dtype, buf, slot, size, {e});
      p_.steps[d].intra = true;
    }
  }

  const CollArgs& a_;
  Plan p_;
  const Layout l_;
  const size_t es_;
  const Ref in_, out_{Buf::kRecv, 0};
  const bool squeeze_;
  const bool wide_;                        // stage 0 sums in fp32: a compressed call of a 16-bit type
  std::vector<std::vector<StepId>> sent_;  // by shard: the steps that read its chunks for its owner
  std::vector<Made> made_;
  Deps shardDone_;  // the owner's shard is the node's sum
};

}  // namespace

Plan planHierarchicalAllReduce(const CollArgs& a) {
  if (a.count == 0) return detail::emptyPlan(a);
  return AllReduceBuilder(a).build();
}

}  // namespace ccl::coll
