// SPDX-License-Identifier: BSD-3-Clause
// Broadcast and reduce. Small messages go straight between the root and every rank in one
// round; large ones are pipelined in chunks along a chain that starts (broadcast) or ends
// (reduce) at the root, which keeps every link busy with one copy of the data. Which of the
// two runs is the algorithm table's choice (algorithms.cc).
#include "collectives/algorithms/algorithms.h"
#include "common/dtype.h"

namespace ccl::coll::detail {

Plan directBroadcast(const CollArgs& a) {
  Plan p = emptyPlan(a);
  const int n = a.nranks, r = a.rank;
  const size_t bytes = a.count * dataTypeSize(a.dtype);
  if (a.count == 0) return p;
  if (r != a.root) {
    p.recv(a.root, 0, {Buf::kRecv, 0}, bytes);
    return p;
  }
  if (!a.inPlace) p.copy({Buf::kRecv, 0}, {Buf::kSend, 0}, bytes);
  for (int k = 0; k < n; ++k)
    if (k != r) p.send(k, 0, {Buf::kSend, 0}, bytes);
  return p;
}

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

Plan directReduce(const CollArgs& a) {
  Plan p = emptyPlan(a);
  const int n = a.nranks, r = a.rank;
  const size_t bytes = a.count * dataTypeSize(a.dtype);
  if (a.count == 0) return p;
  const Ref own{Buf::kSend, 0}, out{Buf::kRecv, 0};
  if (n == 1) {
    if (!a.inPlace) p.copy(out, own, bytes);
    return p;
  }
  if (r != a.root) {
    p.send(a.root, 0, own, bytes);
    return p;
  }
  // The root folds in the others in rank order, starting from its own data so that an
  // in-place call never reads what it has already overwritten.
  Deps last;
  bool first = true;
  for (int k = 0; k < n; ++k) {
    if (k == r) continue;
    Ref tmp = p.scratch(bytes);
    StepId rid = p.recv(k, 0, tmp, bytes);
    Deps deps = last;
    deps.push_back(rid);
    last = {p.reduce(out, first ? own : out, tmp, a.count, deps)};
    first = false;
  }
  if (a.op == cclAvg) p.divide(out, a.count, last);
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

}  // namespace ccl::coll::detail
