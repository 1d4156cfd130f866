// SPDX-License-Identifier: BSD-3-Clause
// The parameters of the model as one flat buffer of tensors in a fixed, documented order
// (the checkpoint's order too): wte, wpe, then per block ln1w, ln1b, qkvw, qkvb, attprojw,
// attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb, then lnfw, lnfb. Weights are (out, in)
// row-major as llm.c keeps them. Gradients use the same layout, so one view type serves both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "config.h"

namespace gpt {

// How Megatron's tensor parallelism divides a tensor over the ranks of a group:
// kWhole: every rank holds all of it (LayerNorms, embeddings, row-parallel biases);
// kOut: split along the output dimension (column-parallel weights' rows, their biases), in
//       `parts` equal groups split alike (q, k and v of the QKV projection: 3);
// kIn: split along the input dimension (row-parallel weights' columns).
enum class Split { kWhole, kOut, kIn };

struct TensorInfo {
  const char* name;
  int layer;  // -1 outside the blocks
  size_t rows, cols;
  size_t offset;  // elements into the flat buffer
  bool decay;     // AdamW decays 2-D weights only
  Split split = Split::kWhole;
  int parts = 1;
  // Where the whole tensor sits in parameterLayout's buffer, and its shape there: this
  // entry may describe a rank's slice (shard.h).
  size_t globalOffset = 0, globalRows = 0, globalCols = 0;
  bool tiedCopy = false;  // the last pipeline stage's copy of wte (the first stage's is the master)
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

// The member of `p` that tensor `t` binds to.
template <class T>
T** tensorSlot(Params<T>& p, const TensorInfo& t) {
  const std::string_view n = t.name;
  if (t.layer < 0) return n == "wte" ? &p.wte : n == "wpe" ? &p.wpe : n == "lnfw" ? &p.lnfw : &p.lnfb;
  BlockParams<T>& b = p.blocks[static_cast<size_t>(t.layer)];
  for (auto [name, slot] : {std::pair{"ln1w", &b.ln1w},
                            {"ln1b", &b.ln1b},
                            {"qkvw", &b.qkvw},
                            {"qkvb", &b.qkvb},
                            {"attprojw", &b.attprojw},
                            {"attprojb", &b.attprojb},
                            {"ln2w", &b.ln2w},
                            {"ln2b", &b.ln2b},
                            {"fcw", &b.fcw},
                            {"fcb", &b.fcb},
                            {"fcprojw", &b.fcprojw}})
    if (n == name) return slot;
  return &b.fcprojb;
}

// Views of the tensors of a flat buffer laid out by `layout` (parameterLayout, or a rank's
// shardLayout); tensors the layout lacks stay null. `layers` sizes the block list.
template <class T>
Params<T> bindParams(const std::vector<TensorInfo>& layout, int layers, T* base) {
  Params<T> p{};
  p.blocks.assign(static_cast<size_t>(layers), BlockParams<T>{});
  for (const TensorInfo& t : layout) *tensorSlot(p, t) = base + t.offset;
  return p;
}
template <class T>
Params<T> bindParams(const ModelConfig& c, T* base) {
  return bindParams(parameterLayout(c), c.layers, base);
}

// GPT-2's initialisation from `seed`: weights normal(0, 0.02), the residual projections
// (attprojw, fcprojw) scaled by 1/sqrt(2L), biases 0, LayerNorm weights 1.
void initParams(const ModelConfig& c, float* base, uint64_t seed);

}  // namespace gpt
