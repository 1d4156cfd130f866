#include "collectives/plan.h"

namespace ccl::coll {

StepId Plan::add(const Step& s, const Deps& after) {
  Step step = s;
  step.firstDep = static_cast<uint32_t>(deps.size());
  step.numDeps = static_cast<uint32_t>(after.size());
  deps.insert(deps.end(), after.begin(), after.end());
  steps.push_back(step);
  return static_cast<StepId>(steps.size() - 1);
}

StepId Plan::send(int peer, uint32_t tag, Ref src, size_t bytes, const Deps& after) {
  Step s{StepKind::kSend};
  s.peer = peer;
  s.tag = tag;
  s.src = src;
  s.bytes = bytes;
  return add(s, after);
}

StepId Plan::recv(int peer, uint32_t tag, Ref dst, size_t bytes, const Deps& after) {
  Step s{StepKind::kRecv};
  s.peer = peer;
  s.tag = tag;
  s.dst = dst;
  s.bytes = bytes;
  return add(s, after);
}

StepId Plan::copy(Ref dst, Ref src, size_t bytes, const Deps& after) {
  Step s{StepKind::kCopy};
  s.dst = dst;
  s.src = src;
  s.bytes = bytes;
  return add(s, after);
}

StepId Plan::reduce(Ref dst, Ref a, Ref b, size_t count, const Deps& after) {
  Step s{StepKind::kReduce};
  s.dst = dst;
  s.src = a;
  s.src2 = b;
  s.count = count;
  return add(s, after);
}

StepId Plan::divide(Ref dst, size_t count, const Deps& after) {
  Step s{StepKind::kDivide};
  s.dst = dst;
  s.count = count;
  return add(s, after);
}

StepId Plan::encode(Ref dst, size_t capacity, uint16_t slot, Ref src, cclDataType_t type, size_t count,
                    const Ref* residual, const Deps& after) {
  Step s{StepKind::kEncode};
  s.dst = dst;
  s.bytes = capacity;
  s.slot = slot;
  s.src = src;
  s.type = type;
  s.count = count;
  if (residual) {
    s.withFeedback = true;
    s.src2 = *residual;
  }
  return add(s, after);
}

StepId Plan::sendStream(int peer, uint32_t tag, Ref src, uint16_t slot, const Deps& after) {
  Step s{StepKind::kSend};
  s.peer = peer;
  s.tag = tag;
  s.src = src;
  s.slot = slot;
  return add(s, after);
}

StepId Plan::recvStream(int peer, uint32_t tag, Ref dst, size_t capacity, uint16_t slot, const Deps& after) {
  Step s{StepKind::kRecv};
  s.peer = peer;
  s.tag = tag;
  s.dst = dst;
  s.bytes = capacity;
  s.slot = slot;
  return add(s, after);
}

StepId Plan::decode(Ref dst, cclDataType_t type, Ref src, uint16_t slot, size_t count, const Deps& after) {
  Step s{StepKind::kDecode};
  s.dst = dst;
  s.type = type;
  s.src = src;
  s.slot = slot;
  s.count = count;
  return add(s, after);
}

StepId Plan::decodeAdd(Ref acc, Ref src, uint16_t slot, size_t count, const Deps& after) {
  Step s{StepKind::kDecodeAdd};
  s.dst = acc;
  s.src = src;
  s.slot = slot;
  s.count = count;
  return add(s, after);
}

StepId Plan::widen(Ref dst, Ref src, size_t count, const Deps& after) {
  Step s{StepKind::kWiden};
  s.dst = dst;
  s.src = src;
  s.count = count;
  return add(s, after);
}

StepId Plan::narrow(Ref dst, Ref src, size_t count, bool divideByRanks, const Deps& after) {
  Step s{StepKind::kNarrow};
  s.dst = dst;
  s.src = src;
  s.count = count;
  s.divide = divideByRanks;
  return add(s, after);
}

StepId Plan::divideFloat(Ref dst, size_t count, const Deps& after) {
  Step s{StepKind::kDivideFloat};
  s.dst = dst;
  s.count = count;
  return add(s, after);
}

Ref Plan::scratch(size_t bytes) {
  Ref r{Buf::kScratch, scratchBytes};
  scratchBytes += (bytes + 63) & ~size_t{63};
  return r;
}

}  // namespace ccl::coll
