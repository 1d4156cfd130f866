// SPDX-License-Identifier: BSD-3-Clause
// Hierarchical reduce-scatter: inside each node to one owner per block, then across to the
// block's rank.
//
// Stage 0: in each node, block d's owner (rank d itself in d's node, elsewhere local rank
// d mod the node's size) adds the node's contributions to block d. Stage 1: each owner of a
// block of another node sends that node sum to the block's rank (with a codec: encoded once,
// error feedback on the owner's residual for that block), which adds the other nodes' sums to
// its own node's in fp32. A node's link carries one sum of each other node's blocks out.
// With a codec, a 16-bit type's node sums are kept in fp32 from the start (as a two-shot's
// are): encoded from fp32, and an average divided in fp32 and rounded once, so that a sum
// that does not fit fp16 where the average does is no inf (ccl.h).
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
  const bool wide = squeeze && a.dtype != cclFloat32;  // node sums in fp32
  std::vector<Ref> sum(static_cast<size_t>(n));        // the node sums this rank owns
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
    const Ref acc = wide ? p.scratch(a.count * fs) : d == r ? out : p.scratch(bytes);
    Deps last;
    if (wide)
      last = {p.widen(acc, input(d), a.count)};
    else if (!(d == r && a.inPlace))
      last = {p.copy(acc, input(d), bytes)};
    for (int k : members) {
      if (k == r) continue;
      const Ref tmp = p.scratch(bytes);
      Deps after = last;
      after.push_back(p.recv(k, tag, tmp, bytes));
      last = {wide ? p.reduceWide(acc, acc, tmp, a.count, after) : p.reduce(acc, acc, tmp, a.count, after)};
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
      const StepId e = p.encode(buf, cap, slot, acc, wide ? cclFloat32 : a.dtype, a.count,
                                a.feedback ? &residual : nullptr, summed[static_cast<size_t>(d)]);
      p.steps[e].seedSalt = static_cast<uint32_t>(r + 1) * 0x10000u + static_cast<uint32_t>(d);
      p.sendStream(d, across, buf, slot, a.count, {e});
    }
  // ... and this rank's block gets the other nodes' sums, in node order.
  Deps last = summed[static_cast<size_t>(r)];
  const Ref acc = sum[static_cast<size_t>(r)];  // out, or the fp32 sum
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
  if (wide)
    p.narrow(out, acc, a.count, a.op == cclAvg, last);
  else if (a.op == cclAvg)
    squeeze ? p.divideFloat(out, a.count, last) : p.divide(out, a.count, last);
  return p;
}

}  // namespace ccl::coll
