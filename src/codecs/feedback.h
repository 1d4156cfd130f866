// SPDX-License-Identifier: BSD-3-Clause
// Error-feedback state of one tensor, as the compressed collectives use it. An encode step
// with a residual (codec::encode's `residual`) adds the state to its input and leaves what
// the codec lost in it; this class keeps that state between calls:
//   residual  the plain error: e <- (x + e) - decode(encode(x + e));
//   LoCo      a moving average of the error, e <- beta * e_prev + (1 - beta) * err, kept
//             between calls as an int8 stream (per-block fp32 scales) and cleared every
//             resetPeriod calls (0: never).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ccl/ccl.h"

namespace ccl::codec {

class FeedbackState {
 public:
  // beta in [0, 1) and resetPeriod >= 0 (checked by the caller that takes them from a user).
  FeedbackState(cclFeedbackKind_t kind, float beta, int resetPeriod)
      : kind_(kind), beta_(beta), resetPeriod_(resetPeriod) {}

  cclFeedbackKind_t kind() const { return kind_; }

  // The fp32 residual (`floats` values) the next call of operation `op` reads and updates.
  // State kept for another operation or size, or under another `generation` (its owner's
  // word that it now serves another tensor), is cleared first. LoCo: the stored average.
  // The first `errorFloats` of them are the error (the rest, the low-rank codec's warm start).
  float* prepare(int op, size_t floats, size_t errorFloats, uint64_t generation = 0);
  // After the call: LoCo folds the call's error into its moving average and stores it.
  void finish();

  uint64_t calls() const { return calls_; }
  // ||the error the next call adds||, in fp64 (cclFeedbackErrorNorm).
  double errorNorm() const;
  // Bytes the state keeps between calls (LoCo: about one per element).
  size_t storedBytes() const { return kind_ == cclFeedbackLoco ? storedBytes_ : residual_.size() * sizeof(float); }

 private:
  cclFeedbackKind_t kind_;
  float beta_;
  int resetPeriod_;
  std::vector<float> residual_;
  std::vector<float> previous_;        // LoCo: the averaged error the call started from
  std::vector<unsigned char> stored_;  // LoCo: the averaged error as an int8 stream
  size_t storedBytes_ = 0;
  uint64_t calls_ = 0;
  int op_ = -1;
  uint64_t generation_ = 0;
  size_t errorFloats_ = 0;
};

}  // namespace ccl::codec
