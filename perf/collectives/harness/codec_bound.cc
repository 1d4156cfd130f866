#include "harness/codec_bound.h"

#include <algorithm>
#include <cmath>

namespace cclperf {
namespace {

// One round trip errs by at most rel*|v| + abs*m (m: absmax of the block holding v).
struct RoundTrip {
  double rel;
  double abs;
};

// The bounds listed in src/codecs/codec.h.
RoundTrip roundTrip(const CodecOptions& z) {
  const double stochastic = z.stochastic ? 2.0 : 1.0;  // "< s" instead of "<= s/2", twice the fp8 terms
  const double fp16_scale = z.scale_bits == 16 ? 1.0 + std::ldexp(1.0, -10) : 1.0;
  // Scales are computed in fp32: a relative slack far below any codec's own error.
  const double scale_math = 1.0 + std::ldexp(1.0, -20);
  switch (z.codec) {
    case cclCodecInt8:
      return {0.0, stochastic / (2.0 * 127.0) * fp16_scale * scale_math};
    case cclCodecInt4:
      return {0.0, stochastic / (2.0 * 7.0) * fp16_scale * scale_math};
    case cclCodecInt2:
      return {0.0, stochastic / 2.0 * fp16_scale * scale_math};
    case cclCodecFp8E4m3:
      return {stochastic * std::ldexp(1.0, -4), stochastic * std::ldexp(1.0, -10) / 448.0 * scale_math};
    case cclCodecFp8E5m2:
      return {stochastic * std::ldexp(1.0, -3), stochastic * std::ldexp(1.0, -17) / 57344.0 * scale_math};
    case cclCodecMxfp8E4m3:
      // X = 2^floor(log2 m) / 256 <= m / 256.
      return {stochastic / 7.0, stochastic * std::ldexp(1.0, -10) / 256.0};
    default:
      return {0.0, 0.0};
  }
}

bool isSparsifier(cclCodec_t c) { return c == cclCodecTopK || c == cclCodecRandK || c == cclCodecThreshold; }

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
  const double u = outputRounding(type);
  // fp32 sums of up to k partial results; generous next to the codecs' errors.
  const double sum_slack = double(shape.quantisations + 2) * std::ldexp(1.0, -22);
  if (isSparsifier(codec.codec)) {
    per_p_ = 1.0 + u;
    per_s_ = sum_slack;
    return;
  }
  const RoundTrip q = roundTrip(codec);
  const int feedback = codec.feedback == cclFeedbackNone ? 0 : shape.feedback_stages;
  const int steps = shape.quantisations + 2 * feedback;
  // e = a_p * p + a_s * S for an element, E = c * S for the largest one.
  double a_p = 0, a_s = 0, c = 0;
  for (int k = 0; k < steps; ++k) {
    a_p += q.rel * (1.0 + a_p);
    a_s += q.rel * a_s + q.abs * (1.0 + c);
    c += (q.rel + q.abs) * (1.0 + c);
  }
  // LoCo keeps the carried error in 8 bits: at most 1/127 of it more.
  const double loco = codec.feedback == cclFeedbackLoco ? 1.0 + 1.0 / 127.0 : 1.0;
  per_p_ = loco * a_p + u * (1.0 + a_p);
  per_s_ = loco * a_s + u * a_s + sum_slack * (1.0 + c);
}

double ElementBound::operator()(double p, double s) const {
  if (exact_) return 0.0;
  return per_p_ * p + per_s_ * s;
}

void AccuracyTally::add(const AccuracyTally& other) {
  wrong += other.wrong;
  max_err = std::max(max_err, other.max_err);
  sum_sq += other.sum_sq;
  max_exact = std::max(max_exact, other.max_exact);
  count += other.count;
}

AccuracyTally tallyAgainstBound(const TypedBuffer& got, const TypedBuffer& exact, const ElementBound& bound) {
  AccuracyTally t;
  for (size_t i = 0; i < exact.count; ++i) t.max_exact = std::max(t.max_exact, std::fabs(loadElement(exact, i)));
  for (size_t i = 0; i < exact.count; ++i) {
    const double want = loadElement(exact, i);
    const double err = std::fabs(loadElement(got, i) - want);
    // A NaN error fails every comparison: it is counted wrong and poisons max_err.
    if (!(err <= bound(std::fabs(want), t.max_exact))) ++t.wrong;
    t.max_err = std::isnan(err) || err > t.max_err ? err : t.max_err;
    t.sum_sq += err * err;
  }
  t.count = double(exact.count);
  return t;
}

}  // namespace cclperf
