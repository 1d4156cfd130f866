// SPDX-License-Identifier: BSD-3-Clause
#include "local_head.h"

#include <algorithm>

#include "ops.h"
#include "params.h"
#include "rng.h"

namespace gpt {

LocalHead::LocalHead(const ModelConfig& c, uint64_t seed, const AdamWConfig& adamw) : C_(c.channels), V_(c.vocab) {
  const size_t C = static_cast<size_t>(C_), V = static_cast<size_t>(V_);
  params_.assign(2 * C + V * C, 0.0f);
  grads_.assign(params_.size(), 0.0f);
  std::fill(params_.begin(), params_.begin() + static_cast<std::ptrdiff_t>(C), 1.0f);  // LayerNorm weight
  Rng rng(seed);
  for (size_t i = 2 * C; i < params_.size(); ++i) params_[i] = 0.02f * rng.normal();  // as GPT-2's wte
  const std::vector<TensorInfo> layout = {
      {"lnw", -1, 1, C, 0, false}, {"lnb", -1, 1, C, C, false}, {"w", -1, V, C, 2 * C, true}};
  opt_ = makeAdamW(adamw, layout, 0, params_.size());
}

double LocalHead::lossAndBackward(const float* x, int rows, int allRows, const int* targets, float lossScale,
                                  float* dx) {
  const size_t r = static_cast<size_t>(rows), C = static_cast<size_t>(C_), V = static_cast<size_t>(V_);
  ln_.resize(r * C), mean_.resize(r), rstd_.resize(r), logits_.resize(r * V), probs_.resize(r * V);
  losses_.resize(r), dlogits_.resize(r * V), dln_.resize(r * C);
  const float* lnw = params_.data();
  const float* lnb = lnw + C;
  const float* w = lnb + C;
  float* dlnw = grads_.data();
  float* dlnb = dlnw + C;
  float* dw = dlnb + C;
  ops::layerNormForward(ln_.data(), mean_.data(), rstd_.data(), x, lnw, lnb, rows, C_);
  ops::matmulForward(logits_.data(), ln_.data(), w, static_cast<const float*>(nullptr), rows, C_, V_);
  ops::softmaxCrossEntropyForward(losses_.data(), probs_.data(), logits_.data(), targets, rows, V_);
  double sum = 0;
  for (float l : losses_) sum += l;
  ops::softmaxCrossEntropyBackward(dlogits_.data(), probs_.data(), targets, lossScale / static_cast<float>(allRows),
                                   rows, V_);
  ops::matmulBackward(dln_.data(), dw, static_cast<float*>(nullptr), dlogits_.data(), ln_.data(), w, rows, C_, V_);
  std::fill(dx, dx + r * C, 0.0f);
  ops::layerNormBackward(dx, dlnw, dlnb, dln_.data(), x, lnw, mean_.data(), rstd_.data(), rows, C_);
  return sum / allRows;
}

void LocalHead::zeroGrads() { std::fill(grads_.begin(), grads_.end(), 0.0f); }

void LocalHead::update(float lr) { adamwStep(opt_, params_.data(), grads_.data(), lr, 1.0f); }

}  // namespace gpt
