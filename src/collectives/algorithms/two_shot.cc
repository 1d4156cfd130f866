// SPDX-License-Identifier: BSD-3-Clause
// Two-shot compressed allreduce and the compressed reduce-scatter (its first shot). Every
// rank encodes shard k of its input once and sends it to rank k, which adds the n-1 streams
// to its own (exact) shard in fp32; for the allreduce each owner then encodes its sum once
// and sends it to everyone. Two quantizations whatever the rank count.
#include <functional>
#include <utility>
#include <vector>

#include "collectives/algorithms/codec_steps.h"

namespace ccl::coll::detail {
namespace {

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
  std::vector<Sent> last;
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

Plan twoShot(const CollArgs& a) {
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

}  // namespace

Plan twoShotAllReduce(const CollArgs& a) {
  if (auto local = localCompressedAllReduce(a)) return std::move(*local);
  return twoShot(a);
}

bool twoShotSymmetric(const CollArgs& a) { return evenPieces(a, a.count); }

Plan compressedReduceScatter(const CollArgs& a) {
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

}  // namespace ccl::coll::detail
