// SPDX-License-Identifier: BSD-3-Clause
#include "harness/codec_bound.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/parallel.h"

namespace cclperf {
namespace {

// Unit roundoff of the result type: a bf16/fp16 result is rounded once more at the end.
double outputRounding(cclDataType_t type) {
  switch (type) {
    case cclBfloat16:
      return std::ldexp(1.0, -8);
    case cclFloat16:
      return std::ldexp(1.0, -11);
    default:
      return std::ldexp(1.0, -24);
  }
}

}  // namespace

ElementBound::ElementBound(const CodecOptions& codec, cclDataType_t type, bool compressible,
                           const CompressionShape& shape) {
  if (!codec.active() || !compressible) return;
  exact_ = false;
  compression_ = compressionFrom(codec);
  outRounding_ = outputRounding(type);
  // fp32 sums of up to k partial results; generous next to the codecs' errors.
  sumSlack_ = double(shape.quantizations + 2) * std::ldexp(1.0, -22);
  const int feedback = codec.feedback == cclFeedbackNone ? 0 : shape.feedbackStages;
  roundTrips_ = shape.quantizations + 2 * feedback;
  // LoCo keeps the carried error in 8 bits: at most 1/127 of it more.
  loco_ = codec.feedback == cclFeedbackLoco ? 1.0 + 1.0 / 127.0 : 1.0;
}

double ElementBound::codecBound(double p, double s) const {
  double b = 0;
  const cclResult_t r = cclCodecErrorBound(&compression_, p, s, roundTrips_, &b);
  if (r != cclSuccess) throw std::runtime_error(std::string("cclCodecErrorBound: ") + cclGetLastError(nullptr));
  return b;
}

double ElementBound::operator()(double p, double s) const {
  if (exact_) return 0.0;
  // For one s the codec's bound is affine in p (each round trip adds rel * (p + e) and a
  // term of s alone), so two calls per s give every element's bound.
  if (s != cachedS_) {
    cachedS_ = s;
    atZero_ = codecBound(0.0, s);
    atS_ = codecBound(s, s);
  }
  // No element-wise bound (powersgd's is +inf): +inf, not the NaN of inf - inf below.
  if (!std::isfinite(atZero_) || !std::isfinite(atS_)) return std::numeric_limits<double>::infinity();
  const double e = s > 0 ? atZero_ + (atS_ - atZero_) * (p / s) : atZero_;
  return loco_ * e + outRounding_ * (p + e) + sumSlack_ * (s + atS_);
}

bool hasElementBound(const CodecOptions& codec) {
  if (!codec.active()) return true;
  const cclCompression_t c = compressionFrom(codec);
  double b = 0;
  return cclCodecErrorBound(&c, 1.0, 1.0, 1, &b) != cclSuccess || std::isfinite(b);
}

void AccuracyTally::add(const AccuracyTally& other) {
  wrong += other.wrong;
  maxErr = std::max(maxErr, other.maxErr);
  sumSq += other.sumSq;
  maxExact = std::max(maxExact, other.maxExact);
  count += other.count;
}

AccuracyTally tallyAgainstBound(const TypedBuffer& got, const TypedBuffer& exact, const ElementBound& bound) {
  // Over the host's cores: the largest exact value first (the bound takes it), then a tally
  // per part, combined in part order.
  const size_t parts = partsFor(exact.count);
  std::vector<AccuracyTally> tallies(parts);
  parallelParts(exact.count, parts, [&](size_t p, size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i)
      tallies[p].maxExact = std::max(tallies[p].maxExact, std::fabs(loadElement(exact, i)));
  });
  double maxExact = 0;
  for (const AccuracyTally& t : tallies) maxExact = std::max(maxExact, t.maxExact);
  parallelParts(exact.count, parts, [&](size_t p, size_t begin, size_t end) {
    AccuracyTally& t = tallies[p];
    t.maxExact = maxExact;
    const ElementBound partBound = bound;  // its own: the bound caches per call
    for (size_t i = begin; i < end; ++i) {
      const double want = loadElement(exact, i);
      const double err = std::fabs(loadElement(got, i) - want);
      // A NaN error fails every comparison: it is counted wrong and poisons maxErr. A
      // non-finite one is wrong even under an infinite bound (a codec without an
      // element-wise bound, where only finiteness is checked).
      if (!(err <= partBound(std::fabs(want), maxExact)) || !std::isfinite(err)) ++t.wrong;
      t.maxErr = std::isnan(err) || err > t.maxErr ? err : t.maxErr;
      t.sumSq += err * err;
    }
  });
  AccuracyTally all;
  for (const AccuracyTally& t : tallies) {
    // add() keeps the larger maxErr, which a NaN would lose: a NaN part's stays NaN.
    const bool nan = std::isnan(t.maxErr) || std::isnan(all.maxErr);
    all.add(t);
    if (nan) all.maxErr = std::numeric_limits<double>::quiet_NaN();
  }
  all.count = double(exact.count);
  return all;
}

}  // namespace cclperf
