#include "codecs/error_feedback.h"

#include <algorithm>
#include <string>

#include "codecs/math/quant_int.h"
#include "common/error.h"

namespace ccl::codec {

namespace {
void checkCount(size_t have, size_t n) {
  if (have != n)
    throw Error(cclInvalidArgument,
                "error feedback state holds " + std::to_string(have) + " elements, call has " + std::to_string(n));
}
}  // namespace

size_t ResidualFeedback::encode(const Params& p, const void* x, cclDataType_t type, size_t n, void* out,
                                size_t outBytes) {
  checkCount(e_.size(), n);
  return codec::encode(p, x, type, n, out, outBytes, e_.data());
}

void ResidualFeedback::reset() { std::fill(e_.begin(), e_.end(), 0.0f); }

LocoFeedback::LocoFeedback(size_t n, LocoOptions options)
    : n_(n), opt_(options), q_(n, 0), scales_((n + kStorageBlock - 1) / kStorageBlock, 0.0f), work_(n, 0.0f) {
  if (!(opt_.beta >= 0.0f && opt_.beta < 1.0f)) throw Error(cclInvalidArgument, "LoCo beta must be in [0, 1)");
}

void LocoFeedback::error(float* e) const {
  for (size_t i = 0; i < n_; ++i) e[i] = math::dequantInt(q_[i], scales_[i / kStorageBlock]);
}

void LocoFeedback::store(const float* e) {
  for (size_t b = 0; b < scales_.size(); ++b) {
    const size_t off = b * kStorageBlock;
    const size_t len = std::min<size_t>(kStorageBlock, n_ - off);
    float m = 0.0f;
    for (size_t i = 0; i < len; ++i) m = math::absMaxStep(m, e[off + i]);
    // An error too small (or not finite) for an int8 scale is dropped: it cannot be stored.
    const float s = m / 127.0f;
    const bool usable = s >= math::kMinScale && math::isFiniteBits(m);
    const float inv = usable ? 1.0f / s : 0.0f;
    scales_[b] = usable ? s : 0.0f;
    for (size_t i = 0; i < len; ++i) q_[off + i] = static_cast<int8_t>(math::quantIntNearest(e[off + i] * inv, 127));
  }
}

size_t LocoFeedback::encode(const Params& p, const void* x, cclDataType_t type, size_t n, void* out, size_t outBytes) {
  checkCount(n_, n);
  if (opt_.resetInterval && steps_ > 0 && steps_ % opt_.resetInterval == 0) reset();
  error(work_.data());
  const size_t bytes = codec::encode(p, x, type, n, out, outBytes, work_.data());  // work_ = err
  const float keep = opt_.beta;
  for (size_t i = 0; i < n_; ++i)
    work_[i] = keep * math::dequantInt(q_[i], scales_[i / kStorageBlock]) + (1.0f - keep) * work_[i];
  store(work_.data());
  ++steps_;
  return bytes;
}

void LocoFeedback::reset() {
  std::fill(q_.begin(), q_.end(), 0);
  std::fill(scales_.begin(), scales_.end(), 0.0f);
}

}  // namespace ccl::codec
