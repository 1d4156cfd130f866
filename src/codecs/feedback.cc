// SPDX-License-Identifier: BSD-3-Clause
#include "codecs/feedback.h"

#include <algorithm>
#include <cmath>

#include "codecs/codec.h"
#include "common/log.h"

namespace ccl::codec {

float* FeedbackState::prepare(int op, size_t floats, size_t errorFloats, uint64_t generation) {
  errorFloats_ = std::min(errorFloats, floats);
  if (op != op_ || residual_.size() != floats || generation != generation_) {
    if (op_ >= 0 && generation == generation_)
      CCL_INFO("error feedback state reset: used for another operation or size");
    op_ = op;
    generation_ = generation;
    residual_.assign(floats, 0.0f);
    stored_.clear();
    storedBytes_ = 0;
    calls_ = 0;
  }
  if (kind_ == cclFeedbackLoco) {
    if (storedBytes_ == 0) {
      std::fill(residual_.begin(), residual_.end(), 0.0f);
    } else {
      Expect e;
      e.count = floats;
      decode(stored_.data(), storedBytes_, e, residual_.data(), cclFloat32);
    }
    previous_ = residual_;
  }
  return residual_.data();
}

double FeedbackState::errorNorm() const {
  if (kind_ == cclFeedbackNone || (kind_ == cclFeedbackLoco && storedBytes_ == 0)) return 0.0;
  double s = 0;
  for (size_t i = 0; i < std::min(errorFloats_, residual_.size()); ++i) s += double(residual_[i]) * residual_[i];
  return std::sqrt(s);
}

void FeedbackState::finish() {
  ++calls_;
  if (kind_ != cclFeedbackLoco) return;
  // residual_ now holds this call's error: e <- beta * e_prev + (1 - beta) * err.
  for (size_t i = 0; i < residual_.size(); ++i) residual_[i] = beta_ * previous_[i] + (1.0f - beta_) * residual_[i];
  if (resetPeriod_ > 0 && calls_ % static_cast<uint64_t>(resetPeriod_) == 0) {
    storedBytes_ = 0;
    return;
  }
  const Params p = defaultParams(cclCodecInt8);
  stored_.resize(maxEncodedBytes(p, residual_.size()));
  storedBytes_ = encode(p, residual_.data(), cclFloat32, residual_.size(), stored_.data(), stored_.size());
}

}  // namespace ccl::codec
