// SPDX-License-Identifier: BSD-3-Clause
// Ring reduce-scatter and allgather, and allreduce as the two back to back. Segment k of
// the data ends up reduced on rank k; every segment is cut into chunks that travel the
// ring independently, so one chunk's reduction overlaps the next chunk's transfer.
#include <functional>
#include <vector>

#include "collectives/algorithms/algorithms.h"
#include "common/dtype.h"

namespace ccl::coll {
namespace {

using detail::mod;

// Where each segment lives, in elements and as buffer references.
struct RingLayout {
  std::vector<size_t> count;             // elements of segment k
  std::function<Ref(int)> contribution;  // this rank's own data of segment k
  std::function<Ref(int)> accumulator;   // where segment k is reduced and gathered
  Deps after;                            // steps that produce the contributions
};

struct RingState {
  std::vector<std::vector<StepId>> sends;  // [segment][chunk] reduce-scatter sends
  std::vector<StepId> ownReady;            // [chunk] last step producing this rank's segment
};

// Reduce-scatter: after it, accumulator(rank) holds the reduction of segment `rank`.
RingState reduceScatterSteps(Plan& p, const CollArgs& a, const RingLayout& L) {
  const int n = a.nranks, r = a.rank, next = mod(r + 1, n), prev = mod(r - 1, n);
  const size_t es = dataTypeSize(a.dtype);
  RingState st;
  st.sends.resize(n);
  std::vector<std::vector<StepId>> reduced(n);
  for (int s = 0; s + 1 < n; ++s) {
    const int sendSeg = mod(r - 1 - s, n), recvSeg = mod(r - 2 - s, n);
    Split sc = detail::chunks(L.count[sendSeg], es, a.chunkBytes);
    for (size_t j = 0; j < sc.parts; ++j) {
      size_t off = sc.offset(j) * es;
      Ref src = s == 0 ? L.contribution(sendSeg) + off : L.accumulator(sendSeg) + off;
      st.sends[sendSeg].push_back(
          p.send(next, detail::tag(0, n, s, j), src, sc.size(j) * es, s == 0 ? L.after : Deps{reduced[sendSeg][j]}));
    }
    Split rc = detail::chunks(L.count[recvSeg], es, a.chunkBytes);
    Ref tmp = p.scratch(L.count[recvSeg] * es);
    for (size_t j = 0; j < rc.parts; ++j) {
      size_t off = rc.offset(j) * es;
      // Read in place only where the receive is posted at once, as a plain one would be: a
      // message that arrives before its receive is copied aside.
      if (a.readInPlace && L.after.empty()) {
        reduced[recvSeg].push_back(p.recvReduce(prev, detail::tag(0, n, s, j), L.accumulator(recvSeg) + off,
                                                L.contribution(recvSeg) + off, tmp + off, rc.size(j)));
        continue;
      }
      StepId rid = p.recv(prev, detail::tag(0, n, s, j), tmp + off, rc.size(j) * es);
      Deps deps = L.after;
      deps.push_back(rid);
      reduced[recvSeg].push_back(
          p.reduce(L.accumulator(recvSeg) + off, L.contribution(recvSeg) + off, tmp + off, rc.size(j), deps));
    }
  }
  st.ownReady = reduced[r];
  if (n > 1 && a.op == cclAvg) {
    Split oc = detail::chunks(L.count[r], es, a.chunkBytes);
    for (size_t j = 0; j < oc.parts; ++j)
      st.ownReady[j] = p.divide(L.accumulator(r) + oc.offset(j) * es, oc.size(j), {st.ownReady[j]});
  }
  return st;
}

// Allgather: accumulator(k) on every rank receives segment k. `first` is where this rank's
// own segment is read for the first hop; ownReady/hazard give the steps a chunk must wait for.
void allGatherSteps(Plan& p, const CollArgs& a, const RingLayout& L, Ref first, const std::vector<StepId>& ownReady,
                    const std::vector<std::vector<StepId>>* hazard) {
  const int n = a.nranks, r = a.rank, next = mod(r + 1, n), prev = mod(r - 1, n);
  const size_t es = dataTypeSize(a.dtype);
  std::vector<std::vector<StepId>> received(n);
  for (int s = 0; s + 1 < n; ++s) {
    const int sendSeg = mod(r - s, n), recvSeg = mod(r - s - 1, n);
    Split sc = detail::chunks(L.count[sendSeg], es, a.chunkBytes);
    for (size_t j = 0; j < sc.parts; ++j) {
      size_t off = sc.offset(j) * es;
      uint32_t t = detail::tag(1, n, s, j);
      if (s == 0)
        p.send(next, t, first + off, sc.size(j) * es, ownReady.empty() ? Deps{} : Deps{ownReady[j]});
      else
        p.send(next, t, L.accumulator(sendSeg) + off, sc.size(j) * es, {received[sendSeg][j]});
    }
    Split rc = detail::chunks(L.count[recvSeg], es, a.chunkBytes);
    for (size_t j = 0; j < rc.parts; ++j) {
      size_t off = rc.offset(j) * es;
      uint32_t t = detail::tag(1, n, s, j);
      Ref dst = L.accumulator(recvSeg) + off;
      // The reduce-scatter may still be sending this chunk from the same memory.
      received[recvSeg].push_back(p.recv(prev, t, dst, rc.size(j) * es, hazard ? Deps{(*hazard)[recvSeg][j]} : Deps{}));
    }
  }
}

}  // namespace

Plan detail::ringAllReduce(const CollArgs& a) {
  if (auto local = localAllReduce(a)) return std::move(*local);
  Plan p = detail::emptyPlan(a);
  const size_t es = dataTypeSize(a.dtype);
  Split seg{a.count, static_cast<size_t>(a.nranks)};
  RingLayout L;
  for (int k = 0; k < a.nranks; ++k) L.count.push_back(seg.size(k));
  L.contribution = [&](int k) { return Ref{Buf::kSend, seg.offset(k) * es}; };
  L.accumulator = [&](int k) { return Ref{Buf::kRecv, seg.offset(k) * es}; };
  RingState st = reduceScatterSteps(p, a, L);
  allGatherSteps(p, a, L, L.accumulator(a.rank), st.ownReady, &st.sends);
  return p;
}

Deps detail::ringAllReduceInPlace(Plan& p, const CollArgs& a, Ref data, const Deps& after, uint32_t tagOffset) {
  const size_t es = dataTypeSize(a.dtype);
  Split seg{a.count, static_cast<size_t>(a.nranks)};
  RingLayout L;
  for (int k = 0; k < a.nranks; ++k) L.count.push_back(seg.size(k));
  L.contribution = L.accumulator = [&](int k) { return data + seg.offset(k) * es; };
  L.after = after;
  const size_t first = p.steps.size();
  RingState st = reduceScatterSteps(p, a, L);
  allGatherSteps(p, a, L, L.accumulator(a.rank), st.ownReady, &st.sends);
  Deps written;
  for (size_t i = first; i < p.steps.size(); ++i) {
    Step& s = p.steps[i];
    if (s.kind == StepKind::kSend || isReceive(s.kind)) s.tag += tagOffset;
    if (s.kind != StepKind::kSend) written.push_back(static_cast<StepId>(i));
  }
  return written;
}

Plan detail::ringReduceScatter(const CollArgs& a) {
  Plan p = detail::emptyPlan(a);
  const size_t es = dataTypeSize(a.dtype), bytes = a.count * es;
  if (a.count == 0) return p;
  if (a.nranks == 1) {
    p.copy({Buf::kRecv, 0}, {Buf::kSend, 0}, bytes);
    return p;
  }
  Ref partial = p.scratch(bytes * a.nranks);
  RingLayout L;
  L.count.assign(a.nranks, a.count);
  L.contribution = [&](int k) { return Ref{Buf::kSend, k * bytes}; };
  L.accumulator = [&](int k) { return k == a.rank ? Ref{Buf::kRecv, 0} : partial + k * bytes; };
  reduceScatterSteps(p, a, L);
  return p;
}

Plan detail::ringAllGather(const CollArgs& a) {
  Plan p = detail::emptyPlan(a);
  const size_t es = dataTypeSize(a.dtype), bytes = a.count * es;
  if (a.count == 0) return p;
  if (!a.inPlace) p.copy({Buf::kRecv, a.rank * bytes}, {Buf::kSend, 0}, bytes);
  RingLayout L;
  L.count.assign(a.nranks, a.count);
  L.accumulator = [&](int k) { return Ref{Buf::kRecv, k * bytes}; };
  allGatherSteps(p, a, L, a.inPlace ? Ref{Buf::kRecv, a.rank * bytes} : Ref{Buf::kSend, 0}, {}, nullptr);
  return p;
}

}  // namespace ccl::coll
