// SPDX-License-Identifier: BSD-3-Clause
#include "model.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "ops.h"

namespace gpt {

const char* opKindName(OpKind k) {
  static const char* names[] = {"encoder", "layernorm", "matmul", "attention", "gelu", "residual", "softmax+loss"};
  return names[static_cast<size_t>(k)];
}

namespace {

// Adds the time of one op call to its kind's total.
template <class T>
class OpTimer {
 public:
  OpTimer(Model<T>& m, OpKind k) : slot_(m.opSeconds[static_cast<size_t>(k)]), t0_(std::chrono::steady_clock::now()) {}
  ~OpTimer() { slot_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;

 private:
  double& slot_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace

std::string configProblem(const ModelConfig& c) {
  if (c.vocab <= 0) return "the vocabulary must not be empty";
  if (c.layers <= 0) return "--layers must be at least 1";
  if (c.channels <= 0 || c.heads <= 0) return "--channels and --heads must be at least 1";
  if (c.channels % c.heads != 0)
    return "--heads " + std::to_string(c.heads) + " does not divide --channels " + std::to_string(c.channels);
  if (c.maxSeq <= 0) return "--seq must be at least 1";
  return "";
}

template <class T>
Model<T> makeModel(const ModelConfig& c, uint64_t seed) {
  const std::string problem = configProblem(c);
  if (!problem.empty()) throw std::invalid_argument(problem);
  Model<T> m;
  m.config = c;
  const size_t n = parameterCount(c);
  m.params.assign(n, T(0));
  m.grads.assign(n, T(0));
  if constexpr (std::is_same_v<T, float>) initParams(c, m.params.data(), seed);
  m.p = bindParams(c, m.params.data());
  m.g = bindParams(c, m.grads.data());
  return m;
}

template <class T>
void prepare(Model<T>& m, int B, int Tn) {
  if (Tn > m.config.maxSeq)
    throw std::invalid_argument("sequence length " + std::to_string(Tn) + " exceeds the model's maximum " +
                                std::to_string(m.config.maxSeq));
  if (m.batch == B && m.seq == Tn) return;
  const size_t bt = static_cast<size_t>(B) * Tn, C = m.config.channels, V = m.config.vocab;
  const size_t attn = static_cast<size_t>(B) * m.config.heads * Tn * Tn;
  Activations<T>& a = m.acts;
  a.encoded.assign(bt * C, T(0));
  a.layers.resize(static_cast<size_t>(m.config.layers));
  for (LayerActs<T>& l : a.layers) {
    for (auto* v : {&l.ln1, &l.atty, &l.residual2, &l.ln2, &l.out}) v->assign(bt * C, T(0));
    for (auto* v : {&l.ln1Mean, &l.ln1Rstd, &l.ln2Mean, &l.ln2Rstd}) v->assign(bt, T(0));
    l.qkv.assign(bt * 3 * C, T(0));
    l.att.assign(attn, T(0));
    l.fch.assign(bt * 4 * C, T(0));
    l.fchGelu.assign(bt * 4 * C, T(0));
  }
  a.lnf.assign(bt * C, T(0));
  a.lnfMean.assign(bt, T(0));
  a.lnfRstd.assign(bt, T(0));
  a.logits.assign(bt * V, T(0));
  a.probs.assign(bt * V, T(0));
  a.losses.assign(bt, T(0));
  GradScratch<T>& s = m.scratch;
  for (auto* v : {&s.dresidual, &s.dln, &s.datty}) v->assign(bt * C, T(0));
  s.dqkv.assign(bt * 3 * C, T(0));
  s.datt.assign(attn, T(0));
  s.dfch.assign(bt * 4 * C, T(0));
  s.dfchGelu.assign(bt * 4 * C, T(0));
  s.dlogits.assign(bt * V, T(0));
  m.batch = B;
  m.seq = Tn;
}

template <class T>
void embedForward(Model<T>& m, const int* tokens) {
  {
    OpTimer timer(m, OpKind::kEncoder);
    ops::encoderForward(m.acts.encoded.data(), tokens, m.p.wte, m.p.wpe, m.batch, m.seq, m.config.channels);
  }
}

template <class T>
void blockForward(Model<T>& m, int layer, const T* in) {
  const int B = m.batch, Tn = m.seq, C = m.config.channels, NH = m.config.heads, rows = B * Tn;
  const BlockParams<T>& w = m.p.blocks[static_cast<size_t>(layer)];
  LayerActs<T>& a = m.acts.layers[static_cast<size_t>(layer)];
  const size_t n = static_cast<size_t>(rows) * C;
  {
    OpTimer timer(m, OpKind::kLayerNorm);
    ops::layerNormForward(a.ln1.data(), a.ln1Mean.data(), a.ln1Rstd.data(), in, w.ln1w, w.ln1b, rows, C);
  }
  {
    OpTimer timer(m, OpKind::kMatmul);
    ops::matmulForward(a.qkv.data(), a.ln1.data(), w.qkvw, w.qkvb, rows, C, 3 * C);
  }
  {
    OpTimer timer(m, OpKind::kAttention);
    ops::attentionForward(a.atty.data(), a.att.data(), a.qkv.data(), B, Tn, C, NH);
  }
  // The projection's output is only ever added to the residual: it goes there directly.
  {
    OpTimer timer(m, OpKind::kMatmul);
    ops::matmulForward(a.residual2.data(), a.atty.data(), w.attprojw, w.attprojb, rows, C, C);
  }
  {
    OpTimer timer(m, OpKind::kResidual);
    ops::residualForward(a.residual2.data(), a.residual2.data(), in, n);
  }
  {
    OpTimer timer(m, OpKind::kLayerNorm);
    ops::layerNormForward(a.ln2.data(), a.ln2Mean.data(), a.ln2Rstd.data(), a.residual2.data(), w.ln2w, w.ln2b, rows,
                          C);
  }
  {
    OpTimer timer(m, OpKind::kMatmul);
    ops::matmulForward(a.fch.data(), a.ln2.data(), w.fcw, w.fcb, rows, C, 4 * C);
  }
  {
    OpTimer timer(m, OpKind::kGelu);
    ops::geluForward(a.fchGelu.data(), a.fch.data(), n * 4);
  }
  {
    OpTimer timer(m, OpKind::kMatmul);
    ops::matmulForward(a.out.data(), a.fchGelu.data(), w.fcprojw, w.fcprojb, rows, 4 * C, C);
  }
  {
    OpTimer timer(m, OpKind::kResidual);
    ops::residualForward(a.out.data(), a.out.data(), a.residual2.data(), n);
  }
}

template <class T>
T headForward(Model<T>& m, const T* in, const int* targets) {
  const int rows = m.batch * m.seq, C = m.config.channels, V = m.config.vocab;
  Activations<T>& a = m.acts;
  {
    OpTimer timer(m, OpKind::kLayerNorm);
    ops::layerNormForward(a.lnf.data(), a.lnfMean.data(), a.lnfRstd.data(), in, m.p.lnfw, m.p.lnfb, rows, C);
  }
  {
    OpTimer timer(m, OpKind::kMatmul);
    ops::matmulForward(a.logits.data(), a.lnf.data(), m.p.wte, static_cast<const T*>(nullptr), rows, C, V);
  }
  if (!targets) return T(0);
  {
    OpTimer timer(m, OpKind::kSoftmaxLoss);
    ops::softmaxCrossEntropyForward(a.losses.data(), a.probs.data(), a.logits.data(), targets, rows, V);
  }
  T sum = 0;
  for (int r = 0; r < rows; ++r) sum += a.losses[static_cast<size_t>(r)];
  return sum / T(rows);
}

template <class T>
const T* blockInput(const Model<T>& m, int layer) {
  return layer == 0 ? m.acts.encoded.data() : m.acts.layers[static_cast<size_t>(layer - 1)].out.data();
}

template <class T>
T forward(Model<T>& m, const int* tokens, const int* targets, int B, int Tn) {
  prepare(m, B, Tn);
  embedForward(m, tokens);
  for (int l = 0; l < m.config.layers; ++l) blockForward(m, l, blockInput(m, l));
  return headForward(m, blockInput(m, m.config.layers), targets);
}

namespace {

template <class T>
void zero(std::vector<T>& v) {
  std::fill(v.begin(), v.end(), T(0));
}

// dresidual <- gradient of the head's input.
template <class T>
void headBackward(Model<T>& m, const T* in, const int* targets, T lossScale) {
  const int rows = m.batch * m.seq, C = m.config.channels, V = m.config.vocab;
  Activations<T>& a = m.acts;
  GradScratch<T>& s = m.scratch;
  {
    OpTimer timer(m, OpKind::kSoftmaxLoss);
    ops::softmaxCrossEntropyBackward(s.dlogits.data(), a.probs.data(), targets, lossScale / T(rows), rows, V);
  }
  {
    OpTimer timer(m, OpKind::kMatmul);
    ops::matmulBackward(s.dln.data(), m.g.wte, static_cast<T*>(nullptr), s.dlogits.data(), a.lnf.data(), m.p.wte, rows,
                        C, V);
  }
  zero(s.dresidual);
  {
    OpTimer timer(m, OpKind::kLayerNorm);
    ops::layerNormBackward(s.dresidual.data(), m.g.lnfw, m.g.lnfb, s.dln.data(), in, m.p.lnfw, a.lnfMean.data(),
                           a.lnfRstd.data(), rows, C);
  }
}

// dresidual: the gradient of the block's output on entry, of its input on return.
template <class T>
void blockBackward(Model<T>& m, int layer, const T* in) {
  const int B = m.batch, Tn = m.seq, C = m.config.channels, NH = m.config.heads, rows = B * Tn;
  const BlockParams<T>& w = m.p.blocks[static_cast<size_t>(layer)];
  const BlockParams<T>& g = m.g.blocks[static_cast<size_t>(layer)];
  const LayerActs<T>& a = m.acts.layers[static_cast<size_t>(layer)];
  GradScratch<T>& s = m.scratch;
  T* dres = s.dresidual.data();
  {
    OpTimer timer(m, OpKind::kMatmul);
    ops::matmulBackward(s.dfchGelu.data(), g.fcprojw, g.fcprojb, dres, a.fchGelu.data(), w.fcprojw, rows, 4 * C, C);
  }
  {
    OpTimer timer(m, OpKind::kGelu);
    ops::geluBackward(s.dfch.data(), a.fch.data(), s.dfchGelu.data(), s.dfch.size());
  }
  {
    OpTimer timer(m, OpKind::kMatmul);
    ops::matmulBackward(s.dln.data(), g.fcw, g.fcb, s.dfch.data(), a.ln2.data(), w.fcw, rows, C, 4 * C);
  }
  {
    OpTimer timer(m, OpKind::kLayerNorm);
    ops::layerNormBackward(dres, g.ln2w, g.ln2b, s.dln.data(), a.residual2.data(), w.ln2w, a.ln2Mean.data(),
                           a.ln2Rstd.data(), rows, C);
  }
  {
    OpTimer timer(m, OpKind::kMatmul);
    ops::matmulBackward(s.datty.data(), g.attprojw, g.attprojb, dres, a.atty.data(), w.attprojw, rows, C, C);
  }
  {
    OpTimer timer(m, OpKind::kAttention);
    ops::attentionBackward(s.dqkv.data(), s.datt.data(), s.datty.data(), a.qkv.data(), a.att.data(), B, Tn, C, NH);
  }
  {
    OpTimer timer(m, OpKind::kMatmul);
    ops::matmulBackward(s.dln.data(), g.qkvw, g.qkvb, s.dqkv.data(), a.ln1.data(), w.qkvw, rows, C, 3 * C);
  }
  {
    OpTimer timer(m, OpKind::kLayerNorm);
    ops::layerNormBackward(dres, g.ln1w, g.ln1b, s.dln.data(), in, w.ln1w, a.ln1Mean.data(), a.ln1Rstd.data(), rows, C);
  }
}

}  // namespace

template <class T>
void backward(Model<T>& m, const int* tokens, const int* targets, T lossScale) {
  headBackward(m, blockInput(m, m.config.layers), targets, lossScale);
  for (int l = m.config.layers - 1; l >= 0; --l) blockBackward(m, l, blockInput(m, l));
  {
    OpTimer timer(m, OpKind::kEncoder);
    ops::encoderBackward(m.g.wte, m.g.wpe, m.scratch.dresidual.data(), tokens, m.batch, m.seq, m.config.channels);
  }
}

size_t activationBytes(const ModelConfig& c, int B, int Tn) {
  const size_t bt = static_cast<size_t>(B) * Tn, C = c.channels, V = c.vocab, L = c.layers;
  const size_t attn = static_cast<size_t>(B) * c.heads * Tn * Tn;
  const size_t perLayer = bt * C * 5 + bt * 4 + bt * 3 * C + attn + bt * 8 * C;
  const size_t acts = bt * C + L * perLayer + bt * C + 2 * bt + 2 * bt * V + bt;
  const size_t scratch = bt * C * 3 + bt * 3 * C + attn + bt * 8 * C + bt * V;
  return (acts + scratch) * sizeof(float);
}

#define GPT_INSTANTIATE(T)                                            \
  template Model<T> makeModel<T>(const ModelConfig&, uint64_t);       \
  template void prepare<T>(Model<T>&, int, int);                      \
  template void embedForward<T>(Model<T>&, const int*);               \
  template void blockForward<T>(Model<T>&, int, const T*);            \
  template T headForward<T>(Model<T>&, const T*, const int*);         \
  template T forward<T>(Model<T>&, const int*, const int*, int, int); \
  template void backward<T>(Model<T>&, const int*, const int*, T);
GPT_INSTANTIATE(float)
GPT_INSTANTIATE(double)
#undef GPT_INSTANTIATE

}  // namespace gpt
