// SPDX-License-Identifier: BSD-3-Clause
// Sparse allreduce: each rank's sparse stream goes to every rank, and every rank adds the n
// streams in rank order, so all get the same bits.
#include <tuple>
#include <utility>

#include "collectives/algorithms/codec_steps.h"

namespace ccl::coll::detail {
namespace {

Plan sparseToAll(const CollArgs& a) {
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

}  // namespace

Plan sparseAllReduce(const CollArgs& a) {
  if (auto local = localCompressedAllReduce(a)) return std::move(*local);
  return sparseToAll(a);
}

}  // namespace ccl::coll::detail
