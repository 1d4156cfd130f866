// SPDX-License-Identifier: BSD-3-Clause
// The chain family: broadcast and reduce pipelined in chunks along a chain that starts
// (broadcast) or ends (reduce) at the root, which keeps every link busy with one copy of the
// data (CCL_ALGO=ring; small messages go direct, direct.cc). The compressed broadcast is a
// chain too: the root encodes once, the streams are forwarded untouched, every rank decodes.
#include "collectives/algorithms/codec_steps.h"
#include "common/dtype.h"

namespace ccl::coll::detail {

Plan chainBroadcast(const CollArgs& a) {
  Plan p = emptyPlan(a);
  const int n = a.nranks, r = a.rank;
  const size_t es = dataTypeSize(a.dtype), bytes = a.count * es;
  if (a.count == 0) return p;
  if (r == a.root && !a.inPlace) p.copy({Buf::kRecv, 0}, {Buf::kSend, 0}, bytes);
  const int pos = mod(r - a.root, n), next = mod(r + 1, n), prev = mod(r - 1, n);
  Split c = chunks(a.count, es, a.chunkBytes);
  for (size_t j = 0; j < c.parts; ++j) {
    const size_t off = c.offset(j) * es, len = c.size(j) * es;
    const uint32_t t = static_cast<uint32_t>(j);
    if (pos == 0) {
      p.send(next, t, Ref{Buf::kSend, off}, len);
    } else {
      StepId rid = p.recv(prev, t, Ref{Buf::kRecv, off}, len);
      if (pos + 1 < n) p.send(next, t, Ref{Buf::kRecv, off}, len, {rid});
    }
  }
  return p;
}

// Chain root+1 -> root+2 -> ... -> root: each rank adds its data to the partial sum.
Plan chainReduce(const CollArgs& a) {
  Plan p = emptyPlan(a);
  const int n = a.nranks, r = a.rank;
  const size_t es = dataTypeSize(a.dtype), bytes = a.count * es;
  if (a.count == 0) return p;
  const Ref own{Buf::kSend, 0}, out{Buf::kRecv, 0};
  const int pos = mod(r - a.root - 1, n), next = mod(r + 1, n), prev = mod(r - 1, n);
  Split c = chunks(a.count, es, a.chunkBytes);
  Ref tmp = pos == 0 ? Ref{Buf::kScratch, 0} : p.scratch(bytes);
  for (size_t j = 0; j < c.parts; ++j) {
    const size_t off = c.offset(j) * es, len = c.size(j) * es;
    const uint32_t t = static_cast<uint32_t>(j);
    if (pos == 0) {
      p.send(next, t, own + off, len);
      continue;
    }
    StepId rid = p.recv(prev, t, tmp + off, len);
    if (pos + 1 < n) {
      StepId red = p.reduce(tmp + off, own + off, tmp + off, c.size(j), {rid});
      p.send(next, t, tmp + off, len, {red});
    } else {
      StepId red = p.reduce(out + off, own + off, tmp + off, c.size(j), {rid});
      if (a.op == cclAvg) p.divide(out + off, c.size(j), {red});
    }
  }
  return p;
}

Plan compressedChainBroadcast(const CollArgs& a) {
  const int n = a.nranks, r = a.rank;
  if (a.count == 0) return codecPlan(a);
  Builder b(a);
  Plan& p = b.plan();
  Pieces c = pieces(a, a.count);
  const int pos = mod(r - a.root, n), next = mod(r + 1, n), prev = mod(r - 1, n);
  for (size_t j = 0; j < c.parts(); ++j) {
    const uint32_t t = static_cast<uint32_t>(j);
    auto [st, got] =
        pos == 0 ? b.encode(b.send(c.offset(j)), a.dtype, c.size(j), nullptr, {}) : b.recvFrom(prev, t, c.size(j));
    if (pos + 1 < n) b.sendTo(next, t, st, {got});
    p.decode(b.recv(c.offset(j)), a.dtype, st.buf, st.slot, c.size(j), {got});
  }
  return b.take();
}

}  // namespace ccl::coll::detail
