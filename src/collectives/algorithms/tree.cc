// SPDX-License-Identifier: BSD-3-Clause
// The tree family: allreduce by recursive doubling (CCL_ALGO=tree), for latency-bound sizes.
#include "collectives/algorithms/algorithms.h"
#include "common/dtype.h"

namespace ccl::coll {

namespace {

Deps with(Deps d, StepId extra) {
  d.push_back(extra);
  return d;
}

// Recursive doubling over the largest power of two p <= n ranks. The first 2(n-p) ranks
// pair up first: even ones hand their data to the odd neighbour, sit out, and get the
// result back at the end. Partners combine the same two values, so every rank ends with
// bit-identical results (the ops are commutative).
Plan recursiveDoubling(const CollArgs& a) {
  Plan p = detail::emptyPlan(a);
  const int n = a.nranks, r = a.rank;
  const size_t bytes = a.count * dataTypeSize(a.dtype);
  const Ref acc{Buf::kRecv, 0};
  Deps last;  // the steps after which acc holds this rank's current value
  if (!a.inPlace) last = {p.copy(acc, {Buf::kSend, 0}, bytes)};

  int pow2 = 1;
  while (pow2 * 2 <= n) pow2 *= 2;
  const int rem = n - pow2;
  constexpr uint32_t kFoldTag = 0, kUnfoldTag = 1, kRoundTag = 2;
  int newRank = r - rem;
  if (r < 2 * rem && r % 2 == 0) {
    StepId sid = p.send(r + 1, kFoldTag, acc, bytes, last);
    last = {p.recv(r + 1, kUnfoldTag, acc, bytes, {sid})};
    newRank = -1;
  } else if (r < 2 * rem) {
    Ref tmp = p.scratch(bytes);
    last = {p.reduce(acc, acc, tmp, a.count, with(last, p.recv(r - 1, kFoldTag, tmp, bytes)))};
    newRank = r / 2;
  }
  if (newRank >= 0) {
    int round = 0;
    for (int mask = 1; mask < pow2; mask <<= 1, ++round) {
      int partnerNew = newRank ^ mask;
      int partner = partnerNew < rem ? partnerNew * 2 + 1 : partnerNew + rem;
      Ref tmp = p.scratch(bytes);
      StepId rid = p.recv(partner, kRoundTag + round, tmp, bytes);
      StepId sid = p.send(partner, kRoundTag + round, acc, bytes, last);
      // The send reads acc, so the reduction that overwrites it waits for the send.
      last = {p.reduce(acc, acc, tmp, a.count, {rid, sid})};
    }
    if (r < 2 * rem) last = {p.send(r - 1, kUnfoldTag, acc, bytes, last)};
  }
  if (a.op == cclAvg) p.divide(acc, a.count, last);
  return p;
}

}  // namespace

namespace detail {

Plan recursiveDoublingAllReduce(const CollArgs& a) {
  if (auto local = localAllReduce(a)) return std::move(*local);
  return recursiveDoubling(a);
}

}  // namespace detail

}  // namespace ccl::coll
