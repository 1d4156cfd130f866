// SPDX-License-Identifier: BSD-3-Clause
#include "collectives/plan/plan.h"

#include "common/dtype.h"
#include "common/error.h"

namespace ccl::coll {

StepId Plan::add(const Step& s, const Deps& after) {
  Step step = s;
  step.firstDep = static_cast<uint32_t>(deps.size());
  step.numDeps = static_cast<uint32_t>(after.size());
  deps.insert(deps.end(), after.begin(), after.end());
  steps.push_back(step);
  return static_cast<StepId>(steps.size() - 1);
}

// Fields are named in declaration order, as designated initialisers require.
StepId Plan::send(int peer, uint32_t tag, Ref src, size_t bytes, const Deps& after) {
  return add({.kind = StepKind::kSend, .peer = peer, .tag = tag, .src = src, .bytes = bytes}, after);
}

StepId Plan::recv(int peer, uint32_t tag, Ref dst, size_t bytes, const Deps& after) {
  return add({.kind = StepKind::kRecv, .peer = peer, .tag = tag, .dst = dst, .bytes = bytes}, after);
}

StepId Plan::copy(Ref dst, Ref src, size_t bytes, const Deps& after) {
  return add({.kind = StepKind::kCopy, .dst = dst, .src = src, .bytes = bytes}, after);
}

StepId Plan::reduce(Ref dst, Ref a, Ref b, size_t count, const Deps& after) {
  return add({.kind = StepKind::kReduce, .dst = dst, .src = a, .src2 = b, .count = count}, after);
}

StepId Plan::reduceWide(Ref dst, Ref a, Ref b, size_t count, const Deps& after) {
  return add({.kind = StepKind::kReduce, .dst = dst, .src = a, .src2 = b, .count = count, .wide = true}, after);
}

StepId Plan::recvReduce(int peer, uint32_t tag, Ref dst, Ref local, Ref landing, size_t count, const Deps& after) {
  return add({.kind = StepKind::kRecvReduce,
              .peer = peer,
              .tag = tag,
              .dst = dst,
              .src = local,
              .bytes = count * dataTypeSize(dtype),
              .count = count,
              .in = landing},
             after);
}

StepId Plan::divide(Ref dst, size_t count, const Deps& after) { return divide(dst, dst, count, after); }

StepId Plan::divide(Ref dst, Ref src, size_t count, const Deps& after) {
  return add({.kind = StepKind::kDivide, .dst = dst, .src = src, .count = count}, after);
}

StepId Plan::encode(Ref dst, size_t capacity, Slot slot, Ref src, cclDataType_t type, size_t count, const Ref* residual,
                    const Deps& after) {
  return add({.kind = StepKind::kEncode,
              .dst = dst,
              .src = src,
              .src2 = residual ? *residual : Ref{Buf::kFeedback, 0},
              .bytes = capacity,
              .count = count,
              .slot = slot,
              .type = type,
              .withFeedback = residual != nullptr},
             after);
}

StepId Plan::sendStream(int peer, uint32_t tag, Ref src, Slot slot, size_t count, const Deps& after) {
  return add({.kind = StepKind::kSend, .peer = peer, .tag = tag, .src = src, .count = count, .slot = slot}, after);
}

StepId Plan::recvStream(int peer, uint32_t tag, Ref dst, size_t capacity, Slot slot, const Deps& after) {
  return add({.kind = StepKind::kRecv, .peer = peer, .tag = tag, .dst = dst, .bytes = capacity, .slot = slot}, after);
}

StepId Plan::decode(Ref dst, cclDataType_t type, Ref src, Slot slot, size_t count, const Deps& after) {
  return add({.kind = StepKind::kDecode, .dst = dst, .src = src, .count = count, .slot = slot, .type = type}, after);
}

StepId Plan::decodeAdd(Ref acc, Ref src, Slot slot, size_t count, const Deps& after) {
  return add({.kind = StepKind::kDecodeAdd, .dst = acc, .src = src, .count = count, .slot = slot}, after);
}

StepId Plan::decodeAddEncode(Ref dst, size_t capacity, Slot slot, Ref in, Slot inSlot, Ref local, cclDataType_t type,
                             size_t count, bool divideByRanks, const Ref* residual, const Deps& after) {
  return add({.kind = StepKind::kDecodeAddEncode,
              .dst = dst,
              .src = local,
              .src2 = residual ? *residual : Ref{Buf::kFeedback, 0},
              .bytes = capacity,
              .count = count,
              .slot = slot,
              .type = type,
              .withFeedback = residual != nullptr,
              .divide = divideByRanks,
              .in = in,
              .inSlot = inSlot},
             after);
}

StepId Plan::widen(Ref dst, Ref src, size_t count, const Deps& after) {
  return add({.kind = StepKind::kWiden, .dst = dst, .src = src, .count = count}, after);
}

StepId Plan::narrow(Ref dst, Ref src, size_t count, bool divideByRanks, const Deps& after) {
  return add({.kind = StepKind::kNarrow, .dst = dst, .src = src, .count = count, .divide = divideByRanks}, after);
}

StepId Plan::divideFloat(Ref dst, size_t count, const Deps& after) {
  return add({.kind = StepKind::kDivideFloat, .dst = dst, .count = count}, after);
}

Plan mergePlans(const Plan& a, const Plan& b) {
  CCL_CHECK(a.dtype == b.dtype && a.op == b.op && a.nranks == b.nranks && a.codec.codec == b.codec.codec &&
                a.intraCodec.codec == b.intraCodec.codec,
            cclInternalError, "mergePlans: plans of different calls");
  Plan m = a;
  const size_t scratch = (a.scratchBytes + 63) & ~size_t{63};
  const auto steps = static_cast<StepId>(a.steps.size());
  const auto deps = static_cast<uint32_t>(a.deps.size());
  auto move = [&](Ref r) { return r.buf == Buf::kScratch ? r + scratch : r; };
  for (Step s : b.steps) {
    forEachRef(s, [&](Ref& r) { r = move(r); });
    forEachSlot(s, [&](Slot& slot) { slot += a.lengthSlots; });
    s.firstDep += deps;
    m.steps.push_back(s);
  }
  for (StepId d : b.deps) m.deps.push_back(d + steps);
  m.scratchBytes = scratch + b.scratchBytes;
  m.lengthSlots = a.lengthSlots + b.lengthSlots;
  return m;
}

Ref Plan::scratch(size_t bytes) {
  Ref r{Buf::kScratch, scratchBytes};
  scratchBytes += (bytes + 63) & ~size_t{63};
  return r;
}

}  // namespace ccl::coll
