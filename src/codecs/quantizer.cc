// SPDX-License-Identifier: BSD-3-Clause
// The block quantizers' entry points: each codec's kind, whose loops (quantizer_loops.h) are
// compiled in quantizer_fp8.cc, quantizer_fp4.cc or quantizer_int.cc.
#include "codecs/quantizer.h"

#include "codecs/quantizer_loops.h"

namespace ccl::codec::detail {
namespace quantizer {
CCL_EACH_QUANTIZER_KIND(CCL_QUANTIZER_INSTANTIATE, extern)
}  // namespace quantizer

size_t quantizerMaxBytes(const Params& p, size_t n) {
  Header h;
  h.codec = static_cast<uint8_t>(p.codec);
  h.blockSize = p.blockSize;
  h.count = n;
  h.flags = quantizerFlags(p);
  h.aux = p.fixedLength ? 0 : blocksOf(n, p.blockSize);  // every block raw
  return layoutOf(h).total;
}

size_t quantizerEncode(const Params& p, const void* x, cclDataType_t type, size_t n, uint8_t* out, float* residual) {
  return withQuantizerKind(
      p.codec, [&](auto kind) { return quantizer::encodeKind<decltype(kind)>(p, x, type, n, out, residual); });
}

void quantizerDecode(const Header& h, const uint8_t* in, void* y, cclDataType_t type) {
  withQuantizerKind(h.codec, [&](auto kind) { quantizer::decodeKind<decltype(kind)>(h, in, y, type); });
}

void quantizerAccumulate(const Header& h, const uint8_t* in, float* acc) {
  withQuantizerKind(h.codec, [&](auto kind) { quantizer::accumulateKind<decltype(kind)>(h, in, acc); });
}

}  // namespace ccl::codec::detail
