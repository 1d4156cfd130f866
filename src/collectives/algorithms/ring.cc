// SPDX-License-Identifier: BSD-3-Clause
// The ring family. Reduce-scatter and allgather, and allreduce as the two back to back.
// Segment k of the data ends up reduced on rank k; every segment is cut into chunks that
// travel the ring independently, so one chunk's reduction overlaps the next chunk's transfer.
// Compressed allreduce: the partial sum is decoded, added and re-encoded at every hop (n
// quantizations, one fused step each); the sums then go round the ring untouched. Random-k
// draws the same positions on every rank, so the kept values of all ranks line up: an
// uncompressed ring allreduce of just the k values inside each rank's stream (and one fp32
// more: whether any rank's input held a NaN or an infinity), then one decode; the sum stays
// k-sparse and each rank sends 2(n-1)/n * 4(k+1) bytes.
#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "codecs/wire.h"
#include "collectives/algorithms/codec_steps.h"
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

namespace detail {
namespace {

Plan quantizedRing(const CollArgs& a) {
  const int n = a.nranks, r = a.rank, next = mod(r + 1, n), prev = mod(r - 1, n);
  Builder b(a);
  Plan& p = b.plan();
  Split seg{a.count, static_cast<size_t>(n)};
  // Per segment and chunk: the stream this rank sends on for it (its own input encoded at the
  // first step; after that, what a hop made of it), and the steps that read its input.
  std::vector<std::vector<Sent>> out(n);
  std::vector<Deps> readDone(n);
  for (int s = 0; s + 1 < n; ++s) {
    const int sendSeg = mod(r - 1 - s, n), recvSeg = mod(r - 2 - s, n);
    Pieces sc = pieces(a, seg.size(sendSeg));
    for (size_t j = 0; j < sc.parts(); ++j) {
      const size_t at = seg.offset(sendSeg) + sc.offset(j);
      if (s == 0) {
        out[sendSeg].push_back(b.encode(b.send(at), a.dtype, sc.size(j), b.residual(at), {}));
        readDone[sendSeg].push_back(out[sendSeg][j].second);
      }
      b.sendTo(next, tag(0, n, s, j), out[sendSeg][j].first, {out[sendSeg][j].second});
    }
    // Each hop is one fused step: the partial sum received, plus this rank's chunk, encoded
    // again for the next rank. The last hop makes the owner's sum (divided for cclAvg), which
    // is encoded once and then travels the ring unchanged.
    const bool owner = recvSeg == r;
    Pieces rc = pieces(a, seg.size(recvSeg));
    for (size_t j = 0; j < rc.parts(); ++j) {
      const size_t at = seg.offset(recvSeg) + rc.offset(j);
      auto [st, rid] = b.recvFrom(prev, tag(0, n, s, j), rc.size(j));
      out[recvSeg].push_back(b.decodeAddEncode(st, b.send(at), a.dtype, owner && a.op == cclAvg,
                                               b.residual(owner ? a.count + rc.offset(j) : at), {rid}));
      readDone[recvSeg].push_back(out[recvSeg][j].second);
    }
  }
  Pieces oc = pieces(a, seg.size(r));
  for (size_t j = 0; j < oc.parts(); ++j) {
    const auto& [st, e] = out[r][j];
    b.sendTo(next, tag(1, n, 0, j), st, {e});
    p.decode(b.recv(seg.offset(r) + oc.offset(j)), a.dtype, st.buf, st.slot, oc.size(j), {e});
  }
  for (int s = 0; s + 1 < n; ++s) {
    const int recvSeg = mod(r - s - 1, n);
    Pieces rc = pieces(a, seg.size(recvSeg));
    for (size_t j = 0; j < rc.parts(); ++j) {
      auto [st, rid] = b.recvFrom(prev, tag(1, n, s, j), rc.size(j));
      if (s + 2 < n) b.sendTo(next, tag(1, n, s + 1, j), st, {rid});
      p.decode(b.recv(seg.offset(recvSeg) + rc.offset(j)), a.dtype, st.buf, st.slot, rc.size(j),
               {rid, readDone[recvSeg][j]});
    }
  }
  return b.take();
}

// Where random-k's fp32 values sit in its stream (the layout follows from the header alone).
codec::Layout randkLayout(const CollArgs& a) {
  codec::Header h;
  h.codec = static_cast<uint8_t>(cclCodecRandK);
  h.count = a.count;
  h.aux = codec::keptCount(a.codec, a.count);
  return codec::layoutOf(h);
}

bool randkRingApplies(const CollArgs& a) {
  return a.codec.codec == cclCodecRandK && a.dtype == cclFloat32 && !a.codec.fp16Values && a.nranks > 1;
}

// Every rank encodes its input with the same draws (one stream each, the same positions),
// the ring sums the streams' values in place, and every rank decodes its stream. The values
// ring with one fp32 more after them: the news of whether the rank's input held a NaN or an
// infinity (codec::kRandKNewsOut: 0, or NaN). The encoder says so only in its own stream's
// header (kFlagNonFinite: that stream decodes as NaN everywhere) and sends such an input's
// values as 0, so without the news the other ranks would decode finite values; with it
// every rank's stream gets the flag where the summed news is NaN (kRandKNewsIn), and every
// rank decodes NaN everywhere.
Plan randkRingAllReduce(const CollArgs& a) {
  Builder b(a);
  Plan& p = b.plan();
  const codec::Layout l = randkLayout(a);
  const size_t kept = codec::keptCount(a.codec, a.count);
  // The stream may end right after its values: room for the news is made there.
  const size_t cap = codec::maxEncodedBytes(p.codec, a.count);
  const Ref stream = p.scratch(std::max(cap, l.codes + (kept + 1) * sizeof(float)));
  const Slot slot = p.newSlot();
  const StepId e = p.encode(stream, cap, slot, b.send(0), a.dtype, a.count, b.residual(0));
  const Ref news = stream + l.codes + kept * sizeof(float);
  const StepId told = p.add(
      {.kind = StepKind::kCodecStage, .dst = news, .src = stream, .count = 1, .stage = codec::kRandKNewsOut}, {e});
  CollArgs values = a;
  values.count = kept + 1;
  const size_t first = p.steps.size();
  const Deps done = detail::ringAllReduceInPlace(p, values, stream + l.codes, {told});
  // Statistics: each value sent stands for count/k dense elements.
  const double dense = static_cast<double>(a.count) / static_cast<double>(kept);
  for (size_t i = first; i < p.steps.size(); ++i)
    if (p.steps[i].kind == StepKind::kSend) p.steps[i].rawBytes = static_cast<size_t>(p.steps[i].bytes * dense);
  const StepId heard = p.add(
      {.kind = StepKind::kCodecStage, .dst = stream, .src = news, .count = 1, .stage = codec::kRandKNewsIn}, done);
  p.decode(b.recv(0), a.dtype, stream, slot, a.count, {heard, e});
  return b.take();
}

}  // namespace

Plan compressedRingAllReduce(const CollArgs& a) {
  if (auto local = localCompressedAllReduce(a)) return std::move(*local);
  return randkRingApplies(a) ? randkRingAllReduce(a) : quantizedRing(a);
}

// Random-k's values ring when they are many; few go to everyone in one round.
bool compressedRingPreferred(const CollArgs& a) {
  return randkRingApplies(a) && codec::keptCount(a.codec, a.count) * sizeof(float) > a.treeMaxBytes;
}

bool compressedRingSymmetric(const CollArgs& a) {
  if (!randkRingApplies(a)) return evenPieces(a, a.count);
  CollArgs values = a;
  values.count = codec::keptCount(a.codec, a.count) + 1;  // and the non-finite news
  return evenRingChunks(values, values.count, sizeof(float));
}

}  // namespace detail

}  // namespace ccl::coll
