// SPDX-License-Identifier: BSD-3-Clause
// Compressed plans. Data crosses the wire only as codec streams; sums are kept in fp32.
//
//   two-shot allreduce  every rank encodes shard k of its input once and sends it to rank k,
//                       which adds the n-1 streams to its own (exact) shard in fp32; each
//                       owner then encodes its sum once and sends it to everyone. Two
//                       quantizations whatever the rank count.
//   ring allreduce      the partial sum is decoded, added and re-encoded at every hop
//                       (n quantizations); the sums then go round the ring untouched.
//   sparse allreduce    each rank's sparse stream goes to every rank; every rank adds the n
//                       streams in rank order, so all get the same bits.
//   random-k ring       random-k draws the same positions on every rank, so the kept values
//                       of all ranks line up: an uncompressed ring allreduce of just the k
//                       values inside each rank's stream, then one decode. The sum stays
//                       k-sparse and each rank sends 2(n-1)/n * 4k bytes instead of (n-1) streams.
//   allgather, broadcast, all-to-all, send/recv: encode once, forward bytes, decode at the end
//                       (a send with error feedback keeps the sender's residual).
// The low-rank codec (powersgd) has plans for send/recv here (one piece: the whole matrix);
// its allreduce is lowrank_allreduce.cc.
// Every rank, the sender included, takes the decoded values, so all ranks agree exactly.
// Quantized data moves in chunks aligned to the codec block, so encoding one chunk
// overlaps the transfer of the previous one.
#include <algorithm>
#include <functional>
#include <tuple>
#include <vector>

#include "codecs/wire.h"
#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/misaligned.h"
#include "common/dtype.h"

namespace ccl::coll {
namespace {

using detail::mod;
using detail::tag;

// Fixed-size pieces of a range: `per` elements each, the last one shorter.
struct Pieces {
  size_t count;
  size_t per;
  size_t parts() const { return count == 0 ? 1 : (count + per - 1) / per; }
  size_t offset(size_t j) const { return j * per; }
  size_t size(size_t j) const { return std::min(per, count - std::min(count, j * per)); }
};

// Sparsifiers select over the whole piece (top-k is exact per message); quantizers are cut
// into chunks of whole blocks.
Pieces pieces(const CollArgs& a, size_t count) {
  if (!codec::isQuantizer(a.codec.codec)) return {count, std::max<size_t>(count, 1)};
  const size_t block = std::max<size_t>(a.codec.blockSize, 1);
  const size_t per = std::max(block, a.chunkBytes / sizeof(float) / block * block);
  return {count, per};
}

Plan codecPlan(const CollArgs& a) {
  Plan p = detail::emptyPlan(a);
  p.codec = a.codec;
  return p;
}

// Builds the codec steps of one rank's plan, naming the buffers by element offsets.
class Builder {
 public:
  explicit Builder(const CollArgs& a) : a_(a), p_(codecPlan(a)), es_(dataTypeSize(a.dtype)) {}

  Plan take() { return std::move(p_); }

  // Stochastic rounding draws differ per rank and per stream; random-k must draw the same
  // positions on every rank, so its encodes get no salt.
  void salt(StepId e) {
    if (a_.codec.codec != cclCodecRandK) p_.steps[e].seedSalt = static_cast<uint32_t>(a_.rank + 1) * 0x10000u + e;
  }
  Plan& plan() { return p_; }
  size_t es() const { return es_; }

  Ref send(size_t elem) const { return {Buf::kSend, elem * es_}; }
  Ref recv(size_t elem) const { return {Buf::kRecv, elem * es_}; }
  Ref floats(Ref base, size_t elem) const { return base + elem * sizeof(float); }
  const Ref* residual(size_t elem) {
    if (!a_.feedback) return nullptr;
    residual_ = {Buf::kFeedback, elem * sizeof(float)};
    return &residual_;
  }

  // A stream buffer for `count` elements with its length slot.
  struct Stream {
    Ref buf;
    size_t capacity;
    Slot slot;
    size_t count;  // elements it carries
  };
  Stream stream(size_t count) {
    size_t cap = codec::maxEncodedBytes(p_.codec, count);
    return {p_.scratch(cap), cap, p_.newSlot(), count};
  }

  // Encodes `count` elements of `type` at src into a new stream.
  std::pair<Stream, StepId> encode(Ref src, cclDataType_t type, size_t count, const Ref* res, const Deps& after) {
    Stream st = stream(count);
    StepId e = p_.encode(st.buf, st.capacity, st.slot, src, type, count, res, after);
    salt(e);
    return {st, e};
  }

  // The fused hop: stream `got` decoded and added to count elements of `type` at local,
  // divided by nranks if `divide`, encoded into a new stream.
  std::pair<Stream, StepId> decodeAddEncode(const Stream& got, Ref local, cclDataType_t type, bool divide,
                                            const Ref* res, const Deps& after) {
    Stream st = stream(got.count);
    StepId e =
        p_.decodeAddEncode(st.buf, st.capacity, st.slot, got.buf, got.slot, local, type, got.count, divide, res, after);
    salt(e);
    return {st, e};
  }

  StepId sendTo(int peer, uint32_t t, const Stream& st, const Deps& after) {
    return p_.sendStream(peer, t, st.buf, st.slot, st.count, after);
  }
  std::pair<Stream, StepId> recvFrom(int peer, uint32_t t, size_t count) {
    Stream st = stream(count);
    return {st, p_.recvStream(peer, t, st.buf, st.capacity, st.slot)};
  }

 private:
  const CollArgs& a_;
  Plan p_;
  size_t es_;
  Ref residual_{Buf::kFeedback, 0};
};

// Reduce-scatter in two shots' first half: this rank ends with the fp32 sum of its own
// shard. shardOffset/shardCount give the layout of the input; residual offsets follow the
// input. Returns the accumulator and, per chunk, the step after which it is complete.
// readDone[k][j] receives the step after which shard k chunk j of the input was read.
// With `fuseLast` the last peer's streams are left to the caller (`last`, per chunk) for a
// fused hop that adds them to `local(j)` (of `localType`: the input itself when there is
// one peer, else the fp32 sum of the others) and encodes the result; cclAvg's division is
// then the caller's too.
struct Owned {
  Ref acc;
  Pieces chunks;
  Deps ready;
  std::vector<std::pair<Builder::Stream, StepId>> last;
  bool direct = false;  // local(j) is the input: no sum, and `ready` is empty
  cclDataType_t localType = cclFloat32;
  std::function<Ref(size_t)> local;
};
template <class Offset, class Count>
Owned reduceToOwners(Builder& b, const CollArgs& a, Offset shardOffset, Count shardCount, std::vector<Deps>* readDone,
                     bool fuseLast) {
  const int n = a.nranks, r = a.rank;
  Plan& p = b.plan();
  // One peer and a fused hop: the hop reads the input itself, nothing is summed in between.
  const bool direct = fuseLast && n == 2;
  Owned own{direct ? Ref{Buf::kScratch, 0} : p.scratch(shardCount(r) * sizeof(float)),
            pieces(a, shardCount(r)),
            {},
            {},
            direct,
            direct ? a.dtype : cclFloat32,
            {}};
  if (direct)
    own.local = [&b, at = shardOffset(r), c = own.chunks](size_t j) { return b.send(at + c.offset(j)); };
  else
    own.local = [&b, acc = own.acc, c = own.chunks](size_t j) { return b.floats(acc, c.offset(j)); };
  if (readDone) readDone->assign(n, {});
  // Chunk by chunk across the peers (not peer by peer), so every owner gets its first
  // chunks from all peers early and can start the second shot while the first still runs.
  size_t maxParts = 0;
  for (int k = 1; k < n; ++k) maxParts = std::max(maxParts, pieces(a, shardCount(mod(r + k, n))).parts());
  for (size_t j = 0; j < maxParts; ++j) {
    for (int k = 1; k < n; ++k) {
      const int peer = mod(r + k, n);
      Pieces c = pieces(a, shardCount(peer));
      if (j >= c.parts()) continue;
      const size_t at = shardOffset(peer) + c.offset(j);
      auto [st, e] = b.encode(b.send(at), a.dtype, c.size(j), b.residual(at), {});
      b.sendTo(peer, tag(0, n, k, j), st, {e});
      if (readDone) (*readDone)[peer].push_back(e);
    }
  }
  // The own shard is widened after the encodes are queued: the executor runs ready steps in
  // order, and the first sends should not wait for a copy the first decodes need only later.
  if (!direct)
    for (size_t j = 0; j < own.chunks.parts(); ++j)
      own.ready.push_back(p.widen(own.local(j), b.send(shardOffset(r) + own.chunks.offset(j)), own.chunks.size(j)));
  if (readDone)
    for (StepId w : own.ready) (*readDone)[r].push_back(w);
  // Add the peers' streams in a fixed order (r-1, r-2, ...) so results do not depend on timing.
  for (int k = 1; k < n; ++k) {
    const int peer = mod(r - k, n);
    for (size_t j = 0; j < own.chunks.parts(); ++j) {
      auto [st, rid] = b.recvFrom(peer, tag(0, n, k, j), own.chunks.size(j));
      if (fuseLast && k + 1 == n) {
        own.last.push_back({st, rid});
        continue;
      }
      own.ready[j] = p.decodeAdd(own.local(j), st.buf, st.slot, own.chunks.size(j), {rid, own.ready[j]});
    }
  }
  if (a.op == cclAvg && !fuseLast)
    for (size_t j = 0; j < own.chunks.parts(); ++j)
      own.ready[j] = p.divideFloat(own.local(j), own.chunks.size(j), {own.ready[j]});
  return own;
}

Plan twoShotAllReduce(const CollArgs& a) {
  const int n = a.nranks, r = a.rank;
  Builder b(a);
  Plan& p = b.plan();
  Split shard{a.count, static_cast<size_t>(n)};
  auto offset = [&](int k) { return shard.offset(k); };
  auto count = [&](int k) { return shard.size(k); };
  std::vector<Deps> readDone;
  Owned own = reduceToOwners(b, a, offset, count, &readDone, true);
  // Second shot: each owner adds the last peer's stream and encodes its sum once, in one
  // fused step; everyone decodes every shard.
  for (size_t j = 0; j < own.chunks.parts(); ++j) {
    const size_t off = own.chunks.offset(j), len = own.chunks.size(j);
    const auto& [got, rid] = own.last[j];
    Deps after{rid};
    if (!own.direct) after.push_back(own.ready[j]);
    auto [st, e] =
        b.decodeAddEncode(got, own.local(j), own.localType, a.op == cclAvg, b.residual(a.count + off), after);
    readDone[r].push_back(e);
    for (int k = 1; k < n; ++k) b.sendTo(mod(r + k, n), tag(1, n, k, j), st, {e});
    p.decode(b.recv(offset(r) + off), a.dtype, st.buf, st.slot, len, {e});
  }
  for (int k = 1; k < n; ++k) {
    const int peer = mod(r - k, n);
    Pieces c = pieces(a, count(peer));
    for (size_t j = 0; j < c.parts(); ++j) {
      auto [st, rid] = b.recvFrom(peer, tag(1, n, k, j), c.size(j));
      // In place, the first shot may still be reading this part of the buffer.
      Deps deps{rid};
      if (j < readDone[peer].size()) deps.push_back(readDone[peer][j]);
      p.decode(b.recv(offset(peer) + c.offset(j)), a.dtype, st.buf, st.slot, c.size(j), deps);
    }
  }
  return b.take();
}

Plan ringAllReduce(const CollArgs& a) {
  const int n = a.nranks, r = a.rank, next = mod(r + 1, n), prev = mod(r - 1, n);
  Builder b(a);
  Plan& p = b.plan();
  Split seg{a.count, static_cast<size_t>(n)};
  // Per segment and chunk: the stream this rank sends on for it (its own input encoded at the
  // first step; after that, what a hop made of it), and the steps that read its input.
  std::vector<std::vector<std::pair<Builder::Stream, StepId>>> out(n);
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

// Sends this rank's stream(s) of `count` elements at src to every peer; returns them.
std::vector<std::pair<Builder::Stream, StepId>> encodeForAll(Builder& b, const CollArgs& a, Ref src, size_t count,
                                                             size_t residualAt) {
  std::vector<std::pair<Builder::Stream, StepId>> out;
  Pieces c = pieces(a, count);
  for (size_t j = 0; j < c.parts(); ++j) {
    out.push_back(b.encode(src + c.offset(j) * b.es(), a.dtype, c.size(j), b.residual(residualAt + c.offset(j)), {}));
    for (int k = 1; k < a.nranks; ++k)
      b.sendTo(mod(a.rank + k, a.nranks), tag(0, a.nranks, k, j), out.back().first, {out.back().second});
  }
  return out;
}

Plan sparseAllReduce(const CollArgs& a) {
  const int n = a.nranks, r = a.rank;
  Builder b(a);
  Plan& p = b.plan();
  auto mine = encodeForAll(b, a, b.send(0), a.count, 0);
  Ref acc = p.scratch(a.count * sizeof(float));
  // A sparsifier's stream is one piece; a quantiser's (CCL_ALGO=sparse) one per chunk.
  const Pieces c = pieces(a, a.count);
  Deps last;
  for (size_t j = 0; j < c.parts(); ++j) {
    Deps piece;
    for (int k = 0; k < n; ++k) {
      Builder::Stream st;
      StepId got;
      if (k == r) {
        std::tie(st, got) = mine[j];
      } else {
        std::tie(st, got) = b.recvFrom(k, tag(0, n, mod(r - k, n), j), c.size(j));
      }
      Deps deps = piece;
      deps.push_back(got);
      const Ref at = b.floats(acc, c.offset(j));
      piece = {k == 0 ? p.decode(at, cclFloat32, st.buf, st.slot, c.size(j), deps)
                      : p.decodeAdd(at, st.buf, st.slot, c.size(j), deps)};
    }
    last.insert(last.end(), piece.begin(), piece.end());
    last.push_back(mine[j].second);  // in place: the input has been encoded
  }
  p.narrow(b.recv(0), acc, a.count, a.op == cclAvg, last);
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

Plan randkRingAllReduce(const CollArgs& a) {
  Builder b(a);
  Plan& p = b.plan();
  auto [st, e] = b.encode(b.send(0), a.dtype, a.count, b.residual(0), {});
  CollArgs values = a;
  values.count = codec::keptCount(a.codec, a.count);
  const size_t first = p.steps.size();
  Deps done = detail::ringAllReduceInPlace(p, values, st.buf + randkLayout(a).codes, {e});
  // Statistics: each value sent stands for count/k dense elements.
  const double dense = static_cast<double>(a.count) / static_cast<double>(values.count);
  for (size_t i = first; i < p.steps.size(); ++i)
    if (p.steps[i].kind == StepKind::kSend) p.steps[i].rawBytes = static_cast<size_t>(p.steps[i].bytes * dense);
  done.push_back(e);
  p.decode(b.recv(0), a.dtype, st.buf, st.slot, a.count, done);
  return b.take();
}

// The compressed allreduce nothing crosses (no data, or one rank): with one rank the result
// still goes through the codec once, as it would with more ranks, so that behaviour does not
// change with the rank count.
std::optional<Plan> localCompressedAllReduce(const CollArgs& a) {
  if (a.count == 0) return codecPlan(a);
  if (a.nranks != 1) return std::nullopt;
  Builder b(a);
  auto [st, e] = b.encode(b.send(0), a.dtype, a.count, b.residual(0), {});
  b.plan().decode(b.recv(0), a.dtype, st.buf, st.slot, a.count, {e});
  return b.take();
}

// Whether the n shards of `count` elements all cut into as many pieces.
bool evenPieces(const CollArgs& a, size_t count) {
  const Split shard{count, static_cast<size_t>(a.nranks)};
  return pieces(a, shard.size(0)).parts() == pieces(a, shard.size(static_cast<size_t>(a.nranks) - 1)).parts();
}

}  // namespace

namespace detail {
Plan twoShotAllReduce(const CollArgs& a) {
  if (auto local = localCompressedAllReduce(a)) return std::move(*local);
  return coll::twoShotAllReduce(a);
}
Plan compressedRingAllReduce(const CollArgs& a) {
  if (auto local = localCompressedAllReduce(a)) return std::move(*local);
  return randkRingApplies(a) ? randkRingAllReduce(a) : coll::ringAllReduce(a);
}
Plan sparseAllReduce(const CollArgs& a) {
  if (auto local = localCompressedAllReduce(a)) return std::move(*local);
  return coll::sparseAllReduce(a);
}
// Random-k's values ring when they are many; few go to everyone in one round.
bool compressedRingPreferred(const CollArgs& a) {
  return randkRingApplies(a) && codec::keptCount(a.codec, a.count) * sizeof(float) > a.treeMaxBytes;
}
bool twoShotSymmetric(const CollArgs& a) { return evenPieces(a, a.count); }
bool compressedRingSymmetric(const CollArgs& a) {
  if (!randkRingApplies(a)) return evenPieces(a, a.count);
  CollArgs values = a;
  values.count = codec::keptCount(a.codec, a.count);
  return evenRingChunks(values, values.count, sizeof(float));
}
}  // namespace detail

size_t feedbackFloats(Coll c, const CollArgs& a) {
  if (codec::isLowRank(a.codec.codec)) return codec::residualFloats(a.codec, a.count);
  if (c == Coll::kAllReduce && chooseAlgorithm(c, a).algo == Algo::kHier) return hierarchicalFeedbackFloats(a);
  const size_t n = static_cast<size_t>(a.nranks);
  return c == Coll::kReduceScatter ? a.count * n : a.count + (a.count + n - 1) / n;
}

Plan detail::compressedReduceScatter(const CollArgs& a) {
  if (a.count == 0) return codecPlan(a);
  Builder b(a);
  auto offset = [&](int k) { return static_cast<size_t>(k) * a.count; };
  auto count = [&](int) { return a.count; };
  Owned own = reduceToOwners(b, a, offset, count, nullptr, false);
  for (size_t j = 0; j < own.chunks.parts(); ++j)
    b.plan().narrow(b.recv(own.chunks.offset(j)), b.floats(own.acc, own.chunks.offset(j)), own.chunks.size(j), false,
                    {own.ready[j]});
  return b.take();
}

Plan detail::compressedAllGather(const CollArgs& a) {
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

Plan detail::compressedChainBroadcast(const CollArgs& a) {
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

Plan detail::compressedAlltoAll(const CollArgs& a) {
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

Plan planCompressedSend(const CollArgs& a, int peer, uint32_t t) {
  Builder b(a);
  Pieces c = pieces(a, a.count);
  for (size_t j = 0; j < c.parts() && a.count > 0; ++j) {
    auto [st, e] = b.encode(b.send(c.offset(j)), a.dtype, c.size(j), b.residual(c.offset(j)), {});
    b.sendTo(peer, t + static_cast<uint32_t>(j), st, {e});
  }
  return stageMisaligned(b.take(), Coll::kSend, a);
}

Plan planCompressedRecv(const CollArgs& a, int peer, uint32_t t) {
  Builder b(a);
  Pieces c = pieces(a, a.count);
  for (size_t j = 0; j < c.parts() && a.count > 0; ++j) {
    auto [st, rid] = b.recvFrom(peer, t + static_cast<uint32_t>(j), c.size(j));
    b.plan().decode(b.recv(c.offset(j)), a.dtype, st.buf, st.slot, c.size(j), {rid});
  }
  return stageMisaligned(b.take(), Coll::kRecv, a);
}

}  // namespace ccl::coll
