// SPDX-License-Identifier: BSD-3-Clause
#include "collectives/algorithms/misaligned.h"

#include <algorithm>
#include <vector>

#include "common/dtype.h"

namespace ccl::coll {
namespace {

// Steps that read or write elements (not bytes) of the buffers they name.
bool elementStep(StepKind k) {
  switch (k) {
    case StepKind::kSend:
    case StepKind::kRecv:
    case StepKind::kCopy:
      return false;
    default:
      return true;
  }
}

bool touches(const Plan& p, Buf buf) {
  for (const Step& s : p.steps)
    if (elementStep(s.kind) && (s.dst.buf == buf || s.src.buf == buf || s.src2.buf == buf)) return true;
  return false;
}

}  // namespace

void appendAfter(Plan& q, const Plan& p, const Deps& prologue, const std::function<Ref(Ref)>& move) {
  const auto shift = static_cast<StepId>(q.steps.size());
  for (const Step& s : p.steps) {
    Step t = s;
    forEachRef(t, [&](Ref& r) { r = move(r); });
    Deps after;
    for (uint32_t i = 0; i < s.numDeps; ++i) after.push_back(p.deps[s.firstDep + i] + shift);
    if (after.empty()) after = prologue;
    q.add(t, after);
  }
}

uint8_t misalignment(const void* send, const void* recv, cclDataType_t dtype) {
  const uintptr_t es = dataTypeSize(dtype);
  if (es <= 1) return kAlignedBuffers;
  uint8_t bits = kAlignedBuffers;
  if (send && reinterpret_cast<uintptr_t>(send) % es) bits |= kSendMisaligned;
  if (recv && reinterpret_cast<uintptr_t>(recv) % es) bits |= kRecvMisaligned;
  return bits;
}

Plan stageMisaligned(const Plan& p, Coll c, const CollArgs& a) {
  const bool stageSend = (a.misaligned & kSendMisaligned) && touches(p, Buf::kSend);
  const bool stageRecv = (a.misaligned & kRecvMisaligned) && touches(p, Buf::kRecv);
  if (!stageSend && !stageRecv) return p;
  return stageBuffers(p, c, a, {.send = stageSend, .recv = stageRecv});
}

Plan stageBuffers(const Plan& p, Coll c, const CollArgs& a, Staging how) {
  const bool stageSend = how.send, stageRecv = how.recv;
  const size_t es = dataTypeSize(a.dtype);
  const BufferCounts counts = bufferCounts(c, a.count, static_cast<size_t>(a.nranks), a.rank == a.root);
  const size_t sendBytes = counts.send * es, recvBytes = counts.recv * es;
  const size_t block = static_cast<size_t>(a.rank) * a.count * es;  // a rank's in-place offset

  Plan q = p;
  q.steps.clear();
  q.deps.clear();
  q.scratchBytes = (p.scratchBytes + 63) & ~size_t{63};
  Deps prologue;
  // Into scratch: the bytes as they are, or the input scaled (Staging::scale).
  auto stageIn = [&](Ref to, Ref from, size_t bytes) {
    prologue.push_back(how.scale ? q.divide(to, from, bytes / es) : q.copy(to, from, bytes));
  };
  // Where the caller's send and receive bytes live in scratch (a buffer not staged: itself).
  Ref sendAt{Buf::kSend, 0}, recvAt{Buf::kRecv, 0};
  if (a.inPlace) {
    // One region over both: the receive buffer holds the send buffer (or the reverse), and
    // steps may write one and read the other.
    const InPlace layout = collInfo(c).inPlace;
    const bool sendHolds = layout == InPlace::kRecvInSend;
    const size_t bytes = sendHolds ? sendBytes : std::max(sendBytes, recvBytes);
    const Ref region = q.scratch(bytes);
    // Scaled, the whole region is input: the collectives that reduce read all of it.
    stageIn(region, Ref{sendHolds ? Buf::kSend : Buf::kRecv, 0}, bytes);
    sendAt = layout == InPlace::kSendInRecv ? region + block : region;
    recvAt = layout == InPlace::kRecvInSend ? region + block : region;
  } else {
    if (stageSend) {
      sendAt = q.scratch(sendBytes);
      stageIn(sendAt, Ref{Buf::kSend, 0}, sendBytes);
    }
    // Out of place, a collective writes every byte of its receive buffer (where it has one:
    // a non-root's is empty), so the staged one needs no copy in.
    if (stageRecv) recvAt = q.scratch(recvBytes);
  }
  const bool recvStaged = recvAt.buf == Buf::kScratch;
  auto move = [&](Ref r) {
    if (r.buf == Buf::kSend) return sendAt + r.offset;
    if (r.buf == Buf::kRecv) return recvAt + r.offset;
    return r;
  };
  const auto shift = static_cast<StepId>(q.steps.size());
  appendAfter(q, p, prologue, move);
  if (recvStaged && recvBytes) {
    // Back to the caller once every step is done: the last ones (none waits for them) cover
    // the others through their dependencies.
    std::vector<char> awaited(p.steps.size(), 0);
    for (StepId d : p.deps) awaited[d] = 1;
    Deps last;
    for (StepId i = 0; i < p.steps.size(); ++i)
      if (!awaited[i]) last.push_back(i + shift);
    if (last.empty()) last = prologue;
    q.copy(Ref{Buf::kRecv, 0}, recvAt, recvBytes, last);
  }
  return q;
}

}  // namespace ccl::coll
