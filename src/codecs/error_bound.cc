// SPDX-License-Identifier: BSD-3-Clause
// The documented error bound of every codec, composed over the round trips an algorithm
// applies; the terms come from codec_table.h.
#include <algorithm>
#include <cmath>
#include <limits>

#include "codecs/codec.h"
#include "codecs/math/quant_fp4.h"
#include "codecs/math/quant_int.h"

namespace ccl::codec {

double scaleUnit(const Params& p, double absMax) {
  const CodecInfo c = codecInfo(p.codec);
  if (c.scale == ScaleFormat::kLinear) {
    const double s = absMax / c.scaleDivisor;
    // fp16 scales are rounded up to the next fp16 value: at most one part in 2^10 more.
    if (p.fp16Scales) return s * (1.0 + 0x1p-10);
    // A fixed-length stream quantizes a block whose scale would underflow with the smallest.
    return p.fixedLength ? std::max(s, double{math::kMinScale}) : s;
  }
  if (c.scale == ScaleFormat::kE8m0) {
    constexpr double kSmallest = 0x1p-127;  // e8m0's smallest scale
    if (!(absMax > 0.0)) return kSmallest;
    return std::max(std::ldexp(1.0, std::ilogb(absMax) - std::ilogb(double{c.scaleDivisor})), kSmallest);
  }
  if (c.scale == ScaleFormat::kE4m3Tensor) {
    // codec_table.h: 17/16 of the block's ideal scale, plus 25 of e4m3's half-steps of the
    // tensor scale t (absMax bounds the whole stream's largest |x|, hence t's).
    const double t = std::max(absMax / (448.0 * c.scaleDivisor), double{math::kNvfp4MinTensorScale});
    return 17.0 / 16.0 * absMax / c.scaleDivisor + 25.0 * 0x1p-10 * t;
  }
  return 0.0;
}

double errorBound(const Params& p, double absValue, double absMax, int quantizations) {
  const CodecInfo c = codecInfo(p.codec);
  if (c.family == Family::kNone || quantizations == 0) return 0.0;
  if (c.family == Family::kLowRank) return std::numeric_limits<double>::infinity();
  // Every contribution arrives exactly (or fp16-rounded) or not at all.
  if (c.family == Family::kSparsifier) return absValue;
  const RoundTripBound t = p.stochastic ? c.stochastic : c.nearest;
  const double rel = t.rel + kArithmeticSlack;
  const double abs = t.abs + kArithmeticSlack;
  // Round trip k quantizes a partial result of magnitude at most absValue + e (its exact
  // part is a sum of some of the |inputs|) in a block whose absmax is at most absMax + E.
  // Once both stop changing (a fixed point, or past overflow to +inf) more round trips add
  // nothing: any count, up to INT_MAX, returns after at most a few hundred thousand steps.
  double e = 0.0, E = 0.0;
  for (int k = 0; k < quantizations; ++k) {
    const double u = scaleUnit(p, absMax + E);
    const double e1 = e + rel * (absValue + e) + abs * u;
    const double E1 = E + rel * (absMax + E) + abs * u;
    if (e1 == e && E1 == E) break;
    e = e1, E = E1;
  }
  return e;
}

}  // namespace ccl::codec
