// SPDX-License-Identifier: BSD-3-Clause
// The learning-rate schedule, clipping and one AdamW update, against their definitions.
#include "optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace gpt {
namespace {

TEST(Schedule, WarmupThenCosineToTheMinimumAtTheLastStep) {
  Schedule s;
  s.lr = 1e-3f;
  s.minLrRatio = 0.1f;
  s.warmup = 10;
  const int steps = 110;
  EXPECT_FLOAT_EQ(learningRate(s, 0, steps), 1e-4f);
  EXPECT_FLOAT_EQ(learningRate(s, 9, steps), 1e-3f);
  EXPECT_FLOAT_EQ(learningRate(s, 10, steps), 1e-3f) << "the peak right after warm-up";
  EXPECT_NEAR(learningRate(s, 10 + 99 / 2, steps), 0.55e-3f, 1e-5f) << "half way down the cosine";
  EXPECT_FLOAT_EQ(learningRate(s, steps - 1, steps), 1e-4f) << "the minimum at the last step";
  for (int i = 11; i < steps; ++i) EXPECT_LE(learningRate(s, i, steps), learningRate(s, i - 1, steps));
  s.warmup = 0;
  EXPECT_FLOAT_EQ(learningRate(s, 0, 1), 1e-3f);
}

TEST(Clip, ScalesDownOnlyAboveTheLimit) {
  EXPECT_FLOAT_EQ(clipScale(2.0, 1.0f), 0.5f);
  EXPECT_FLOAT_EQ(clipScale(0.5, 1.0f), 1.0f);
  EXPECT_FLOAT_EQ(clipScale(5.0, 0.0f), 1.0f) << "0: no clipping";
}

TEST(AdamW, FirstStepMovesEachParameterByTheLearningRate) {
  // Two tensors: a 2x2 weight (decayed) and a bias of 2 (not).
  std::vector<TensorInfo> layout = {{"w", 0, 2, 2, 0, true}, {"b", 0, 1, 2, 4, false}};
  AdamWConfig cfg;
  cfg.weightDecay = 0.5f;
  AdamW o = makeAdamW(cfg, layout, 0, 6);
  std::vector<float> p = {1, -1, 2, 0.5f, 3, -3};
  const std::vector<float> g = {0.2f, -0.4f, 1e-3f, -2, 0.7f, -0.1f};
  const std::vector<float> before = p;
  const float lr = 0.01f;
  adamwStep(o, p.data(), g.data(), lr, 1.0f);
  // Bias-corrected first step: m/c1 = g, v/c2 = g^2, so the update is g / (|g| + eps).
  for (size_t i = 0; i < p.size(); ++i) {
    const float step = g[i] / (std::fabs(g[i]) + cfg.eps) + (i < 4 ? cfg.weightDecay * before[i] : 0.0f);
    EXPECT_NEAR(p[i], before[i] - lr * step, 1e-6f) << i;
  }
  EXPECT_EQ(o.steps, 1u);
  // A shard: only its range moves.
  AdamW shard = makeAdamW(cfg, layout, 2, 5);
  std::vector<float> q = before;
  adamwStep(shard, q.data(), g.data(), lr, 1.0f);
  for (size_t i : {0u, 1u, 5u}) EXPECT_EQ(q[i], before[i]);
  for (size_t i : {2u, 3u, 4u}) EXPECT_NEAR(q[i], p[i], 1e-7f) << i;
}

}  // namespace
}  // namespace gpt
