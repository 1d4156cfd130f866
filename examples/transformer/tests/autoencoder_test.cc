// SPDX-License-Identifier: BSD-3-Clause
// Bian et al.'s learned autoencoder: summing the ranks' codes is encoding the sum of their
// partial outputs, and its backward is the gradient of that path (finite differences of
// <decode(sum of codes), G> in E, D and each partial).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "autoencoder.h"
#include "local_head.h"
#include "rng.h"

namespace gpt {
namespace {

ModelConfig config() {
  ModelConfig c;
  c.layers = 2;
  c.channels = 12;
  c.heads = 2;
  c.maxSeq = 8;
  return c;
}

std::vector<float> random(size_t n, uint64_t seed) {
  Rng r(seed);
  std::vector<float> v(n);
  for (float& x : v) x = r.normal();
  return v;
}

// Two ranks' autoencoders (the same parameters), their partials y0 and y1 (rows x C): the
// group's output and <output, G>.
struct Pair {
  Autoencoder a{config(), 5, 0, 2, 3, AdamWConfig{}}, b{config(), 5, 0, 2, 3, AdamWConfig{}};
  std::vector<float> y0, y1, out;
  size_t rows = 7;
  double forward(const std::vector<float>& g) {
    float* c0 = a.encode(0, 1, BlockHalf::kMlp, y0.data(), rows);
    float* c1 = b.encode(0, 1, BlockHalf::kMlp, y1.data(), rows);
    for (size_t i = 0; i < rows * 5; ++i) c0[i] = c1[i] = c0[i] + c1[i];  // the group's sum
    out.assign(rows * 12, 0.0f);
    std::vector<float> other(out.size());
    a.decode(0, 1, BlockHalf::kMlp, out.data(), rows);
    b.decode(0, 1, BlockHalf::kMlp, other.data(), rows);
    EXPECT_EQ(out, other) << "every rank decodes the same";
    double l = 0;
    for (size_t i = 0; i < out.size(); ++i) l += static_cast<double>(out[i]) * g[i];
    return l;
  }
};

TEST(Autoencoder, SummingCodesIsEncodingTheSum) {
  Pair p;
  p.y0 = random(p.rows * 12, 1);
  p.y1 = random(p.rows * 12, 2);
  const std::vector<float> g = random(p.rows * 12, 3);
  p.forward(g);
  const std::vector<float> separately = p.out;
  std::vector<float> sum(p.y0.size());
  for (size_t i = 0; i < sum.size(); ++i) sum[i] = p.y0[i] + p.y1[i];
  float* codes = p.a.encode(1, 1, BlockHalf::kMlp, sum.data(), p.rows);
  (void)codes;
  std::vector<float> once(sum.size());
  p.a.decode(1, 1, BlockHalf::kMlp, once.data(), p.rows);
  for (size_t i = 0; i < once.size(); ++i) EXPECT_NEAR(separately[i], once[i], 1e-5f);
}

TEST(Autoencoder, BackwardIsTheGradientOfThePath) {
  Pair p;
  p.y0 = random(p.rows * 12, 4);
  p.y1 = random(p.rows * 12, 5);
  const std::vector<float> g = random(p.rows * 12, 6);
  p.forward(g);
  p.a.zeroGrads();
  p.b.zeroGrads();
  const float* d0 = p.a.backward(0, 1, BlockHalf::kMlp, g.data(), p.rows);
  const std::vector<float> dy0(d0, d0 + p.rows * 12);
  p.b.backward(0, 1, BlockHalf::kMlp, g.data(), p.rows);
  // The loss is bilinear in (E, D) and linear in each partial: central differences are exact
  // up to fp32 rounding.
  const float h = 1e-2f;
  auto fd = [&](auto perturb) {
    perturb(h);
    const double up = p.forward(g);
    perturb(-2 * h);
    const double down = p.forward(g);
    perturb(h);
    return (up - down) / (2 * h);
  };
  for (size_t i : {size_t{0}, size_t{13}, size_t{40}}) {
    EXPECT_NEAR(dy0[i], fd([&](float d) { p.y0[i] += d; }), 2e-3) << "partial " << i;
  }
  // Block 1, MLP half: index (1 - 0) * 2 + 1 = 3 of each kind; both ranks hold the same E, D.
  const size_t matrix = 5 * 12, encoders = 4 * matrix;
  for (size_t i : {size_t{0}, size_t{7}, size_t{59}}) {
    const size_t e = 3 * matrix + i, d = encoders + 3 * matrix + i;
    const double dE = p.a.grads()[e] + p.b.grads()[e];  // summed over the group
    EXPECT_NEAR(dE, fd([&](float x) { p.a.params()[e] += x, p.b.params()[e] += x; }), 2e-3) << "E " << i;
    EXPECT_NEAR(p.a.grads()[d], p.b.grads()[d], 1e-6) << "dD is the same on every rank";
    EXPECT_NEAR(p.a.grads()[d], fd([&](float x) { p.a.params()[d] += x, p.b.params()[d] += x; }), 2e-3) << "D " << i;
  }
}

// A local head's backward is the gradient of its loss (float central differences, in the
// input and in its projection).
TEST(LocalHead, BackwardIsTheGradientOfTheLoss) {
  const ModelConfig c = config();
  LocalHead head(c, 9, AdamWConfig{});
  const int rows = 5, allRows = 8;
  std::vector<float> x = random(static_cast<size_t>(rows) * 12, 10), dx(x.size());
  std::vector<int> targets = {3, 250, 17, 0, 99};
  head.zeroGrads();
  const double loss = head.lossAndBackward(x.data(), rows, allRows, targets.data(), 1.0f, dx.data());
  EXPECT_GT(loss, 0.0);
  const std::vector<float> dw(head.grads(), head.grads() + head.count());
  std::vector<float> scratch(x.size());
  auto lossAt = [&] {
    LocalHead copy = head;
    return copy.lossAndBackward(x.data(), rows, allRows, targets.data(), 1.0f, scratch.data());
  };
  const float h = 1e-2f;
  for (size_t i : {size_t{0}, size_t{7}, size_t{31}}) {
    x[i] += h;
    const double up = lossAt();
    x[i] -= 2 * h;
    const double down = lossAt();
    x[i] += h;
    EXPECT_NEAR(dx[i], (up - down) / (2 * h), 2e-3) << "input " << i;
  }
  for (size_t i : {size_t{0}, size_t{30}, size_t{24 + 12 * 3 + 4}}) {
    head.params()[i] += h;
    const double up = lossAt();
    head.params()[i] -= 2 * h;
    const double down = lossAt();
    head.params()[i] += h;
    EXPECT_NEAR(dw[i], (up - down) / (2 * h), 2e-3) << "parameter " << i;
  }
}

TEST(Autoencoder, BadWidthIsAClearError) {
  EXPECT_THROW(Autoencoder(config(), 0, 0, 2, 1, AdamWConfig{}), std::invalid_argument);
  EXPECT_THROW(Autoencoder(config(), 13, 0, 2, 1, AdamWConfig{}), std::invalid_argument);
}

}  // namespace
}  // namespace gpt
