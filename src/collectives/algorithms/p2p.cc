// SPDX-License-Identifier: BSD-3-Clause
// Point to point: one message, or, compressed, one stream per piece (the low-rank codec's
// one piece is the whole matrix); a send with error feedback keeps the sender's residual.
// A compressed call's misaligned buffer is staged (misaligned.h).
#include "collectives/algorithms/codec_steps.h"
#include "collectives/algorithms/misaligned.h"

namespace ccl::coll {

Plan planSend(int peer, uint32_t tag, size_t bytes) {
  Plan p;
  p.send(peer, tag, {Buf::kSend, 0}, bytes);
  return p;
}

Plan planRecv(int peer, uint32_t tag, size_t bytes) {
  Plan p;
  p.recv(peer, tag, {Buf::kRecv, 0}, bytes);
  return p;
}

using detail::Builder;
using detail::Pieces;
using detail::pieces;

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
