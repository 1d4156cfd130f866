// SPDX-License-Identifier: BSD-3-Clause
#include "collectives/algorithms/codec_steps.h"

#include <algorithm>

#include "codecs/wire.h"
#include "common/tags.h"

namespace ccl::coll {
namespace detail {

Pieces pieces(const CollArgs& a, size_t count) {
  if (!codec::isQuantizer(a.codec.codec)) return {count, std::max<size_t>(count, 1)};
  const size_t block = std::max<size_t>(a.codec.blockSize, 1);
  // A message tag numbers a call's pieces in kChunkBits: a small CCL_CHUNK_BYTES on a large
  // call gives pieces larger than asked, as uncompressed plans' chunks (detail::chunks).
  const size_t fewest = (count + tags::kChunkLimit - 1) / tags::kChunkLimit;
  const size_t per =
      std::max({block, a.chunkBytes / sizeof(float) / block * block, (fewest + block - 1) / block * block});
  return {count, per};
}

Plan codecPlan(const CollArgs& a) {
  Plan p = emptyPlan(a);
  p.codec = a.codec;
  return p;
}

std::vector<Sent> encodeForAll(Builder& b, const CollArgs& a, Ref src, size_t count, size_t residualAt) {
  std::vector<Sent> out;
  Pieces c = pieces(a, count);
  for (size_t j = 0; j < c.parts(); ++j) {
    out.push_back(b.encode(src + c.offset(j) * b.es(), a.dtype, c.size(j), b.residual(residualAt + c.offset(j)), {}));
    for (int k = 1; k < a.nranks; ++k)
      b.sendTo(mod(a.rank + k, a.nranks), tag(0, a.nranks, k, j), out.back().first, {out.back().second});
  }
  return out;
}

std::optional<Plan> localCompressedAllReduce(const CollArgs& a) {
  if (a.count == 0) return codecPlan(a);
  if (a.nranks != 1) return std::nullopt;
  Builder b(a);
  auto [st, e] = b.encode(b.send(0), a.dtype, a.count, b.residual(0), {});
  b.plan().decode(b.recv(0), a.dtype, st.buf, st.slot, a.count, {e});
  return b.take();
}

bool evenPieces(const CollArgs& a, size_t count) {
  const Split shard{count, static_cast<size_t>(a.nranks)};
  return pieces(a, shard.size(0)).parts() == pieces(a, shard.size(static_cast<size_t>(a.nranks) - 1)).parts();
}

}  // namespace detail

size_t feedbackFloats(Coll c, const CollArgs& a) {
  if (codec::isLowRank(a.codec.codec)) return codec::residualFloats(a.codec, a.count);
  if (c == Coll::kAllReduce && chooseAlgorithm(c, a).algo == Algo::kHier) return hierarchicalFeedbackFloats(a);
  const size_t n = static_cast<size_t>(a.nranks);
  return c == Coll::kReduceScatter ? a.count * n : a.count + (a.count + n - 1) / n;
}

}  // namespace ccl::coll
