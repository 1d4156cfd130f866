// SPDX-License-Identifier: BSD-3-Clause
// Hierarchical plans over a communicator's nodes (collectives/topology.h): allreduce first,
// then the rooted collectives, allgather, reduce-scatter and all-to-all (each section says
// how). The allreduce runs three stages as one plan:
//
//   0  inside each node, a reduce-scatter: the data is cut into S shards (S the size of the
//      smallest node); local rank s of every node owns shard s and receives every local
//      rank's chunks of it, which it adds in local-rank order. Uncompressed unless
//      a.intraCodec says otherwise: the links inside a node are fast, and a codec there
//      costs more than it saves (perf/README.md, "Compression on shared memory").
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
#include <functional>
#include <tuple>
#include <vector>

#include "codecs/codec.h"
#include "collectives/algorithms.h"
#include "common/dtype.h"
#include "common/error.h"
#include "common/tags.h"

namespace ccl::coll {

namespace {

// Where a spliced plan's buffers lie in the plan it joins.
struct Embedding {
  std::vector<int> ranks;  // the sub-plan's rank i is ranks[i]
  Ref send{Buf::kSend, 0}, recv{Buf::kRecv, 0};
  size_t feedback = 0;     // byte offset of its residual in Buf::kFeedback
  uint32_t tagOffset = 0;  // tags::stageOffset of its stage
  bool intra = false;      // its codec is the plan's intra-node codec (Step::intra)
};

// The bytes of the sub-plan's send and receive buffers step `s` reads or writes, as
// (ref, bytes) pairs; compute steps are counted at four bytes an element at least (an fp32
// view), which can only add waits.
std::vector<std::pair<Ref, size_t>> touched(const Step& s, size_t es) {
  const size_t elems = s.count * std::max<size_t>(es, sizeof(float));
  switch (s.kind) {
    case StepKind::kSend:
      return {{s.src, s.bytes}};
    case StepKind::kRecv:
      return {{s.dst, s.bytes}};
    case StepKind::kCopy:
      return {{s.dst, s.bytes}, {s.src, s.bytes}};
    case StepKind::kReduce:
      return {{s.dst, elems}, {s.src, elems}, {s.src2, elems}};
    case StepKind::kRecvReduce:
      return {{s.dst, elems}, {s.src, elems}};
    case StepKind::kEncode:
    case StepKind::kDecodeAddEncode:
      return {{s.src, elems}};
    case StepKind::kDecode:
    case StepKind::kDecodeAdd:
    case StepKind::kDivide:
    case StepKind::kDivideFloat:
      return {{s.dst, elems}};
    case StepKind::kWiden:
    case StepKind::kNarrow:
    case StepKind::kLowRankStart:
    case StepKind::kLowRankMiddle:
    case StepKind::kLowRankFinish:
      return {{s.dst, elems}, {s.src, elems}};
  }
  return {};
}

// Appends `sub`'s steps to `p`, mapped by `e`. A step that touches bytes [offset, offset +
// bytes) of the sub-plan's send or receive buffer also waits for ready(offset, bytes): the
// steps of `p` that make those bytes (so a stage starts on the chunks the one before has
// finished, not after all of them). Returns the steps of `sub` no other step of it waits
// for: once they have run, all of it has.
using Ready = std::function<Deps(size_t offset, size_t bytes)>;
Deps splice(Plan& p, const Plan& sub, const Embedding& e, const Ready& ready) {
  CCL_CHECK(sub.dtype == p.dtype && sub.op == p.op, cclInternalError, "splice: a plan of another type or op");
  if (sub.codec.codec != cclCodecNone) {
    codec::Params& level = e.intra ? p.intraCodec : p.codec;
    CCL_CHECK(level.codec == cclCodecNone || level.codec == sub.codec.codec, cclInternalError,
              "splice: two codecs on one level of a plan");
    level = sub.codec;
  }
  const Ref scratch = p.scratch(sub.scratchBytes);
  auto map = [&](Ref r) -> Ref {
    switch (r.buf) {
      case Buf::kSend:
        return e.send + r.offset;
      case Buf::kRecv:
        return e.recv + r.offset;
      case Buf::kScratch:
        return scratch + r.offset;
      case Buf::kFeedback:
        return {Buf::kFeedback, e.feedback + r.offset};
    }
    return r;
  };
  const auto base = static_cast<StepId>(p.steps.size());
  const auto slots = p.lengthSlots;
  std::vector<char> waitedFor(sub.steps.size(), 0);
  for (StepId d : sub.deps) waitedFor[d] = 1;
  Deps ends;
  for (size_t i = 0; i < sub.steps.size(); ++i) {
    Step s = sub.steps[i];
    Deps deps;
    for (uint32_t d = 0; d < s.numDeps; ++d) deps.push_back(base + sub.deps[s.firstDep + d]);
    for (const auto& [ref, bytes] : touched(s, dataTypeSize(sub.dtype)))
      if (ref.buf == Buf::kSend || ref.buf == Buf::kRecv) {
        const Deps more = ready(ref.offset, bytes);
        deps.insert(deps.end(), more.begin(), more.end());
      }
    forEachRef(s, [&](Ref& r) { r = map(r); });
    if (s.peer >= 0) s.peer = e.ranks.at(static_cast<size_t>(s.peer));
    if (s.kind == StepKind::kSend || isReceive(s.kind)) s.tag += e.tagOffset;
    forEachSlot(s, [&](Slot& slot) { slot += slots; });
    s.intra = e.intra;
    const StepId id = p.add(s, deps);
    if (!waitedFor[i]) ends.push_back(id);
  }
  p.lengthSlots = slots + sub.lengthSlots;
  return ends;
}

// The shape of one rank's hierarchical allreduce.
struct Layout {
  const Topology& topo;
  int node, local, nodeSize;
  size_t shards;  // S: the smallest node's size
  Split split;    // the data cut into S shards
  bool owner() const { return static_cast<size_t>(local) < shards; }
};

Layout layoutOf(const CollArgs& a) {
  const Topology& t = *a.topo;
  CCL_CHECK(t.nranks() == a.nranks, cclInternalError, "a topology of another communicator");
  int smallest = t.nodeSize(0);
  for (int n = 1; n < t.nodes(); ++n) smallest = std::min(smallest, t.nodeSize(n));
  const int node = t.nodeOf[static_cast<size_t>(a.rank)];
  return Layout{t,
                node,
                t.localRank[static_cast<size_t>(a.rank)],
                t.nodeSize(node),
                static_cast<size_t>(smallest),
                Split{a.count, static_cast<size_t>(smallest)}};
}

// The arguments of stage 1 for the owner of shard `shard`: a flat allreduce, in place, among
// one rank per node, summing (an average divides once, at the end).
CollArgs acrossNodes(const CollArgs& a, const Layout& l) {
  CollArgs s = a;
  s.rank = l.node;
  s.nranks = l.topo.nodes();
  s.count = l.split.size(static_cast<size_t>(l.local));
  s.inPlace = true;
  s.op = a.op == cclAvg ? cclSum : a.op;
  s.topo = nullptr;
  // Its steps wait for the node's sum (splice): receives posted that late would arrive
  // first and be copied aside, and across nodes nothing is held in shared memory.
  s.readInPlace = false;
  if (s.algo == Algo::kHier) s.algo = Algo::kAuto;
  return s;
}

// Whether the steps inside a node go compressed: a codec for them, on a float sum.
bool intraCompressed(const CollArgs& a) {
  CollArgs inside = a;
  inside.codec = a.intraCodec;
  return compressible(inside);
}

// This rank's node, for the allgather, reduce-scatter and all-to-all below; with a codec, `p`
// takes it (it carries their steps across nodes).
struct Place {
  const Topology& topo;
  int node;
  const std::vector<int>& members;  // the node's ranks
  bool squeeze;                     // a codec carries the steps across nodes
};
Place placeOf(const CollArgs& a, Plan& p) {
  const Topology& t = *a.topo;
  CCL_CHECK(t.nranks() == a.nranks, cclInternalError, "a topology of another communicator");
  const bool squeeze = a.codec.codec != cclCodecNone;
  if (squeeze) p.codec = a.codec;
  const int node = t.nodeOf[static_cast<size_t>(a.rank)];
  return {t, node, t.members[static_cast<size_t>(node)], squeeze};
}

// The nodes after `node` in order of distance (node + 1, node + 2, ..., modulo their number),
// `node` itself first when `self`: the order the allgather, reduce-scatter and all-to-all
// visit other nodes in, so at each step every node talks to a different one and none is
// sent to by all at once.
std::vector<int> byDistance(const Topology& t, int node, bool self = false) {
  std::vector<int> out;
  for (int k = self ? 0 : 1; k < t.nodes(); ++k) out.push_back((node + k) % t.nodes());
  return out;
}

}  // namespace

bool hierarchicalApplies(const CollArgs& a) { return a.topo && a.topo->layered(); }

bool hierarchicalAllReduceSymmetric(const CollArgs& a) {
  if (!a.topo || !a.topo->uniform()) return false;
  // Inside a node, ranks of one local index have the same part in every node; across nodes
  // each shard's owners run a flat allreduce, which must be the same on every node.
  const Topology& t = *a.topo;
  for (int local : {0, t.nodeSize(0) - 1}) {
    CollArgs owner = a;
    owner.rank = t.rankOf(0, local);
    const CollArgs across = acrossNodes(owner, layoutOf(owner));
    const AlgoEntry& e = chooseAlgorithm(Coll::kAllReduce, across);
    if (!e.symmetric || !e.symmetric(across)) return false;
  }
  return true;
}

size_t hierarchicalFeedbackFloats(const CollArgs& a) {
  const Layout l = layoutOf(a);
  return l.owner() ? feedbackFloats(Coll::kAllReduce, acrossNodes(a, l)) : 0;
}

Plan planHierarchicalAllReduce(const CollArgs& a) {
  Plan p = detail::emptyPlan(a);
  if (a.count == 0) return p;
  const Layout l = layoutOf(a);
  const size_t es = dataTypeSize(a.dtype);
  const int n = a.nranks;
  const Ref in = a.inPlace ? Ref{Buf::kRecv, 0} : Ref{Buf::kSend, 0}, out{Buf::kRecv, 0};
  auto localRank = [&](int local) { return l.topo.rankOf(l.node, local); };
  const uint32_t intraTags = tags::stageOffset(0, n), gatherTags = tags::stageOffset(2, n);

  // Stage 0: each shard's chunks to its owner; the owner adds them in local-rank order.
  // Compressed inside the node (a.intraCodec): each contribution goes as a stream the owner
  // adds into an fp32 sum (its own contribution exact, as in a two-shot allreduce).
  const bool squeeze = intraCompressed(a);
  if (squeeze) p.intraCodec = a.intraCodec;
  const size_t fs = sizeof(float);
  auto intraStream = [&](size_t count) {
    const size_t cap = codec::maxEncodedBytes(a.intraCodec, count);
    return std::make_tuple(p.scratch(cap), cap, p.newSlot());
  };
  // `salt` separates the stochastic-rounding draws of different streams.
  auto encodeIntra = [&](Ref src, size_t count, uint32_t salt, const Deps& after) {
    auto [buf, cap, slot] = intraStream(count);
    const StepId e = p.encode(buf, cap, slot, src, a.dtype, count, nullptr, after);
    p.steps[e].intra = true;
    p.steps[e].seedSalt = salt;
    return std::make_tuple(buf, slot, e);
  };
  Deps shardDone;                                   // the owner's shard is the node's sum
  std::vector<std::vector<StepId>> sent(l.shards);  // a shard's chunks read for its owner
  struct Made {                                     // a chunk of the owner's sum: its bytes
    size_t begin, end;                              // in the shard, and the steps that made it
    Deps by;
  };
  std::vector<Made> made;
  for (size_t s = 0; s < l.shards; ++s) {
    const size_t off = l.split.offset(s), cnt = l.split.size(s);
    const Split ch = detail::chunks(cnt, es, a.chunkBytes);
    const int owner = localRank(static_cast<int>(s));
    if (owner != a.rank) {
      for (size_t j = 0; j < ch.parts; ++j) {
        const Ref src = in + (off + ch.offset(j)) * es;
        const uint32_t t = intraTags + detail::tag(0, n, 0, j);
        if (!squeeze) {
          sent[s].push_back(p.send(owner, t, src, ch.size(j) * es));
          continue;
        }
        // Draws of this rank's own, for each of its contributions.
        auto [buf, slot, e] =
            encodeIntra(src, ch.size(j), static_cast<uint32_t>(a.rank + 1) * 0x10000u + sent[s].size(), {});
        sent[s].push_back(e);
        p.sendStream(owner, t, buf, slot, ch.size(j), {e});
      }
      continue;
    }
    // The owner's sum: in place in the output, or in fp32 scratch for a compressed bf16/fp16
    // sum (narrowed into the output at the end).
    const bool widened = squeeze && a.dtype != cclFloat32;
    const Ref acc = widened ? p.scratch(cnt * fs) : out + off * es;
    const size_t accSize = widened ? fs : es;
    // Read in place (kRecvReduce): the first contribution is added to this rank's own as it
    // arrives, into the output, so the own one needs no copy there first.
    const bool fuse = a.readInPlace && !squeeze && l.nodeSize > 1;
    Deps have;
    if (widened && cnt)
      have = {p.widen(acc, in + off * es, cnt)};
    else if (!a.inPlace && cnt && !fuse)
      have = {p.copy(out + off * es, in + off * es, cnt * es)};
    for (size_t j = 0; j < ch.parts; ++j) {
      const Ref chunk = acc + ch.offset(j) * accSize;
      Deps last = have;
      bool first = true;
      for (int k = 0; k < l.nodeSize; ++k) {
        if (k == l.local) continue;
        const uint32_t t = intraTags + detail::tag(0, n, 0, j);
        if (fuse && first) {
          // The later contributions wait for this one (the sum's order is fixed), so only
          // the first is posted at once and read in place.
          first = false;
          last = {p.recvReduce(localRank(k), t, chunk, in + (off + ch.offset(j)) * es, p.scratch(ch.size(j) * es),
                               ch.size(j))};
          continue;
        }
        Deps after = last;
        if (squeeze) {
          auto [buf, cap, slot] = intraStream(ch.size(j));
          after.push_back(p.recvStream(localRank(k), t, buf, cap, slot));
          const StepId d = p.decodeAdd(chunk, buf, slot, ch.size(j), after);
          p.steps[d].intra = true;
          last = {d};
          continue;
        }
        const Ref tmp = p.scratch(ch.size(j) * es);
        after.push_back(p.recv(localRank(k), t, tmp, ch.size(j) * es));
        last = {p.reduce(chunk, chunk, tmp, ch.size(j), after)};
      }
      if (widened && ch.size(j)) last = {p.narrow(out + (off + ch.offset(j)) * es, chunk, ch.size(j), false, last)};
      shardDone.insert(shardDone.end(), last.begin(), last.end());
      made.push_back({ch.offset(j) * es, (ch.offset(j) + ch.size(j)) * es, last});
    }
  }

  // Stage 1: the owners of each shard, one per node, allreduce it.
  Deps reduced = shardDone;
  if (l.owner()) {
    const CollArgs across = acrossNodes(a, l);
    Embedding e;
    for (int node = 0; node < l.topo.nodes(); ++node) e.ranks.push_back(l.topo.rankOf(node, l.local));
    const size_t off = l.split.offset(static_cast<size_t>(l.local));
    e.send = e.recv = out + off * es;
    e.tagOffset = tags::stageOffset(1, n);
    // Each step of the allreduce across nodes waits for the chunks of the node's sum it touches.
    auto ready = [&](size_t offset, size_t bytes) {
      Deps d;
      for (const Made& m : made)
        if (m.begin < offset + std::max<size_t>(bytes, 1) && offset < std::max(m.end, m.begin + 1))
          d.insert(d.end(), m.by.begin(), m.by.end());
      return d.empty() ? shardDone : d;
    };
    reduced = splice(p, planCollective(Coll::kAllReduce, across), e, ready);
    reduced.insert(reduced.end(), shardDone.begin(), shardDone.end());
    if (a.op == cclAvg && across.count) reduced = {p.divide(out + off * es, across.count, reduced)};
  }

  // Stage 2: each owner's shard to the node's other ranks. Compressed inside the node, the
  // owner encodes each chunk once and takes the decoded values too, so every rank has the
  // same bits.
  for (size_t s = 0; s < l.shards; ++s) {
    const size_t off = l.split.offset(s), cnt = l.split.size(s);
    const Split ch = detail::chunks(cnt, es, a.chunkBytes);
    const int owner = localRank(static_cast<int>(s));
    for (size_t j = 0; j < ch.parts; ++j) {
      const Ref chunk = out + (off + ch.offset(j)) * es;
      const size_t size = ch.size(j);
      const uint32_t t = gatherTags + detail::tag(0, n, 0, j);
      if (owner != a.rank) {
        // In place, the chunk is where stage 0 read this rank's contribution from.
        if (!squeeze) {
          p.recv(owner, t, chunk, size * es, {sent[s][j]});
          continue;
        }
        auto [buf, cap, slot] = intraStream(size);
        const StepId got = p.recvStream(owner, t, buf, cap, slot);
        const StepId d = p.decode(chunk, a.dtype, buf, slot, size, {got, sent[s][j]});
        p.steps[d].intra = true;
        continue;
      }
      if (!squeeze) {
        for (int k = 0; k < l.nodeSize; ++k)
          if (k != l.local) p.send(localRank(k), t, chunk, size * es, reduced);
        continue;
      }
      // The same draws at every node's owner of this shard: they encode the same sum, and so
      // send every rank of every node the same bits.
      auto [buf, slot, e] = encodeIntra(chunk, size, 0x80000000u + static_cast<uint32_t>(s * ch.parts + j), reduced);
      for (int k = 0; k < l.nodeSize; ++k)
        if (k != l.local) p.sendStream(localRank(k), t, buf, slot, size, {e});
      const StepId d = p.decode(chunk, a.dtype, buf, slot, size, {e});
      p.steps[d].intra = true;
    }
  }
  return p;
}

// ---- Rooted collectives: across nodes among one leader per node, then inside each node ----
//
// A node's leader is the root in the root's node and its first rank elsewhere. Broadcast: the
// root's data goes to the leaders (a flat broadcast of the call's codec), then each leader
// broadcasts it inside its node (uncompressed, or a.intraCodec). Reduce: each node's sum goes
// to its leader inside the node, then the leaders' sums to the root. Both stages are flat
// plans spliced in; the second waits for the first.

namespace {

struct Rooted {
  const Topology& topo;
  int node, rootNode;
  std::vector<int> leaders;  // per node
  int leader() const { return leaders[static_cast<size_t>(node)]; }
};

Rooted rootedOf(const CollArgs& a) {
  const Topology& t = *a.topo;
  CCL_CHECK(t.nranks() == a.nranks, cclInternalError, "a topology of another communicator");
  Rooted r{t, t.nodeOf[static_cast<size_t>(a.rank)], t.nodeOf[static_cast<size_t>(a.root)], {}};
  for (int n = 0; n < t.nodes(); ++n) r.leaders.push_back(n == r.rootNode ? a.root : t.rankOf(n, 0));
  return r;
}

// A flat call among `ranks` (this rank's index `index`, the root's `root`).
CollArgs among(const CollArgs& a, int index, int size, int root, bool inPlace, const codec::Params& codec) {
  CollArgs s = a;
  s.rank = index;
  s.nranks = size;
  s.root = root;
  s.inPlace = inPlace;
  s.op = a.op == cclAvg ? cclSum : a.op;
  s.topo = nullptr;
  s.codec = codec;
  s.feedback = false;
  if (s.algo == Algo::kHier) s.algo = Algo::kAuto;
  return s;
}

const codec::Params& intraCodecOf(const CollArgs& a) {
  static const codec::Params none;
  return intraCompressed(a) ? a.intraCodec : none;
}

}  // namespace

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

// ---- Allgather: inside each node, across nodes among the leaders, inside again ----
//
// Every rank's block moves as one unit: its bytes, or with a codec the one stream its owner
// encoded (with error feedback on the owner's residual), which every rank decodes, the owner
// too: one quantization, the same bits everywhere. Stage 0: each rank's unit to its node's
// other ranks. Stage 1: each node's leader (its first rank) sends its node's units to every
// other leader. Stage 2: each leader forwards the other nodes' units to its node's ranks. A
// node's link carries each block of the other nodes in once and its own out once per node.

Plan planHierarchicalAllGather(const CollArgs& a) {
  Plan p = detail::emptyPlan(a);
  const auto [t, node, members, squeeze] = placeOf(a, p);
  if (a.count == 0) return p;
  const int n = a.nranks, r = a.rank;
  const int leader = members[0];
  const size_t es = dataTypeSize(a.dtype), bytes = a.count * es;
  const size_t cap = squeeze ? codec::maxEncodedBytes(a.codec, a.count) : bytes;
  auto block = [&](int d) { return Ref{Buf::kRecv, static_cast<size_t>(d) * bytes}; };
  const Ref in = a.inPlace ? block(r) : Ref{Buf::kSend, 0};

  // The units this rank holds: where, its length slot (streams), the step after which it is.
  struct Unit {
    Ref buf;
    Slot slot = kNoSlot;
    StepId ready = 0;
    bool after = false;  // ready names a step (else the unit is there from the start)
  };
  std::vector<Unit> unit(static_cast<size_t>(n));
  auto deps = [&](const Unit& u) { return u.after ? Deps{u.ready} : Deps{}; };
  auto send = [&](int peer, uint32_t tag, const Unit& u) {
    const Deps d = deps(u);
    if (!squeeze) return p.send(peer, tag, u.buf, bytes, d);
    return p.sendStream(peer, tag, u.buf, u.slot, a.count, d);
  };
  // Receives rank d's unit from `peer`; with a codec, decodes it into d's block.
  auto receive = [&](int d, int peer, uint32_t tag) {
    Unit& u = unit[static_cast<size_t>(d)];
    if (!squeeze) {
      u = {block(d), kNoSlot, p.recv(peer, tag, block(d), bytes), true};
      return;
    }
    const Ref buf = p.scratch(cap);
    const Slot slot = p.newSlot();
    u = {buf, slot, p.recvStream(peer, tag, buf, cap, slot), true};
    p.decode(block(d), a.dtype, buf, slot, a.count, {u.ready});
  };

  Unit& mine = unit[static_cast<size_t>(r)];
  if (squeeze) {
    const Ref buf = p.scratch(cap);
    const Slot slot = p.newSlot();
    const Ref residual{Buf::kFeedback, 0};
    mine = {buf, slot, p.encode(buf, cap, slot, in, a.dtype, a.count, a.feedback ? &residual : nullptr), true};
    p.steps[mine.ready].seedSalt = static_cast<uint32_t>(r + 1) * 0x10000u;
    p.decode(block(r), a.dtype, buf, slot, a.count, {mine.ready});
  } else if (!a.inPlace) {
    mine = {block(r), kNoSlot, p.copy(block(r), in, bytes), true};
  } else {
    mine = {block(r), kNoSlot, 0, false};
  }

  const uint32_t t0 = tags::stageOffset(0, n) + detail::tag(0, n, 0, 0);
  for (int k : members)
    if (k != r) send(k, t0, mine);
  for (int k : members)
    if (k != r) receive(k, k, t0);

  // Across and then inside, other nodes go in order of distance (byDistance).
  if (r == leader) {
    for (int m : byDistance(t, node)) {
      const std::vector<int>& theirs = t.members[static_cast<size_t>(m)];
      for (int d : members)
        send(theirs[0], tags::stageOffset(1, n) + detail::tag(0, n, t.localRank[static_cast<size_t>(d)], 0),
             unit[static_cast<size_t>(d)]);
      for (int d : theirs)
        receive(d, theirs[0], tags::stageOffset(1, n) + detail::tag(0, n, t.localRank[static_cast<size_t>(d)], 0));
    }
  }

  for (int m : byDistance(t, node))
    for (int d : t.members[static_cast<size_t>(m)]) {
      const uint32_t t2 = tags::stageOffset(2, n) + detail::tag(0, n, d, 0);
      if (r == leader) {
        for (int k : members)
          if (k != r) send(k, t2, unit[static_cast<size_t>(d)]);
      } else {
        receive(d, leader, t2);
      }
    }
  return p;
}

// ---- Reduce-scatter: inside each node to one owner per block, then across to the block's rank ----
//
// Stage 0: in each node, block d's owner (rank d itself in d's node, elsewhere local rank
// d mod the node's size) adds the node's contributions to block d. Stage 1: each owner of a
// block of another node sends that node sum to the block's rank (with a codec: encoded once,
// error feedback on the owner's residual for that block), which adds the other nodes' sums to
// its own node's in fp32. A node's link carries one sum of each other node's blocks out.

Plan planHierarchicalReduceScatter(const CollArgs& a) {
  Plan p = detail::emptyPlan(a);
  const auto [t, node, members, squeeze] = placeOf(a, p);
  if (a.count == 0) return p;
  const int n = a.nranks, r = a.rank;
  const size_t es = dataTypeSize(a.dtype), bytes = a.count * es, fs = sizeof(float);
  const Ref out{Buf::kRecv, 0};
  // The caller's block d (in place, block r is the output itself).
  auto input = [&](int d) { return Ref{Buf::kSend, static_cast<size_t>(d) * bytes}; };
  auto ownerIn = [&](int m, int d) {
    const std::vector<int>& ranks = t.members[static_cast<size_t>(m)];
    return t.nodeOf[static_cast<size_t>(d)] == m ? d : ranks[static_cast<size_t>(d) % ranks.size()];
  };

  // Stage 0.
  std::vector<Ref> sum(static_cast<size_t>(n));  // the node sums this rank owns
  std::vector<Deps> summed(static_cast<size_t>(n));
  // Blocks in order of their node's distance, and within a node from this rank's local rank
  // on: the node's ranks send to different owners at a time.
  const int local = t.localRank[static_cast<size_t>(r)];
  std::vector<int> blocks;
  for (int m : byDistance(t, node, true)) {
    const std::vector<int>& ranks = t.members[static_cast<size_t>(m)];
    for (size_t j = 0; j < ranks.size(); ++j) blocks.push_back(ranks[(static_cast<size_t>(local) + j) % ranks.size()]);
  }
  for (int d : blocks) {
    const int owner = ownerIn(node, d);
    const uint32_t tag = tags::stageOffset(0, n) + detail::tag(0, n, d, 0);
    if (owner != r) {
      p.send(owner, tag, input(d), bytes);
      continue;
    }
    const Ref acc = d == r ? out : p.scratch(bytes);
    Deps last;
    if (!(d == r && a.inPlace)) last = {p.copy(acc, input(d), bytes)};
    for (int k : members) {
      if (k == r) continue;
      const Ref tmp = p.scratch(bytes);
      Deps after = last;
      after.push_back(p.recv(k, tag, tmp, bytes));
      last = {p.reduce(acc, acc, tmp, a.count, after)};
    }
    sum[static_cast<size_t>(d)] = acc;
    summed[static_cast<size_t>(d)] = last;
  }

  // Stage 1: the node sums this rank owns for other nodes' ranks go to them.
  const uint32_t across = tags::stageOffset(1, n) + detail::tag(0, n, 0, 0);
  const size_t cap = squeeze ? codec::maxEncodedBytes(a.codec, a.count) : bytes;
  for (int m : byDistance(t, node))
    for (int d : t.members[static_cast<size_t>(m)]) {
      if (ownerIn(node, d) != r) continue;
      const Ref acc = sum[static_cast<size_t>(d)];
      if (!squeeze) {
        p.send(d, across, acc, bytes, summed[static_cast<size_t>(d)]);
        continue;
      }
      const Ref buf = p.scratch(cap);
      const Slot slot = p.newSlot();
      const Ref residual{Buf::kFeedback, static_cast<size_t>(d) * a.count * fs};
      const StepId e = p.encode(buf, cap, slot, acc, a.dtype, a.count, a.feedback ? &residual : nullptr,
                                summed[static_cast<size_t>(d)]);
      p.steps[e].seedSalt = static_cast<uint32_t>(r + 1) * 0x10000u + static_cast<uint32_t>(d);
      p.sendStream(d, across, buf, slot, a.count, {e});
    }
  // ... and this rank's block gets the other nodes' sums, in node order.
  Deps last = summed[static_cast<size_t>(r)];
  const bool widened = squeeze && a.dtype != cclFloat32;
  const Ref acc = widened ? p.scratch(a.count * fs) : out;
  if (widened) last = {p.widen(acc, out, a.count, last)};
  for (int m = 0; m < t.nodes(); ++m) {
    if (m == node) continue;
    const int from = ownerIn(m, r);
    Deps after = last;
    if (!squeeze) {
      const Ref tmp = p.scratch(bytes);
      after.push_back(p.recv(from, across, tmp, bytes));
      last = {p.reduce(out, out, tmp, a.count, after)};
      continue;
    }
    const Ref buf = p.scratch(cap);
    const Slot slot = p.newSlot();
    after.push_back(p.recvStream(from, across, buf, cap, slot));
    last = {p.decodeAdd(acc, buf, slot, a.count, after)};
  }
  if (widened)
    p.narrow(out, acc, a.count, a.op == cclAvg, last);
  else if (a.op == cclAvg)
    squeeze ? p.divideFloat(out, a.count, last) : p.divide(out, a.count, last);
  return p;
}

// ---- All-to-all aggregated per pair of nodes ----
//
// Blocks between ranks of one node go directly. For each other node M, node N's blocks for
// M's ranks gather at one gateway of N (its local rank M - N mod its size, nodes counted
// modulo their number), which sends them to one gateway of M (its local rank N - M mod M's
// size) as one message (with a codec: one stream,
// one quantization), which hands each block to its rank: one message per pair of nodes
// crosses, as ZeRO++'s qgZ aggregates.

Plan planHierarchicalAlltoAll(const CollArgs& a) {
  Plan p = detail::emptyPlan(a);
  const auto [t, node, members, squeeze] = placeOf(a, p);
  if (a.count == 0) return p;
  const int n = a.nranks, r = a.rank;
  const size_t es = dataTypeSize(a.dtype), bytes = a.count * es;
  const int nodes = t.nodes();
  // Gateways and tags name nodes by their distance from a node, not by number, so that on
  // nodes of one size every node's plans are the same (planShifts): a shift of whole nodes.
  auto gateway = [&](int of, int toward) {
    const std::vector<int>& ranks = t.members[static_cast<size_t>(of)];
    return ranks[static_cast<size_t>(detail::mod(toward - of, nodes)) % ranks.size()];
  };
  auto local = [&](int q) { return static_cast<size_t>(t.localRank[static_cast<size_t>(q)]); };
  // Rank q's place among all ranks ordered by node from this rank's node on, then local rank.
  std::vector<int> start(static_cast<size_t>(nodes) + 1, 0);
  for (int m = 0; m < nodes; ++m) start[static_cast<size_t>(m) + 1] = start[static_cast<size_t>(m)] + t.nodeSize(m);
  auto place = [&](int q) {
    const int m = t.nodeOf[static_cast<size_t>(q)];
    return detail::mod(start[static_cast<size_t>(m)] - start[static_cast<size_t>(node)], n) +
           static_cast<int>(local(q));
  };
  auto tagOf = [&](int stage, int index) { return tags::stageOffset(stage, n) + detail::tag(0, n, index, 0); };
  const Ref out{Buf::kRecv, 0};
  // In place, blocks received would overwrite blocks not yet sent: send from a copy.
  Ref in{Buf::kSend, 0};
  Deps ready;
  if (a.inPlace) {
    in = p.scratch(bytes * n);
    ready = {p.copy(in, out, bytes * n)};
  }
  auto block = [&](Ref base, size_t i) { return base + i * bytes; };

  // Inside the node: directly; and stage 0, this rank's blocks for other nodes to their gateway.
  for (int d = 0; d < n; ++d) {
    const int m = t.nodeOf[static_cast<size_t>(d)];
    const int to = m == node ? d : gateway(node, m);
    if (d == r)
      p.copy(block(out, static_cast<size_t>(r)), block(in, static_cast<size_t>(d)), bytes, ready);
    else if (to != r)
      p.send(to, tagOf(0, place(d)), block(in, static_cast<size_t>(d)), bytes, ready);
  }
  for (int s : members)
    if (s != r) p.recv(s, tagOf(0, place(r)), block(out, static_cast<size_t>(s)), bytes);

  for (int m : byDistance(t, node)) {
    const std::vector<int>& theirs = t.members[static_cast<size_t>(m)];
    const size_t width = theirs.size(), blocks = members.size() * width;
    // This rank as node's gateway toward m: gather, then one message (stage 1).
    if (gateway(node, m) == r) {
      const Ref agg = p.scratch(blocks * bytes);
      Deps gathered;
      for (int s : members)
        for (int d : theirs) {
          const Ref at = block(agg, local(s) * width + local(d));
          gathered.push_back(s == r ? p.copy(at, block(in, static_cast<size_t>(d)), bytes, ready)
                                    : p.recv(s, tagOf(0, place(d)), at, bytes));
        }
      const int peer = gateway(m, node);
      if (!squeeze) {
        p.send(peer, tagOf(1, 0), agg, blocks * bytes, gathered);
      } else {
        const size_t cap = codec::maxEncodedBytes(a.codec, blocks * a.count);
        const Ref buf = p.scratch(cap);
        const Slot slot = p.newSlot();
        const StepId e = p.encode(buf, cap, slot, agg, a.dtype, blocks * a.count, nullptr, gathered);
        p.steps[e].seedSalt = static_cast<uint32_t>(r + 1) * 0x10000u + static_cast<uint32_t>(m);
        p.sendStream(peer, tagOf(1, 0), buf, slot, blocks * a.count, {e});
      }
    }
    // This rank as node's gateway from m: one message in, each block to its rank (stage 2).
    const int from = gateway(m, node);
    const std::vector<int>& senders = theirs;
    const size_t inWidth = members.size(), inBlocks = senders.size() * inWidth;
    if (gateway(node, m) != r) {
      // Not the gateway from m: receive m's blocks for this rank from it.
      for (int s : senders) p.recv(gateway(node, m), tagOf(2, place(s)), block(out, static_cast<size_t>(s)), bytes);
      continue;
    }
    const Ref agg = p.scratch(inBlocks * bytes);
    Deps arrived;
    if (!squeeze) {
      arrived = {p.recv(from, tagOf(1, 0), agg, inBlocks * bytes)};
    } else {
      const size_t cap = codec::maxEncodedBytes(a.codec, inBlocks * a.count);
      const Ref buf = p.scratch(cap);
      const Slot slot = p.newSlot();
      const StepId got = p.recvStream(from, tagOf(1, 0), buf, cap, slot);
      arrived = {p.decode(agg, a.dtype, buf, slot, inBlocks * a.count, {got})};
    }
    for (int s : senders)
      for (int d : members) {
        const Ref at = block(agg, local(s) * inWidth + local(d));
        if (d == r)
          p.copy(block(out, static_cast<size_t>(s)), at, bytes, arrived);
        else
          p.send(d, tagOf(2, place(s)), at, bytes, arrived);
      }
  }
  return p;
}

}  // namespace ccl::coll
