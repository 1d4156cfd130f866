// SPDX-License-Identifier: BSD-3-Clause
// The parameters of the model as one flat buffer of tensors in a fixed, documented order
// (the checkpoint's order too): wte, wpe, then per block ln1w, ln1b, qkvw, qkvb, attprojw,
// attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb, then lnfw, lnfb. Weights are (out, in)
// row-major as llm.c keeps them. Gradients use the same layout, so one view type serves both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "config.h"

namespace gpt {

struct TensorInfo {
  const char* name;
  int layer;  // -1 outside the blocks
  size_t rows, cols;
  size_t offset;  // elements into the flat buffer
  bool decay;     // AdamW decays 2-D weights only
  size_t size() const { return rows * cols; }
};

// Every tensor, in order; offsets are consecutive.
std::vector<TensorInfo> parameterLayout(const ModelConfig& c);
size_t parameterCount(const ModelConfig& c);

template <class T>
struct BlockParams {
  T *ln1w, *ln1b;          // (C)
  T *qkvw, *qkvb;          // (3C, C), (3C)
  T *attprojw, *attprojb;  // (C, C), (C)
  T *ln2w, *ln2b;          // (C)
  T *fcw, *fcb;            // (4C, C), (4C)
  T *fcprojw, *fcprojb;    // (C, 4C), (C)
};

template <class T>
struct Params {
  T* wte;  // (V, C), also the LM head (tied)
  T* wpe;  // (maxT, C)
  std::vector<BlockParams<T>> blocks;
  T* lnfw;  // (C)
  T* lnfb;  // (C)
};

// Views of the tensors of a flat buffer laid out by parameterLayout.
template <class T>
Params<T> bindParams(const ModelConfig& c, T* base) {
  const std::vector<TensorInfo> layout = parameterLayout(c);
  size_t k = 0;
  auto next = [&] { return base + layout[k++].offset; };
  Params<T> p;
  p.wte = next();
  p.wpe = next();
  p.blocks.resize(static_cast<size_t>(c.layers));
  for (BlockParams<T>& b : p.blocks) {
    for (T** t : {&b.ln1w, &b.ln1b, &b.qkvw, &b.qkvb, &b.attprojw, &b.attprojb, &b.ln2w, &b.ln2b, &b.fcw, &b.fcb,
                  &b.fcprojw, &b.fcprojb})
      *t = next();
  }
  p.lnfw = next();
  p.lnfb = next();
  return p;
}

// GPT-2's initialisation from `seed`: weights normal(0, 0.02), the residual projections
// (attprojw, fcprojw) scaled by 1/sqrt(2L), biases 0, LayerNorm weights 1.
void initParams(const ModelConfig& c, float* base, uint64_t seed);

}  // namespace gpt
