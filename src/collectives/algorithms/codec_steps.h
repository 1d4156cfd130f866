// SPDX-License-Identifier: BSD-3-Clause
// What every compressed row of the algorithm table builds with (ring.cc, two_shot.cc,
// sparse.cc, direct.cc, chain.cc, p2p.cc): data crosses the wire only as codec streams, sums
// are kept in fp32, and every rank, the sender included, takes the decoded values, so all
// ranks agree exactly. Quantized data moves in chunks aligned to the codec block, so
// encoding one chunk overlaps the transfer of the previous one.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

#include "codecs/codec.h"
#include "collectives/algorithms/algorithms.h"
#include "common/dtype.h"

namespace ccl::coll::detail {

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
Pieces pieces(const CollArgs& a, size_t count);

// An empty plan that carries a.codec.
Plan codecPlan(const CollArgs& a);

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

// A stream and the step after which it is complete (its encode or its receive).
using Sent = std::pair<Builder::Stream, StepId>;

// Encodes this rank's `count` elements at src, one stream per piece, and sends every stream
// to every peer (tag phase 0, step k for the peer k ranks on); returns the streams. The
// residual of element i is at residualAt + i.
std::vector<Sent> encodeForAll(Builder& b, const CollArgs& a, Ref src, size_t count, size_t residualAt);

// The compressed allreduce nothing crosses (no data, or one rank); nullopt otherwise.
std::optional<Plan> localCompressedAllReduce(const CollArgs& a);

// Whether the n shards of `count` elements all cut into as many pieces.
bool evenPieces(const CollArgs& a, size_t count);

}  // namespace ccl::coll::detail
