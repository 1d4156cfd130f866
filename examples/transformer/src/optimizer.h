// SPDX-License-Identifier: BSD-3-Clause
// AdamW with bias correction over one contiguous range of the flat parameter buffer (the
// whole buffer, or a rank's ZeRO-1 shard), weight decay on 2-D weights only; the learning
// rate schedule (linear warm-up, cosine decay) and global gradient-norm clipping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "params.h"

namespace gpt {

struct AdamWConfig {
  float lr = 3e-4f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weightDecay = 0.1f;
};

struct AdamW {
  AdamWConfig cfg;
  size_t begin = 0, end = 0;   // the range of the flat buffer this optimiser owns
  std::vector<float> m, v;     // moments of [begin, end)
  std::vector<uint8_t> decay;  // per element of the range: a 2-D weight
  uint64_t steps = 0;          // updates made (bias correction)
};

// An optimiser for [begin, end) of a model laid out by `layout` (ranges past the last
// tensor, ZeRO padding, are never decayed).
AdamW makeAdamW(const AdamWConfig& cfg, const std::vector<TensorInfo>& layout, size_t begin, size_t end);

// One update of params[begin, end) from grads[begin, end) (both indexed from the buffer's
// start) with learning rate lr; grads are multiplied by gradScale first (clipping).
void adamwStep(AdamW& opt, float* params, const float* grads, float lr, float gradScale);

struct Schedule {
  float lr = 3e-4f;
  float minLrRatio = 0.1f;  // cosine decays to lr * minLrRatio at the last step
  int warmup = 0;
};
// The learning rate of `step` (0-based) of a run of `totalSteps`.
float learningRate(const Schedule& s, int step, int totalSteps);

// The factor that brings a gradient of norm `norm` down to `maxNorm` (1 when it is below,
// or when maxNorm <= 0: no clipping).
float clipScale(double norm, float maxNorm);

}  // namespace gpt
