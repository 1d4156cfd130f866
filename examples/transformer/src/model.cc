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
  if (c.maxSeq <= 0) return "--max-seq must be at least 1";
  return "";
}

template <class T>
Model<T> makeModel(const ModelConfig& c, const Shard& s, uint64_t seed) {
  const std::string problem = configProblem(c);
  if (!problem.empty()) throw std::invalid_argument(problem);
  const std::string shard = shardProblem(c, s);
  if (!shard.empty()) throw std::invalid_argument(shard);
  Model<T> m;
  m.config = c;
  m.shard = s;
  m.layout = shardLayout(c, s);
  const size_t n = shardCount(m.layout);
  m.params.assign(n, T(0));
  m.grads.assign(n, T(0));
  if constexpr (std::is_same_v<T, float>) {
    if (s.whole()) {
      initParams(c, m.params.data(), seed);
    } else {
      // Every rank draws the whole model and keeps its part: any layout starts from the
      // very parameters one rank would.
      std::vector<float> whole(parameterCount(c));
      initParams(c, whole.data(), seed);
      extractShard(m.layout, s, whole.data(), m.params.data());
    }
  }
  rebind(m);
  return m;
}

template <class T>
Model<T> makeModel(const ModelConfig& c, uint64_t seed) {
  return makeModel<T>(c, wholeModel(c), seed);
}

template <class T>
void rebind(Model<T>& m) {
  m.p = bindParams(m.layout, m.config.layers, m.params.data());
  m.g = bindParams(m.layout, m.config.layers, m.grads.data());
}

template <class T>
void prepare(Model<T>& m, int B, int Tn, int slots) {
  if (Tn > m.config.maxSeq)
    throw std::invalid_argument("sequence length " + std::to_string(Tn) + " exceeds the model's maximum " +
                                std::to_string(m.config.maxSeq));
  const Shard& sh = m.shard;
  if (sh.sequenceParallel && (B * Tn) % sh.tp != 0)
    throw std::invalid_argument("sequence parallelism splits the " + std::to_string(B * Tn) +
                                " tokens of a micro-batch over --tp " + std::to_string(sh.tp) + ": they must divide");
  if (m.slicing && (B != 1 || sh.sequenceParallel))
    throw std::invalid_argument("token slices cut one sequence: --batch 1, and no --sp");
  if (m.batch == B && m.seq == Tn && static_cast<int>(m.acts.size()) >= slots &&
      (m.acts.empty() || m.acts[0].layers.empty() || !m.slicing ||
       !m.acts[0].layers[static_cast<size_t>(sh.firstLayer)].dqkv.empty()))
    return;
  m.batch = B;
  m.seq = Tn;
  const size_t R = static_cast<size_t>(m.rows()), r = static_cast<size_t>(m.heldRows());
  const size_t C = m.config.channels, V = m.config.vocab, tp = static_cast<size_t>(sh.tp);
  const size_t Cl = C / tp, Fl = 4 * C / tp;
  const size_t attn = static_cast<size_t>(B) * (m.config.heads / sh.tp) * Tn * Tn;
  const size_t all = sh.sequenceParallel ? R * C : 0;
  m.acts.resize(static_cast<size_t>(std::max(slots, 1)));
  for (Activations<T>& a : m.acts) {
    a.input.assign(r * C, T(0));
    a.layers.resize(static_cast<size_t>(m.config.layers));
    for (int layer = sh.firstLayer; layer < sh.endLayer; ++layer) {
      LayerActs<T>& l = a.layers[static_cast<size_t>(layer)];
      for (auto* v : {&l.ln1, &l.residual2, &l.ln2, &l.out}) v->assign(r * C, T(0));
      for (auto* v : {&l.ln1Mean, &l.ln1Rstd, &l.ln2Mean, &l.ln2Rstd}) v->assign(r, T(0));
      l.ln1All.assign(all, T(0));
      l.ln2All.assign(all, T(0));
      l.qkv.assign(R * 3 * Cl, T(0));
      l.att.assign(attn, T(0));
      l.atty.assign(R * Cl, T(0));
      l.fch.assign(R * Fl, T(0));
      l.fchGelu.assign(R * Fl, T(0));
      l.dqkv.assign(m.slicing ? R * 3 * Cl : 0, T(0));
    }
    const size_t headRows = sh.head() ? r : 0;
    a.lnf.assign(headRows * C, T(0));
    a.lnfMean.assign(headRows, T(0));
    a.lnfRstd.assign(headRows, T(0));
    a.logits.assign(headRows * V, T(0));
    a.probs.assign(headRows * V, T(0));
    a.losses.assign(headRows, T(0));
  }
  GradScratch<T>& s = m.scratch;
  s.dresidual.assign(r * C, T(0));
  s.dln.assign(r * C, T(0));
  s.partial.assign(sh.sequenceParallel ? R * C : 0, T(0));
  s.dresAll.assign(all, T(0));
  s.dqkv.assign(R * 3 * Cl, T(0));
  s.datt.assign(attn, T(0));
  s.datty.assign(R * Cl, T(0));
  s.dfch.assign(R * Fl, T(0));
  s.dfchGelu.assign(R * Fl, T(0));
  s.dlogits.assign(sh.head() ? r * V : 0, T(0));
}

namespace {

// The local shapes of one block on this rank, and the rows a call works on: R rows enter the
// column-parallel layers, the rank holds r of them in the residual stream (sequence
// parallel: R / tp), and with a token slice both are the slice's rows, `off` rows into the
// micro-batch's buffers.
struct Dims {
  int B, Tn, C, NH, Cl, Fl, R, r, off;
  bool sp, tp, sliced;
};
template <class T>
Dims dims(const Model<T>& m) {
  const int tp = m.shard.tp, C = m.config.channels;
  const bool sliced = m.sliced();
  const int rows = sliced ? m.sliceEnd - m.sliceBegin : m.rows();
  return {m.batch,
          m.seq,
          C,
          m.config.heads / tp,
          C / tp,
          4 * C / tp,
          rows,
          sliced ? rows : m.heldRows(),
          sliced ? m.sliceBegin : 0,
          m.shard.sequenceParallel,
          tp > 1,
          sliced};
}

// Row `row` of a buffer of rows `width` wide.
template <class V>
auto at(V& v, int row, int width) {
  return v.data() + static_cast<size_t>(row) * static_cast<size_t>(width);
}

template <class T>
const T* blockInput(const Model<T>& m, int slot, int layer) {
  const Activations<T>& a = m.acts[static_cast<size_t>(slot)];
  return layer == m.shard.firstLayer ? a.input.data() : a.layers[static_cast<size_t>(layer - 1)].out.data();
}

// LayerNorm of the held rows, then (sequence parallel) every row of it: what a column-parallel
// layer reads. `in`, `out`, `mean` and `rstd` point at the call's first row.
template <class T>
const T* normForColumn(Model<T>& m, const Dims& d, int slot, int layer, BlockHalf h, const T* in, const T* w,
                       const T* b, T* out, T* mean, T* rstd, std::vector<T>& all) {
  {
    OpTimer timer(m, OpKind::kLayerNorm);
    ops::layerNormForward(out, mean, rstd, in, w, b, d.r, d.C);
  }
  if (!d.sp) return out;
  m.tp->forwardGather(slot, layer, h, out, all.data(), static_cast<size_t>(d.r) * d.C);
  return all.data();
}

// A row-parallel projection of every row, summed over the group into the held rows of
// `out`, then its bias and the residual added.
template <class T>
void rowParallelForward(Model<T>& m, const Dims& d, int slot, int layer, BlockHalf h, const T* x, const T* w,
                        const T* bias, int inChannels, const T* residual, T* out) {
  T* partial = d.sp ? m.scratch.partial.data() : out;
  {
    OpTimer timer(m, OpKind::kMatmul);
    ops::matmulForward(partial, x, w, static_cast<const T*>(nullptr), d.R, inChannels, d.C);
  }
  if (d.tp) m.tp->forwardReduce(slot, layer, h, partial, out, static_cast<size_t>(d.r) * d.C);
  OpTimer timer(m, OpKind::kResidual);
  ops::biasResidualForward(out, bias, residual, d.r, d.C);
}

}  // namespace

template <class T>
void embedForward(Model<T>& m, int slot, const int* tokens) {
  const Dims d = dims(m);
  OpTimer timer(m, OpKind::kEncoder);
  ops::encoderForward(at(m.acts[static_cast<size_t>(slot)].input, d.off, d.C), tokens, m.p.wte, m.p.wpe,
                      d.sliced ? d.off : m.heldRowBegin(), d.r, m.seq, m.config.channels);
}

template <class T>
void blockForward(Model<T>& m, int slot, int layer) {
  const Dims d = dims(m);
  const BlockParams<T>& w = m.p.blocks[static_cast<size_t>(layer)];
  LayerActs<T>& a = m.acts[static_cast<size_t>(slot)].layers[static_cast<size_t>(layer)];
  const T* in = blockInput(m, slot, layer) + static_cast<size_t>(d.off) * d.C;
  // A micro-batch's first slice starts its keys' and values' gradients afresh.
  if (d.sliced && d.off == 0) std::fill(a.dqkv.begin(), a.dqkv.end(), T(0));
  const T* x1 = normForColumn(m, d, slot, layer, BlockHalf::kAttention, in, w.ln1w, w.ln1b, at(a.ln1, d.off, d.C),
                              at(a.ln1Mean, d.off, 1), at(a.ln1Rstd, d.off, 1), a.ln1All);
  {
    OpTimer timer(m, OpKind::kMatmul);
    ops::matmulForward(at(a.qkv, d.off, 3 * d.Cl), x1, w.qkvw, w.qkvb, d.R, d.C, 3 * d.Cl);
  }
  {
    OpTimer timer(m, OpKind::kAttention);
    if (d.sliced)
      ops::attentionForward(a.atty.data(), a.att.data(), a.qkv.data(), d.B, d.Tn, d.Cl, d.NH, d.off, d.off + d.R);
    else
      ops::attentionForward(a.atty.data(), a.att.data(), a.qkv.data(), d.B, d.Tn, d.Cl, d.NH);
  }
  T* residual2 = at(a.residual2, d.off, d.C);
  rowParallelForward(m, d, slot, layer, BlockHalf::kAttention, at(a.atty, d.off, d.Cl), w.attprojw, w.attprojb, d.Cl,
                     in, residual2);
  const T* x2 = normForColumn(m, d, slot, layer, BlockHalf::kMlp, residual2, w.ln2w, w.ln2b, at(a.ln2, d.off, d.C),
                              at(a.ln2Mean, d.off, 1), at(a.ln2Rstd, d.off, 1), a.ln2All);
  {
    OpTimer timer(m, OpKind::kMatmul);
    ops::matmulForward(at(a.fch, d.off, d.Fl), x2, w.fcw, w.fcb, d.R, d.C, d.Fl);
  }
  {
    OpTimer timer(m, OpKind::kGelu);
    ops::geluForward(at(a.fchGelu, d.off, d.Fl), at(a.fch, d.off, d.Fl), static_cast<size_t>(d.R) * d.Fl);
  }
  rowParallelForward(m, d, slot, layer, BlockHalf::kMlp, at(a.fchGelu, d.off, d.Fl), w.fcprojw, w.fcprojb, d.Fl,
                     residual2, at(a.out, d.off, d.C));
}

template <class T>
const T* stageOutput(const Model<T>& m, int slot) {
  return blockInput(m, slot, m.shard.endLayer);
}

template <class T>
T headForward(Model<T>& m, int slot, const int* targets) {
  const Dims d = dims(m);
  const int V = m.config.vocab;
  Activations<T>& a = m.acts[static_cast<size_t>(slot)];
  {
    OpTimer timer(m, OpKind::kLayerNorm);
    ops::layerNormForward(at(a.lnf, d.off, d.C), at(a.lnfMean, d.off, 1), at(a.lnfRstd, d.off, 1),
                          stageOutput(m, slot) + static_cast<size_t>(d.off) * d.C, m.p.lnfw, m.p.lnfb, d.r, d.C);
  }
  {
    OpTimer timer(m, OpKind::kMatmul);
    ops::matmulForward(at(a.logits, d.off, V), at(a.lnf, d.off, d.C), m.p.wte, static_cast<const T*>(nullptr), d.r, d.C,
                       V);
  }
  if (!targets) return T(0);
  const int first = d.sliced ? d.off : m.heldRowBegin();
  {
    OpTimer timer(m, OpKind::kSoftmaxLoss);
    ops::softmaxCrossEntropyForward(at(a.losses, d.off, 1), at(a.probs, d.off, V), at(a.logits, d.off, V),
                                    targets + first, d.r, V);
  }
  T sum = 0;
  for (int i = 0; i < d.r; ++i) sum += a.losses[static_cast<size_t>(d.off + i)];
  return sum / T(m.rows());
}

template <class T>
T forward(Model<T>& m, const int* tokens, const int* targets, int B, int Tn) {
  if (!m.shard.whole()) throw std::logic_error("forward() runs a whole model; a shard runs its pieces");
  prepare(m, B, Tn);
  embedForward(m, 0, tokens);
  for (int l = 0; l < m.config.layers; ++l) blockForward(m, 0, l);
  return headForward(m, 0, targets);
}

namespace {

template <class T>
void zero(std::vector<T>& v) {
  std::fill(v.begin(), v.end(), T(0));
}

// The gradient of a row-parallel projection's partial products, every row of it (sequence
// parallel: gathered from the held rows; through the backward of the group's sum); the
// bias's gradient from the held rows. The residual stream's gradient of the call's rows is
// at the start of scratch.dresidual.
template <class T>
const T* rowParallelOutputGrad(Model<T>& m, const Dims& d, int slot, int layer, BlockHalf h, T* dbias) {
  T* dres = m.scratch.dresidual.data();
  {
    OpTimer timer(m, OpKind::kMatmul);
    ops::biasBackward(dbias, dres, d.r, d.C);
  }
  if (!d.tp) return dres;
  const T* dout = dres;
  if (d.sp) {
    m.tp->backwardGather(slot, layer, h, dres, m.scratch.dresAll.data(), static_cast<size_t>(d.r) * d.C);
    dout = m.scratch.dresAll.data();
  }
  return m.tp->reduceGradient(slot, layer, h, dout, static_cast<size_t>(d.R), static_cast<size_t>(d.C));
}

// A column-parallel layer's backward into the LayerNorm before it: the input gradient summed
// over the group, then LayerNorm's backward into dresidual. `x`, `lnIn`, `mean` and `rstd`
// point at the call's first row.
template <class T>
void columnParallelBackward(Model<T>& m, const Dims& d, int slot, int layer, BlockHalf h, const T* dout,
                            int outChannels, const T* x, const T* w, T* dw, T* db, const T* lnIn, const T* lnw, T* dlnw,
                            T* dlnb, const T* mean, const T* rstd) {
  GradScratch<T>& s = m.scratch;
  T* partial = d.sp ? s.partial.data() : s.dln.data();
  {
    OpTimer timer(m, OpKind::kMatmul);
    ops::matmulBackward(partial, dw, db, dout, x, w, d.R, d.C, outChannels);
  }
  if (d.tp) m.tp->backwardReduce(slot, layer, h, partial, s.dln.data(), static_cast<size_t>(d.r) * d.C);
  OpTimer timer(m, OpKind::kLayerNorm);
  ops::layerNormBackward(s.dresidual.data(), dlnw, dlnb, s.dln.data(), lnIn, lnw, mean, rstd, d.r, d.C);
}

}  // namespace

template <class T>
void headBackward(Model<T>& m, int slot, const int* targets, T lossScale) {
  const Dims d = dims(m);
  const int V = m.config.vocab;
  Activations<T>& a = m.acts[static_cast<size_t>(slot)];
  GradScratch<T>& s = m.scratch;
  const int first = d.sliced ? d.off : m.heldRowBegin();
  {
    OpTimer timer(m, OpKind::kSoftmaxLoss);
    ops::softmaxCrossEntropyBackward(s.dlogits.data(), at(a.probs, d.off, V), targets + first, lossScale / T(m.rows()),
                                     d.r, V);
  }
  {
    OpTimer timer(m, OpKind::kMatmul);
    ops::matmulBackward(s.dln.data(), m.g.wte, static_cast<T*>(nullptr), s.dlogits.data(), at(a.lnf, d.off, d.C),
                        m.p.wte, d.r, d.C, V);
  }
  std::fill(s.dresidual.begin(), s.dresidual.begin() + static_cast<std::ptrdiff_t>(d.r) * d.C, T(0));
  {
    OpTimer timer(m, OpKind::kLayerNorm);
    ops::layerNormBackward(s.dresidual.data(), m.g.lnfw, m.g.lnfb, s.dln.data(),
                           stageOutput(m, slot) + static_cast<size_t>(d.off) * d.C, m.p.lnfw, at(a.lnfMean, d.off, 1),
                           at(a.lnfRstd, d.off, 1), d.r, d.C);
  }
}

template <class T>
void blockBackward(Model<T>& m, int slot, int layer) {
  const Dims d = dims(m);
  const BlockParams<T>& w = m.p.blocks[static_cast<size_t>(layer)];
  const BlockParams<T>& g = m.g.blocks[static_cast<size_t>(layer)];
  LayerActs<T>& a = m.acts[static_cast<size_t>(slot)].layers[static_cast<size_t>(layer)];
  GradScratch<T>& s = m.scratch;
  const T* x1 = d.sp ? a.ln1All.data() : at(a.ln1, d.off, d.C);
  const T* x2 = d.sp ? a.ln2All.data() : at(a.ln2, d.off, d.C);
  // MLP half.
  const T* dout = rowParallelOutputGrad(m, d, slot, layer, BlockHalf::kMlp, g.fcprojb);
  {
    OpTimer timer(m, OpKind::kMatmul);
    ops::matmulBackward(s.dfchGelu.data(), g.fcprojw, static_cast<T*>(nullptr), dout, at(a.fchGelu, d.off, d.Fl),
                        w.fcprojw, d.R, d.Fl, d.C);
  }
  {
    OpTimer timer(m, OpKind::kGelu);
    ops::geluBackward(s.dfch.data(), at(a.fch, d.off, d.Fl), s.dfchGelu.data(), static_cast<size_t>(d.R) * d.Fl);
  }
  columnParallelBackward(m, d, slot, layer, BlockHalf::kMlp, s.dfch.data(), d.Fl, x2, w.fcw, g.fcw, g.fcb,
                         at(a.residual2, d.off, d.C), w.ln2w, g.ln2w, g.ln2b, at(a.ln2Mean, d.off, 1),
                         at(a.ln2Rstd, d.off, 1));
  // Attention half. The attention kernels address rows by their place in the sequence: a
  // slice's rows of datty and of the keys' and values' gradients sit `off` rows in, and a
  // slice adds to the keys' and values' gradients its micro-batch keeps per block.
  dout = rowParallelOutputGrad(m, d, slot, layer, BlockHalf::kAttention, g.attprojb);
  {
    OpTimer timer(m, OpKind::kMatmul);
    ops::matmulBackward(at(s.datty, d.off, d.Cl), g.attprojw, static_cast<T*>(nullptr), dout, at(a.atty, d.off, d.Cl),
                        w.attprojw, d.R, d.Cl, d.C);
  }
  T* dqkv = d.sliced ? a.dqkv.data() : s.dqkv.data();
  {
    OpTimer timer(m, OpKind::kAttention);
    if (d.sliced)
      ops::attentionBackward(dqkv, s.datt.data(), s.datty.data(), a.qkv.data(), a.att.data(), d.B, d.Tn, d.Cl, d.NH,
                             d.off, d.off + d.R);
    else
      ops::attentionBackward(dqkv, s.datt.data(), s.datty.data(), a.qkv.data(), a.att.data(), d.B, d.Tn, d.Cl, d.NH);
  }
  columnParallelBackward(m, d, slot, layer, BlockHalf::kAttention, dqkv + static_cast<size_t>(d.off) * 3 * d.Cl,
                         3 * d.Cl, x1, w.qkvw, g.qkvw, g.qkvb,
                         blockInput(m, slot, layer) + static_cast<size_t>(d.off) * d.C, w.ln1w, g.ln1w, g.ln1b,
                         at(a.ln1Mean, d.off, 1), at(a.ln1Rstd, d.off, 1));
}

template <class T>
void embedBackward(Model<T>& m, int, const int* tokens) {
  const Dims d = dims(m);
  OpTimer timer(m, OpKind::kEncoder);
  ops::encoderBackward(m.g.wte, m.g.wpe, m.scratch.dresidual.data(), tokens, d.sliced ? d.off : m.heldRowBegin(), d.r,
                       m.seq, m.config.channels);
}

template <class T>
void backward(Model<T>& m, const int* tokens, const int* targets, T lossScale) {
  headBackward(m, 0, targets, lossScale);
  for (int l = m.config.layers - 1; l >= 0; --l) blockBackward(m, 0, l);
  embedBackward(m, 0, tokens);
}

size_t activationBytes(const ModelConfig& c, int B, int Tn) {
  const size_t bt = static_cast<size_t>(B) * Tn, C = c.channels, V = c.vocab, L = c.layers;
  const size_t attn = static_cast<size_t>(B) * c.heads * Tn * Tn;
  const size_t perLayer = bt * C * 5 + bt * 4 + bt * 3 * C + attn + bt * 8 * C;
  const size_t acts = bt * C + L * perLayer + bt * C + 2 * bt + 2 * bt * V + bt;
  const size_t scratch = bt * C * 3 + bt * 3 * C + attn + bt * 8 * C + bt * V;
  return (acts + scratch) * sizeof(float);
}

#define GPT_INSTANTIATE(T)                                                    \
  template Model<T> makeModel<T>(const ModelConfig&, uint64_t);               \
  template Model<T> makeModel<T>(const ModelConfig&, const Shard&, uint64_t); \
  template void rebind<T>(Model<T>&);                                         \
  template void prepare<T>(Model<T>&, int, int, int);                         \
  template void embedForward<T>(Model<T>&, int, const int*);                  \
  template void blockForward<T>(Model<T>&, int, int);                         \
  template T headForward<T>(Model<T>&, int, const int*);                      \
  template const T* stageOutput<T>(const Model<T>&, int);                     \
  template void headBackward<T>(Model<T>&, int, const int*, T);               \
  template void blockBackward<T>(Model<T>&, int, int);                        \
  template void embedBackward<T>(Model<T>&, int, const int*);                 \
  template T forward<T>(Model<T>&, const int*, const int*, int, int);         \
  template void backward<T>(Model<T>&, const int*, const int*, T);
GPT_INSTANTIATE(float)
GPT_INSTANTIATE(double)
#undef GPT_INSTANTIATE

}  // namespace gpt
