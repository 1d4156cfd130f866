// SPDX-License-Identifier: BSD-3-Clause
// All-to-all, gather and scatter: every message goes directly between its two ranks, all
// posted at once.
#include "collectives/algorithms/algorithms.h"
#include "common/dtype.h"

namespace ccl::coll {

Plan detail::directAlltoAll(const CollArgs& a) {
  Plan p = detail::emptyPlan(a);
  const int n = a.nranks, r = a.rank;
  const size_t bytes = a.count * dataTypeSize(a.dtype);
  if (a.count == 0) return p;
  // In place, the blocks received would overwrite blocks not yet sent: send from a copy.
  Ref src{Buf::kSend, 0};
  Deps ready;
  if (a.inPlace) {
    src = p.scratch(bytes * n);
    ready = {p.copy(src, {Buf::kRecv, 0}, bytes * n)};
  }
  for (int k = 1; k < n; ++k) {
    int to = detail::mod(r + k, n);
    p.send(to, 0, src + to * bytes, bytes, ready);
  }
  for (int k = 1; k < n; ++k) {
    int from = detail::mod(r - k, n);
    p.recv(from, 0, Ref{Buf::kRecv, from * bytes}, bytes, ready);
  }
  if (!a.inPlace) p.copy({Buf::kRecv, r * bytes}, src + r * bytes, bytes);
  return p;
}

Plan detail::directGather(const CollArgs& a) {
  Plan p = detail::emptyPlan(a);
  const int n = a.nranks, r = a.rank;
  const size_t bytes = a.count * dataTypeSize(a.dtype);
  if (a.count == 0) return p;
  if (r != a.root) {
    p.send(a.root, 0, {Buf::kSend, 0}, bytes);
    return p;
  }
  for (int k = 0; k < n; ++k)
    if (k != r) p.recv(k, 0, {Buf::kRecv, k * bytes}, bytes);
  if (!a.inPlace) p.copy({Buf::kRecv, r * bytes}, {Buf::kSend, 0}, bytes);
  return p;
}

Plan detail::directScatter(const CollArgs& a) {
  Plan p = detail::emptyPlan(a);
  const int n = a.nranks, r = a.rank;
  const size_t bytes = a.count * dataTypeSize(a.dtype);
  if (a.count == 0) return p;
  if (r != a.root) {
    p.recv(a.root, 0, {Buf::kRecv, 0}, bytes);
    return p;
  }
  for (int k = 0; k < n; ++k)
    if (k != r) p.send(k, 0, {Buf::kSend, k * bytes}, bytes);
  if (!a.inPlace) p.copy({Buf::kRecv, 0}, {Buf::kSend, r * bytes}, bytes);
  return p;
}

}  // namespace ccl::coll
