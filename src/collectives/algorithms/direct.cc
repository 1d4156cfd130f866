// SPDX-License-Identifier: BSD-3-Clause
// The direct family: every message goes directly between its two ranks, all posted at once.
// Allreduce, broadcast and reduce in one round for latency-bound sizes; all-to-all, gather
// and scatter at every size. Compressed allgather and all-to-all: each rank encodes once, the
// streams go straight to their ranks, and every rank (the sender too) decodes.
#include "collectives/algorithms/codec_steps.h"
#include "common/dtype.h"

namespace ccl::coll {
namespace {

// One round: every rank sends its data to every other and reduces all n vectors itself, in
// rank order, so every rank computes the same bits. n-1 times the traffic of a ring, but a
// single message latency: the right trade for a few bytes, where waiting dominates.
Plan allToAllReduce(const CollArgs& a) {
  Plan p = detail::emptyPlan(a);
  const int n = a.nranks, r = a.rank;
  const size_t bytes = a.count * dataTypeSize(a.dtype);
  const Ref slots = p.scratch(bytes * n), acc{Buf::kRecv, 0};
  Deps have(n);
  have[r] = p.copy(slots + r * bytes, {Buf::kSend, 0}, bytes);
  for (int k = 1; k < n; ++k) p.send(detail::mod(r + k, n), 0, slots + r * bytes, bytes, {have[r]});
  for (int k = 1; k < n; ++k) {
    const int from = detail::mod(r - k, n);
    have[from] = p.recv(from, 0, slots + from * bytes, bytes);
  }
  StepId last = p.reduce(acc, slots, slots + bytes, a.count, {have[0], have[1]});
  for (int k = 2; k < n; ++k) last = p.reduce(acc, acc, slots + k * bytes, a.count, {last, have[k]});
  if (a.op == cclAvg) p.divide(acc, a.count, {last});
  return p;
}

}  // namespace

Plan detail::directAllReduce(const CollArgs& a) {
  if (auto local = localAllReduce(a)) return std::move(*local);
  return allToAllReduce(a);
}

Plan detail::directBroadcast(const CollArgs& a) {
  Plan p = detail::emptyPlan(a);
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

Plan detail::directReduce(const CollArgs& a) {
  Plan p = detail::emptyPlan(a);
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

namespace detail {

Plan compressedAllGather(const CollArgs& a) {
  const int n = a.nranks, r = a.rank;
  if (a.count == 0) return codecPlan(a);
  Builder b(a);
  Plan& p = b.plan();
  Pieces c = pieces(a, a.count);
  auto mine = encodeForAll(b, a, a.inPlace ? b.recv(r * a.count) : b.send(0), a.count, 0);
  for (size_t j = 0; j < c.parts(); ++j)
    p.decode(b.recv(r * a.count + c.offset(j)), a.dtype, mine[j].first.buf, mine[j].first.slot, c.size(j),
             {mine[j].second});
  for (int k = 1; k < n; ++k) {
    const int peer = mod(r - k, n);
    for (size_t j = 0; j < c.parts(); ++j) {
      auto [st, rid] = b.recvFrom(peer, tag(0, n, k, j), c.size(j));
      p.decode(b.recv(peer * a.count + c.offset(j)), a.dtype, st.buf, st.slot, c.size(j), {rid});
    }
  }
  return b.take();
}

Plan compressedAlltoAll(const CollArgs& a) {
  const int n = a.nranks, r = a.rank;
  if (a.count == 0) return codecPlan(a);
  Builder b(a);
  Plan& p = b.plan();
  Pieces c = pieces(a, a.count);
  const Ref src = a.inPlace ? Ref{Buf::kRecv, 0} : Ref{Buf::kSend, 0};
  std::vector<Deps> encoded(n);
  for (int k = 1; k < n; ++k) {
    const int peer = mod(r + k, n);
    for (size_t j = 0; j < c.parts(); ++j) {
      auto [st, e] = b.encode(src + (peer * a.count + c.offset(j)) * b.es(), a.dtype, c.size(j), nullptr, {});
      b.sendTo(peer, tag(0, n, k, j), st, {e});
      encoded[peer].push_back(e);
    }
  }
  if (!a.inPlace) p.copy(b.recv(r * a.count), b.send(r * a.count), a.count * b.es());
  for (int k = 1; k < n; ++k) {
    const int peer = mod(r - k, n);
    for (size_t j = 0; j < c.parts(); ++j) {
      auto [st, rid] = b.recvFrom(peer, tag(0, n, k, j), c.size(j));
      // Block `peer` of the output is block `peer` of the input in place: encode it first.
      p.decode(b.recv(peer * a.count + c.offset(j)), a.dtype, st.buf, st.slot, c.size(j), {rid, encoded[peer][j]});
    }
  }
  return b.take();
}

}  // namespace detail

}  // namespace ccl::coll
