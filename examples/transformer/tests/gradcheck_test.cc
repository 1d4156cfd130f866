// SPDX-License-Identifier: BSD-3-Clause
// Every op's backward, and the whole model's, against central finite differences, run in
// double precision through the same templates the trainer runs in float. An op's output is
// reduced to the scalar sum(out * R) with a fixed random R, so dout = R.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "model.h"
#include "ops.h"
#include "rng.h"

namespace gpt {
namespace {

using Vec = std::vector<double>;

Vec randomVec(size_t n, uint64_t seed, double scale = 1.0) {
  Rng r(seed);
  Vec v(n);
  for (double& x : v) x = scale * r.normal();
  return v;
}

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Compares analytic[i] with (f(x + eps e_i) - f(x - eps e_i)) / 2 eps for every i of x.
// |difference| <= tol * max(1, |numeric|).
void expectGradient(const char* what, Vec& x, const Vec& analytic, const std::function<double()>& f, double tol = 1e-6,
                    double eps = 1e-5) {
  ASSERT_EQ(x.size(), analytic.size());
  size_t bad = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i];
    x[i] = keep + eps;
    const double up = f();
    x[i] = keep - eps;
    const double down = f();
    x[i] = keep;
    const double numeric = (up - down) / (2 * eps);
    if (std::fabs(numeric - analytic[i]) > tol * std::max(1.0, std::fabs(numeric))) {
      if (bad++ < 5)
        ADD_FAILURE() << what << "[" << i << "]: analytic " << analytic[i] << ", finite differences " << numeric;
    }
  }
  EXPECT_EQ(bad, 0u) << what;
}

TEST(GradCheck, LayerNorm) {
  const int rows = 3, C = 7;
  Vec x = randomVec(rows * C, 1), w = randomVec(C, 2), b = randomVec(C, 3), R = randomVec(rows * C, 4);
  Vec out(rows * C), mean(rows), rstd(rows);
  auto f = [&] {
    ops::layerNormForward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), rows, C);
    return dot(out, R);
  };
  f();
  Vec dx(rows * C, 0.0), dw(C, 0.0), db(C, 0.0);
  ops::layerNormBackward(dx.data(), dw.data(), db.data(), R.data(), x.data(), w.data(), mean.data(), rstd.data(), rows,
                         C);
  expectGradient("layernorm dx", x, dx, f);
  expectGradient("layernorm dw", w, dw, f);
  expectGradient("layernorm db", b, db, f);
}

TEST(GradCheck, Matmul) {
  const int rows = 4, C = 5, OC = 6;
  Vec x = randomVec(rows * C, 5), W = randomVec(OC * C, 6), bias = randomVec(OC, 7), R = randomVec(rows * OC, 8);
  Vec out(rows * OC);
  auto f = [&] {
    ops::matmulForward(out.data(), x.data(), W.data(), bias.data(), rows, C, OC);
    return dot(out, R);
  };
  Vec dx(rows * C, 0.0), dW(OC * C, 0.0), db(OC, 0.0);
  ops::matmulBackward(dx.data(), dW.data(), db.data(), R.data(), x.data(), W.data(), rows, C, OC);
  expectGradient("matmul dx", x, dx, f);
  expectGradient("matmul dW", W, dW, f);
  expectGradient("matmul dbias", bias, db, f);
}

TEST(GradCheck, CausalAttention) {
  const int B = 2, T = 5, C = 6, NH = 2;
  Vec qkv = randomVec(B * T * 3 * C, 9), R = randomVec(B * T * C, 10);
  Vec out(B * T * C), att(B * NH * T * T);
  auto f = [&] {
    ops::attentionForward(out.data(), att.data(), qkv.data(), B, T, C, NH);
    return dot(out, R);
  };
  f();
  Vec dqkv(qkv.size(), 0.0), scratch(att.size());
  ops::attentionBackward(dqkv.data(), scratch.data(), R.data(), qkv.data(), att.data(), B, T, C, NH);
  expectGradient("attention dqkv", qkv, dqkv, f);
  // Causality: the output at position t does not depend on later positions.
  for (int t = 0; t < T; ++t)
    for (int j = t + 1; j < T; ++j) ASSERT_EQ(att[static_cast<size_t>(t) * T + j], 0.0);
}

// Token slices (TeraPipe): queries of one slice after another, each attending to the keys
// and values already computed, give the whole sequence's output; the backward in reverse
// slice order, adding the keys' and values' gradients, gives its gradient. Slices longer and
// shorter than the 64-row attention blocks.
TEST(GradCheck, SlicedAttentionIsTheWholeSequences) {
  const int B = 2, T = 150, C = 8, NH = 2;
  Vec qkv = randomVec(B * T * 3 * C, 11), R = randomVec(B * T * C, 12);
  Vec out(B * T * C), att(B * NH * T * T), sliced(out.size()), slicedAtt(att.size());
  ops::attentionForward(out.data(), att.data(), qkv.data(), B, T, C, NH);
  const int cuts[] = {0, 3, 70, 71, 140, T};
  for (int i = 0; i + 1 < 6; ++i)
    ops::attentionForward(sliced.data(), slicedAtt.data(), qkv.data(), B, T, C, NH, cuts[i], cuts[i + 1]);
  for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(sliced[i], out[i], 1e-12) << i;
  Vec dqkv(qkv.size(), 0.0), scratch(att.size()), slicedGrad(qkv.size(), 0.0);
  ops::attentionBackward(dqkv.data(), scratch.data(), R.data(), qkv.data(), att.data(), B, T, C, NH);
  for (int i = 4; i >= 0; --i)
    ops::attentionBackward(slicedGrad.data(), scratch.data(), R.data(), qkv.data(), slicedAtt.data(), B, T, C, NH,
                           cuts[i], cuts[i + 1]);
  for (size_t i = 0; i < dqkv.size(); ++i) ASSERT_NEAR(slicedGrad[i], dqkv[i], 1e-12) << i;
}

TEST(GradCheck, Gelu) {
  Vec x = randomVec(50, 11, 2.0), R = randomVec(50, 12), out(50);
  auto f = [&] {
    ops::geluForward(out.data(), x.data(), x.size());
    return dot(out, R);
  };
  Vec dx(50, 0.0);
  ops::geluBackward(dx.data(), x.data(), R.data(), x.size());
  expectGradient("gelu", x, dx, f);
}

TEST(GradCheck, SoftmaxCrossEntropy) {
  const int rows = 3, V = 11;
  Vec logits = randomVec(rows * V, 13), probs(rows * V), losses(rows);
  const int targets[rows] = {0, 10, 4};
  auto f = [&] {
    ops::softmaxCrossEntropyForward(losses.data(), probs.data(), logits.data(), targets, rows, V);
    return 0.7 * (losses[0] + losses[1] + losses[2]);
  };
  f();
  Vec dlogits(rows * V);
  ops::softmaxCrossEntropyBackward(dlogits.data(), probs.data(), targets, 0.7, rows, V);
  expectGradient("cross-entropy dlogits", logits, dlogits, f);
}

TEST(GradCheck, Encoder) {
  const int B = 2, T = 3, C = 4, V = 5;
  Vec wte = randomVec(V * C, 14), wpe = randomVec(T * C, 15), R = randomVec(B * T * C, 16), out(B * T * C);
  const int tokens[B * T] = {1, 4, 1, 0, 2, 4};
  auto f = [&] {
    ops::encoderForward(out.data(), tokens, wte.data(), wpe.data(), 0, B * T, T, C);
    return dot(out, R);
  };
  Vec dwte(wte.size(), 0.0), dwpe(wpe.size(), 0.0);
  ops::encoderBackward(dwte.data(), dwpe.data(), R.data(), tokens, 0, B * T, T, C);
  expectGradient("encoder dwte", wte, dwte, f);
  expectGradient("encoder dwpe", wpe, dwpe, f);
}

// The whole model in double: every parameter's gradient of the mean loss.
TEST(GradCheck, WholeModel) {
  ModelConfig c;
  c.layers = 2;
  c.channels = 8;
  c.heads = 2;
  c.maxSeq = 6;
  const int B = 2, T = 5;
  Model<float> init = makeModel<float>(c, 42);
  Model<double> m = makeModel<double>(c, 0);
  for (size_t i = 0; i < m.params.size(); ++i) m.params[i] = init.params[i] + 0.05 * std::sin(double(i));
  std::vector<int> tokens(B * T), targets(B * T);
  Rng r(7);
  for (int i = 0; i < B * T; ++i)
    tokens[i] = static_cast<int>(r.next() % 256), targets[i] = static_cast<int>(r.next() % 256);
  auto f = [&] { return forward(m, tokens.data(), targets.data(), B, T); };
  f();
  zeroGrads(m);
  backward(m, tokens.data(), targets.data(), 1.0);
  // Every parameter except the rows of wte no token or target touches... which still get a
  // gradient through the tied head: all of them are checked.
  expectGradient("model parameters", m.params, m.grads, f, 1e-5);
}

}  // namespace
}  // namespace gpt
