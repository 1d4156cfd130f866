// SPDX-License-Identifier: BSD-3-Clause
// The helpers of the hierarchical plans (stages.h).
#include "collectives/algorithms/hierarchical/stages.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "codecs/codec.h"
#include "common/dtype.h"
#include "common/error.h"

namespace ccl::coll {

bool hierarchicalApplies(const CollArgs& a) { return a.topo && a.topo->layered(); }

namespace hier {

namespace {

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
    case StepKind::kDivideFloat:
      return {{s.dst, elems}};
    case StepKind::kDivide:
    case StepKind::kWiden:
    case StepKind::kNarrow:
    case StepKind::kCodecStage:
      return {{s.dst, elems}, {s.src, elems}};
  }
  return {};
}

}  // namespace

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

bool intraCompressed(const CollArgs& a) {
  CollArgs inside = a;
  inside.codec = a.intraCodec;
  return compressible(inside);
}

Place placeOf(const CollArgs& a, Plan& p) {
  const Topology& t = *a.topo;
  CCL_CHECK(t.nranks() == a.nranks, cclInternalError, "a topology of another communicator");
  const bool squeeze = a.codec.codec != cclCodecNone;
  if (squeeze) p.codec = a.codec;
  const int node = t.nodeOf[static_cast<size_t>(a.rank)];
  return {t, node, t.members[static_cast<size_t>(node)], squeeze};
}

std::vector<int> byDistance(const Topology& t, int node, bool self) {
  std::vector<int> out;
  for (int k = self ? 0 : 1; k < t.nodes(); ++k) out.push_back((node + k) % t.nodes());
  return out;
}

Rooted rootedOf(const CollArgs& a) {
  const Topology& t = *a.topo;
  CCL_CHECK(t.nranks() == a.nranks, cclInternalError, "a topology of another communicator");
  Rooted r{t, t.nodeOf[static_cast<size_t>(a.rank)], t.nodeOf[static_cast<size_t>(a.root)], {}};
  for (int n = 0; n < t.nodes(); ++n) r.leaders.push_back(n == r.rootNode ? a.root : t.rankOf(n, 0));
  return r;
}

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

}  // namespace hier

}  // namespace ccl::coll
