// SPDX-License-Identifier: BSD-3-Clause
// Hierarchical all-to-all, aggregated per pair of nodes.
//
// Blocks between ranks of one node go directly. For each other node M, node N's blocks for
// M's ranks gather at one gateway of N (its local rank M - N mod its size, nodes counted
// modulo their number), which sends them to one gateway of M (its local rank N - M mod M's
// size) as one message (with a codec: one stream, one quantization), which hands each block to
// its rank: one message per pair of nodes crosses, as ZeRO++'s qgZ aggregates.
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
    const size_t inWidth = members.size(), inBlocks = theirs.size() * inWidth;
    if (gateway(node, m) != r) {
      // Not the gateway from m: receive m's blocks for this rank from it.
      for (int s : theirs) p.recv(gateway(node, m), tagOf(2, place(s)), block(out, static_cast<size_t>(s)), bytes);
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
    for (int s : theirs)
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
