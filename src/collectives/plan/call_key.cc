// SPDX-License-Identifier: BSD-3-Clause
#include "collectives/plan/call_key.h"

#include <bit>

namespace ccl::coll {

uint64_t codecDigest(const codec::Params& p) {
  if (p.codec == cclCodecNone) return 0;
  return fnv1a({uint64_t(p.codec), uint64_t(p.blockSize), uint64_t(p.fp16Scales), uint64_t(p.fp16Values),
                std::bit_cast<uint64_t>(p.keepRatio), uint64_t(std::bit_cast<uint32_t>(p.threshold)),
                uint64_t(p.stochastic), p.seed, uint64_t(p.rank), uint64_t(p.rows), uint64_t(p.cols),
                uint64_t(p.warmStart)});
}

CallKey CallKey::of(int kind, const CollArgs& a) {
  return CallKey{kind, a.count, a.dtype, a.op, a.root, a.inPlace, codecKey(a), a.misaligned};
}

uint64_t codecKey(const CollArgs& a) {
  if (a.codec.codec == cclCodecNone) return 0;
  // Whether the low-rank codec's feedback state keeps a residual is the caller's, per rank.
  return fnv1a({codecDigest(a.codec), uint64_t(a.feedback), uint64_t(a.codec.residualFeedback)}) | 1;
}

size_t CallKeyHash::operator()(const CallKey& k) const {
  size_t h = k.count * 0x9e3779b97f4a7c15ull;
  h ^= k.codec * 0xff51afd7ed558ccdull;
  for (int v : {k.kind, k.dtype, k.op, k.root, static_cast<int>(k.inPlace), static_cast<int>(k.misaligned)})
    h = (h ^ static_cast<size_t>(v)) * 0x100000001b3ull;
  return h;
}

}  // namespace ccl::coll
