// SPDX-License-Identifier: BSD-3-Clause
// Broadcast and reduce. Small messages go straight between the root and every rank in one
// round; large ones are pipelined in chunks along a chain that starts (broadcast) or ends
// (reduce) at the root, which keeps every link busy with one copy of the data.
#include "collectives/algorithms.h"
#include "common/dtype.h"

namespace ccl::coll {
namespace {

bool useChain(const CollArgs& a, size_t bytes) {
  if (a.algo == Algo::kDirect) return false;
  if (a.algo == Algo::kRing) return a.nranks > 2;
  return a.nranks > 2 && bytes > a.chunkBytes;
}

}  // namespace

Plan planBroadcast(const CollArgs& a) {
  if (hierarchicalApplies(a)) return algorithm(Coll::kBroadcast, false, Algo::kHier, a).build(a);
  Plan p = detail::emptyPlan(a);
  const int n = a.nranks, r = a.rank;
  const size_t es = dataTypeSize(a.dtype), bytes = a.count * es;
  if (a.count == 0) return p;
  if (r == a.root && !a.inPlace) p.copy({Buf::kRecv, 0}, {Buf::kSend, 0}, bytes);
  if (!useChain(a, bytes)) {
    if (r == a.root) {
      for (int k = 0; k < n; ++k)
        if (k != r) p.send(k, 0, {Buf::kSend, 0}, bytes);
    } else {
      p.recv(a.root, 0, {Buf::kRecv, 0}, bytes);
    }
    return p;
  }
  const int pos = detail::mod(r - a.root, n), next = detail::mod(r + 1, n), prev = detail::mod(r - 1, n);
  Split c = detail::chunks(a.count, es, a.chunkBytes);
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

Plan planReduce(const CollArgs& a) {
  if (hierarchicalApplies(a)) return algorithm(Coll::kReduce, false, Algo::kHier, a).build(a);
  Plan p = detail::emptyPlan(a);
  const int n = a.nranks, r = a.rank;
  const size_t es = dataTypeSize(a.dtype), bytes = a.count * es;
  if (a.count == 0) return p;
  const Ref own{Buf::kSend, 0}, out{Buf::kRecv, 0};
  if (n == 1) {
    if (!a.inPlace) p.copy(out, own, bytes);
    return p;
  }
  if (!useChain(a, bytes)) {
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
  const int pos = detail::mod(r - a.root - 1, n), next = detail::mod(r + 1, n), prev = detail::mod(r - 1, n);
  Split c = detail::chunks(a.count, es, a.chunkBytes);
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

}  // namespace ccl::coll
