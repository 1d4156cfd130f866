// SPDX-License-Identifier: BSD-3-Clause
// The GPT as plain structs and verbs: parameters and their gradients (flat buffers, see
// params.h), the activations a forward keeps for its backward, and forward / backward.
// The model is three pieces, embed -> blocks -> head, each with its own forward and
// backward, so that a pipeline stage can run a range of blocks and a tensor-parallel rank a
// slice of each block without rewriting the math.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <vector>

#include "config.h"
#include "params.h"

namespace gpt {

template <class T>
struct LayerActs {
  std::vector<T> ln1, ln1Mean, ln1Rstd;  // (B,T,C), (B,T), (B,T)
  std::vector<T> qkv;                    // (B,T,3C)
  std::vector<T> att;                    // (B,NH,T,T) softmax probabilities
  std::vector<T> atty;                   // (B,T,C) attention output, before the projection
  std::vector<T> residual2;              // (B,T,C) input + attention
  std::vector<T> ln2, ln2Mean, ln2Rstd;  // (B,T,C), (B,T), (B,T)
  std::vector<T> fch, fchGelu;           // (B,T,4C) before and after GELU
  std::vector<T> out;                    // (B,T,C) block output
};

template <class T>
struct Activations {
  std::vector<T> encoded;  // (B,T,C) embeddings, input of block 0
  std::vector<LayerActs<T>> layers;
  std::vector<T> lnf, lnfMean, lnfRstd;  // final LayerNorm
  std::vector<T> logits, probs;          // (B,T,V)
  std::vector<T> losses;                 // (B,T)
};

// Gradient buffers of activations, reused by every block in turn.
template <class T>
struct GradScratch {
  std::vector<T> dresidual;  // (B,T,C) gradient flowing down the residual stream
  std::vector<T> dln;        // (B,T,C)
  std::vector<T> dqkv;       // (B,T,3C)
  std::vector<T> datt;       // (B,NH,T,T)
  std::vector<T> datty;      // (B,T,C)
  std::vector<T> dfch;       // (B,T,4C)
  std::vector<T> dfchGelu;   // (B,T,4C)
  std::vector<T> dlogits;    // (B,T,V)
};

// Where forward and backward time goes, per kind of op (llm.c-style time shares).
enum class OpKind { kEncoder, kLayerNorm, kMatmul, kAttention, kGelu, kResidual, kSoftmaxLoss, kCount };
const char* opKindName(OpKind k);

template <class T>
struct Model {
  ModelConfig config;
  std::vector<T> params;   // parameterCount(config) values, parameterLayout order
  std::vector<T> grads;    // the same layout
  Params<T> p, g;          // views of the two
  int batch = 0, seq = 0;  // what the activations are sized for
  Activations<T> acts;
  GradScratch<T> scratch;
  std::array<double, static_cast<size_t>(OpKind::kCount)> opSeconds{};  // forward + backward, summed
};

// A model with parameters from initParams(seed) (or zero when T is not float: the caller
// fills them), zero gradients and no activations.
template <class T>
Model<T> makeModel(const ModelConfig& c, uint64_t seed);

// Sizes activations and scratch for B sequences of length Tn (<= maxSeq), once per shape.
template <class T>
void prepare(Model<T>& m, int B, int Tn);

template <class T>
void zeroGrads(Model<T>& m) {
  std::fill(m.grads.begin(), m.grads.end(), T(0));
}

// Pieces of the forward: embeddings, one block, head and loss.
template <class T>
void embedForward(Model<T>& m, const int* tokens);
template <class T>
void blockForward(Model<T>& m, int layer, const T* in);
// Returns the mean loss over the B*T positions (targets may be null: logits only).
template <class T>
T headForward(Model<T>& m, const T* in, const int* targets);

// The whole forward: tokens and targets are (B, T).
template <class T>
T forward(Model<T>& m, const int* tokens, const int* targets, int B, int Tn);

// Accumulates into m.grads the gradient of lossScale * (mean loss of the last forward).
template <class T>
void backward(Model<T>& m, const int* tokens, const int* targets, T lossScale);

// Bytes of activations and their gradient scratch for one micro-batch (memory reports).
size_t activationBytes(const ModelConfig& c, int B, int Tn);

}  // namespace gpt
