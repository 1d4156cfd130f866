// SPDX-License-Identifier: BSD-3-Clause
// The small head of a local loss (Laskin et al. 2020): a LayerNorm and a projection to the
// vocabulary (its own weights, not tied to wte), with the model's cross-entropy on the
// stage's targets. A pipeline stage trained by local updates gets its gradient from one of
// these instead of from the next stage. The head has its own AdamW with the model's
// settings and learning rate; checkpoints keep both (checkpoint.h), so that resuming a run
// with local updates is bit-identical.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "config.h"
#include "optimizer.h"

namespace gpt {

class LocalHead {
 public:
  LocalHead(const ModelConfig& c, uint64_t seed, const AdamWConfig& adamw);

  // The loss of `rows` rows x (rows x C) against their targets, summed and divided by
  // `allRows` (the micro-batch's rows, as headForward does); writes dx, the gradient of
  // lossScale times that loss, and accumulates the head's own gradients.
  double lossAndBackward(const float* x, int rows, int allRows, const int* targets, float lossScale, float* dx);

  void zeroGrads();
  float* grads() { return grads_.data(); }
  float* params() { return params_.data(); }  // lnw (C), lnb (C), W (V x C)
  size_t count() const { return params_.size(); }
  static size_t countFor(const ModelConfig& c) {
    return static_cast<size_t>(c.channels) * (2 + static_cast<size_t>(c.vocab));
  }
  AdamW& optimizer() { return opt_; }  // m and v of count() values each, steps
  void update(float lr);

 private:
  int C_, V_;
  std::vector<float> params_, grads_;
  AdamW opt_;
  std::vector<float> ln_, mean_, rstd_, logits_, probs_, losses_, dlogits_, dln_;
};

}  // namespace gpt
