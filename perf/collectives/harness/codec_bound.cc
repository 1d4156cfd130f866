#include "harness/codec_bound.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

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
  out_rounding_ = outputRounding(type);
  // fp32 sums of up to k partial results; generous next to the codecs' errors.
  sum_slack_ = double(shape.quantisations + 2) * std::ldexp(1.0, -22);
  const int feedback = codec.feedback == cclFeedbackNone ? 0 : shape.feedback_stages;
  round_trips_ = shape.quantisations + 2 * feedback;
  // LoCo keeps the carried error in 8 bits: at most 1/127 of it more.
  loco_ = codec.feedback == cclFeedbackLoco ? 1.0 + 1.0 / 127.0 : 1.0;
}

double ElementBound::codecBound(double p, double s) const {
  double b = 0;
  const cclResult_t r = cclCodecErrorBound(&compression_, p, s, round_trips_, &b);
  if (r != cclSuccess) throw std::runtime_error(std::string("cclCodecErrorBound: ") + cclGetLastError(nullptr));
  return b;
}

double ElementBound::operator()(double p, double s) const {
  if (exact_) return 0.0;
  // For one s the codec's bound is affine in p (each round trip adds rel * (p + e) and a
  // term of s alone), so two calls per s give every element's bound.
  if (s != cached_s_) {
    cached_s_ = s;
    at_zero_ = codecBound(0.0, s);
    at_s_ = codecBound(s, s);
  }
  const double e = s > 0 ? at_zero_ + (at_s_ - at_zero_) * (p / s) : at_zero_;
  return loco_ * e + out_rounding_ * (p + e) + sum_slack_ * (s + at_s_);
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
