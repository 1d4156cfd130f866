// SPDX-License-Identifier: BSD-3-Clause
#include "optimizer.h"

#include <algorithm>
#include <cmath>

namespace gpt {

AdamW makeAdamW(const AdamWConfig& cfg, const std::vector<TensorInfo>& layout, size_t begin, size_t end) {
  AdamW o;
  o.cfg = cfg;
  o.begin = begin;
  o.end = end;
  o.m.assign(end - begin, 0.0f);
  o.v.assign(end - begin, 0.0f);
  o.decay.assign(end - begin, 0);
  for (const TensorInfo& t : layout) {
    if (!t.decay) continue;
    const size_t lo = std::max(begin, t.offset), hi = std::min(end, t.offset + t.size());
    for (size_t i = lo; i < hi; ++i) o.decay[i - begin] = 1;
  }
  return o;
}

void adamwStep(AdamW& o, float* params, const float* grads, float lr, float gradScale) {
  ++o.steps;
  const float b1 = o.cfg.beta1, b2 = o.cfg.beta2;
  const float c1 = 1.0f - std::pow(b1, static_cast<float>(o.steps));
  const float c2 = 1.0f - std::pow(b2, static_cast<float>(o.steps));
  const size_t n = o.end - o.begin;
  float* p = params + o.begin;
  const float* g = grads + o.begin;
#pragma omp parallel for
  for (size_t i = 0; i < n; ++i) {
    const float gi = g[i] * gradScale;
    const float m = b1 * o.m[i] + (1.0f - b1) * gi;
    const float v = b2 * o.v[i] + (1.0f - b2) * gi * gi;
    o.m[i] = m;
    o.v[i] = v;
    const float update = (m / c1) / (std::sqrt(v / c2) + o.cfg.eps);
    p[i] -= lr * (update + (o.decay[i] ? o.cfg.weightDecay * p[i] : 0.0f));
  }
}

float learningRate(const Schedule& s, int step, int totalSteps) {
  if (step < s.warmup) return s.lr * static_cast<float>(step + 1) / static_cast<float>(s.warmup);
  const int span = std::max(1, totalSteps - s.warmup - 1);
  const float progress = std::min(1.0f, static_cast<float>(step - s.warmup) / static_cast<float>(span));
  const float minLr = s.lr * s.minLrRatio;
  return minLr + 0.5f * (s.lr - minLr) * (1.0f + std::cos(3.14159265358979f * progress));
}

float clipScale(double norm, float maxNorm) {
  if (maxNorm <= 0.0f || !(norm > maxNorm)) return 1.0f;
  return static_cast<float>(maxNorm / norm);
}

}  // namespace gpt
