// SPDX-License-Identifier: BSD-3-Clause
// The GPT as plain structs and verbs: parameters and their gradients (flat buffers, see
// params.h), the activations a forward keeps for its backward, and forward / backward.
// The model is three pieces, embed -> blocks -> head, each with its own forward and
// backward, so that a pipeline stage runs a range of blocks; a tensor-parallel rank runs its
// slice of each block (shard.h) and its group meets at four points, which the model hands to
// a TensorParallel object. Activations come in slots, one per micro-batch in flight.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <vector>

#include "config.h"
#include "params.h"
#include "shard.h"

namespace gpt {

// Row counts: R rows (B*T tokens) enter the column-parallel layers; a rank holds r of them in
// the residual stream (R / tp with sequence parallelism, else R). Channel counts are this
// rank's: Cl = C / tp attention channels (its heads), Fl = 4C / tp MLP channels.
template <class T>
struct LayerActs {
  std::vector<T> ln1, ln1Mean, ln1Rstd;  // (r,C), (r), (r)
  std::vector<T> ln1All;                 // (R,C) ln1 of every row (sequence parallel only)
  std::vector<T> qkv;                    // (R,3Cl)
  std::vector<T> att;                    // (B,NH/tp,T,T) softmax probabilities
  std::vector<T> atty;                   // (R,Cl) attention output, before the projection
  std::vector<T> residual2;              // (r,C) input + attention
  std::vector<T> ln2, ln2Mean, ln2Rstd;  // (r,C), (r), (r)
  std::vector<T> ln2All;                 // (R,C) (sequence parallel only)
  std::vector<T> fch, fchGelu;           // (R,Fl) before and after GELU
  std::vector<T> out;                    // (r,C) block output
  std::vector<T> dqkv;                   // (R,3Cl) token slices: the keys' and values' gradients, over slices
};

template <class T>
struct Activations {
  std::vector<T> input;  // (r,C) input of the stage's first block: embeddings, or what the previous stage sent
  std::vector<LayerActs<T>> layers;      // indexed by layer; only the stage's are sized
  std::vector<T> lnf, lnfMean, lnfRstd;  // final LayerNorm (last stage)
  std::vector<T> logits, probs;          // (r,V)
  std::vector<T> losses;                 // (r)
};

// Buffers that one forward or backward at a time uses, shared by the slots.
template <class T>
struct GradScratch {
  std::vector<T> dresidual;  // (r,C) gradient flowing down the residual stream
  std::vector<T> dln;        // (r,C)
  std::vector<T> partial;    // (R,C) a row-parallel output or column-parallel input gradient before its sum
  std::vector<T> dresAll;    // (R,C) dresidual of every row (sequence parallel only)
  std::vector<T> dqkv;       // (R,3Cl)
  std::vector<T> datt;       // (B,NH/tp,T,T)
  std::vector<T> datty;      // (R,Cl)
  std::vector<T> dfch;       // (R,Fl)
  std::vector<T> dfchGelu;   // (R,Fl)
  std::vector<T> dlogits;    // (r,V)
};

// The four points where a tensor-parallel group communicates inside a block, as Megatron
// places them, for the attention (kAttention) and the MLP (kMlp) half of block `layer`, and
// the backward of the forward sum. `slot` is the micro-batch's activation slot (what an
// implementation keeps for the backward is per slot). Counts are of the rows this rank holds
// (r * C elements).
enum class BlockHalf { kAttention, kMlp };

template <class T>
class TensorParallel {
 public:
  virtual ~TensorParallel() = default;
  // Forward, into a column-parallel layer (sequence parallel only): the held rows -> every row.
  virtual void forwardGather(int slot, int layer, BlockHalf h, const T* held, T* all, size_t heldCount) = 0;
  // Forward, out of a row-parallel layer: every rank's partial products -> their sum, for
  // the held rows (`out` is `partial` without sequence parallelism: an in-place all-reduce).
  virtual void forwardReduce(int slot, int layer, BlockHalf h, T* partial, T* out, size_t heldCount) = 0;
  // Backward of forwardReduce: the gradient of the sum (every row, `rows` x `cols`) -> the
  // gradient of this rank's partial products. A plain sum passes it through unchanged
  // (returns `dout`); a compressed one may not.
  virtual const T* reduceGradient(int slot, int layer, BlockHalf h, const T* dout, size_t rows, size_t cols) {
    (void)slot, (void)layer, (void)h, (void)rows, (void)cols;
    return dout;
  }
  // Backward, into a row-parallel layer (sequence parallel only): held rows of the output
  // gradient -> every row.
  virtual void backwardGather(int slot, int layer, BlockHalf h, const T* held, T* all, size_t heldCount) = 0;
  // Backward, out of a column-parallel layer: partial input gradients -> their sum.
  virtual void backwardReduce(int slot, int layer, BlockHalf h, T* partial, T* out, size_t heldCount) = 0;
};

// Where forward and backward time goes, per kind of op (llm.c-style time shares).
enum class OpKind { kEncoder, kLayerNorm, kMatmul, kAttention, kGelu, kResidual, kSoftmaxLoss, kCount };
const char* opKindName(OpKind k);

template <class T>
struct Model {
  ModelConfig config;
  Shard shard;                       // the part of the model this rank holds
  std::vector<TensorInfo> layout;    // this rank's tensors (shardLayout)
  std::vector<T> params;             // layout's values (and ZeRO-1 padding past them)
  std::vector<T> grads;              // the same layout
  Params<T> p, g;                    // views of the two; tensors of other ranks are null
  int batch = 0, seq = 0;            // what the activations are sized for
  std::vector<Activations<T>> acts;  // one per micro-batch in flight
  GradScratch<T> scratch;
  TensorParallel<T>* tp = nullptr;                                      // needed when shard.tp > 1
  std::array<double, static_cast<size_t>(OpKind::kCount)> opSeconds{};  // forward + backward, summed
  // Token slices (TeraPipe; one sequence per micro-batch): the pieces run on rows
  // [sliceBegin, sliceEnd) of the micro-batch, each block's attention over the keys and
  // values of every earlier row; backward in reverse slice order. -1: every row.
  bool slicing = false;  // activations keep what slices need (set before prepare)
  int sliceBegin = 0, sliceEnd = -1;

  bool sliced() const { return sliceEnd >= 0; }
  int rows() const { return batch * seq; }                                              // R
  int heldRows() const { return shard.sequenceParallel ? rows() / shard.tp : rows(); }  // r
  int heldRowBegin() const { return shard.sequenceParallel ? shard.tpRank * heldRows() : 0; }
};

// The whole model (or shard `s` of it) with parameters from initParams(seed) (or zero when
// T is not float: the caller fills them), zero gradients and no activations.
template <class T>
Model<T> makeModel(const ModelConfig& c, uint64_t seed);
template <class T>
Model<T> makeModel(const ModelConfig& c, const Shard& s, uint64_t seed);

// Points the views at the buffers again (after they were resized).
template <class T>
void rebind(Model<T>& m);

// Sizes `slots` sets of activations and the scratch for B sequences of length Tn (<= maxSeq).
template <class T>
void prepare(Model<T>& m, int B, int Tn, int slots = 1);

template <class T>
void zeroGrads(Model<T>& m) {
  std::fill(m.grads.begin(), m.grads.end(), T(0));
}

// Pieces of the forward into activation slot `slot`. tokens and targets are (B, T) for every
// rank; each piece reads the rows it holds (or the slice's).
template <class T>
void embedForward(Model<T>& m, int slot, const int* tokens);  // writes acts[slot].input
template <class T>
void blockForward(Model<T>& m, int slot, int layer);
// The loss of the held rows summed, divided by all rows R: summed over a sequence-parallel
// group it is the mean loss (targets may be null: logits only).
template <class T>
T headForward(Model<T>& m, int slot, const int* targets);
// The stage's output rows (r, C): the last held block's output.
template <class T>
const T* stageOutput(const Model<T>& m, int slot);

// Pieces of the backward. Each leaves the gradient of its input in scratch.dresidual; a
// stage that is not the last puts its output's gradient there before blockBackward (a
// slice's rows at its start). Parameter gradients accumulate into m.grads.
template <class T>
void headBackward(Model<T>& m, int slot, const int* targets, T lossScale);
template <class T>
void blockBackward(Model<T>& m, int slot, int layer);
template <class T>
void embedBackward(Model<T>& m, int slot, const int* tokens);

// The whole forward of a whole model, slot 0: tokens and targets are (B, T).
template <class T>
T forward(Model<T>& m, const int* tokens, const int* targets, int B, int Tn);

// Accumulates into m.grads the gradient of lossScale * (mean loss of the last forward).
template <class T>
void backward(Model<T>& m, const int* tokens, const int* targets, T lossScale);

// Bytes of activations and their gradient scratch for one micro-batch (memory reports).
size_t activationBytes(const ModelConfig& c, int B, int Tn);

}  // namespace gpt
