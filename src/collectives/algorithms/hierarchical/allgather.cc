// SPDX-License-Identifier: BSD-3-Clause
// Hierarchical allgather: inside each node, across nodes among the leaders, inside again.
//
// Every rank's block moves as one unit: its bytes, or with a codec the one stream its owner
// encoded (with error feedback on the owner's residual), which every rank decodes, the owner
// too: one quantization, the same bits everywhere. Stage 0: each rank's unit to its node's
// other ranks. Stage 1: each node's leader (its first rank) sends its node's units to every
// other leader. Stage 2: each leader forwards the other nodes' units to its node's ranks. A
// node's link carries each block of the other nodes in once and its own out once per node.
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

}  // namespace ccl::coll
