// SPDX-License-Identifier: BSD-3-Clause
// Which part of the model one rank holds under tensor and pipeline parallelism, and how its
// flat parameter buffer maps onto the whole model's (params.h). A pipeline stage holds a
// contiguous range of blocks, the first stage the embeddings, the last the final LayerNorm
// and the head (whose weight is wte, tied: the last stage keeps a copy). Within a stage a
// tensor-parallel rank holds every kWhole tensor and its slice of the split ones.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "config.h"
#include "params.h"

namespace gpt {

struct Shard {
  int tp = 1, tpRank = 0;            // tensor-parallel group size and this rank's place in it
  bool sequenceParallel = false;     // LayerNorm and residual regions split by rows (tokens)
  int pp = 1, stage = 0;             // pipeline stages and this rank's stage
  int firstLayer = 0, endLayer = 0;  // the blocks [firstLayer, endLayer)

  bool embedding() const { return stage == 0; }
  bool head() const { return stage == pp - 1; }
  bool holds(int layer) const { return layer >= firstLayer && layer < endLayer; }
  bool whole() const { return tp == 1 && pp == 1; }
};

// The whole model on one rank.
Shard wholeModel(const ModelConfig& c);

// The blocks [first, end) of `stage` of `pp`: contiguous and as even as possible, the
// first (layers % pp) stages one block more (the last stage also runs the head).
std::pair<int, int> stageLayers(int layers, int pp, int stage);

// Why model `c` cannot be split over `tp` tensor-parallel ranks and `pp` stages (empty when
// it can): whole heads per rank, a block per stage.
std::string splitProblem(const ModelConfig& c, int tp, int pp);

// Why `s` cannot hold part of a model `c` (empty when it can).
std::string shardProblem(const ModelConfig& c, const Shard& s);

// This rank's tensors in parameterLayout's order, with offsets into its own flat buffer;
// each entry keeps the whole tensor's place (globalOffset, globalRows, globalCols).
std::vector<TensorInfo> shardLayout(const ModelConfig& c, const Shard& s);
size_t shardCount(const std::vector<TensorInfo>& layout);

// Whether this rank is the one that speaks for tensor `t` when every rank's copy is counted
// once (gradient norms, checkpoints): its own slice of a split tensor; of a whole tensor the
// tensor-parallel rank 0's copy; of wte the first stage's.
bool speaksFor(const TensorInfo& t, const Shard& s);

// Calls f(globalIndex, localIndex, count) for each contiguous run of `t`'s elements in this
// rank's buffer and in the whole model's.
template <class F>
void forEachRun(const TensorInfo& t, const Shard& s, F&& f) {
  if (t.split == Split::kWhole) return f(t.globalOffset, t.offset, t.size());
  // Biases are vectors: their "rows" are their elements.
  const bool vector = t.globalRows == 1;
  const size_t outer = vector ? t.globalCols : t.globalRows, inner = vector ? 1 : t.globalCols;
  const size_t tp = static_cast<size_t>(s.tp), rank = static_cast<size_t>(s.tpRank);
  if (t.split == Split::kOut) {
    const size_t part = outer / static_cast<size_t>(t.parts), mine = part / tp;
    for (size_t k = 0; k < static_cast<size_t>(t.parts); ++k)
      f(t.globalOffset + (k * part + rank * mine) * inner, t.offset + k * mine * inner, mine * inner);
  } else {
    const size_t mine = inner / tp;
    for (size_t o = 0; o < outer; ++o) f(t.globalOffset + o * inner + rank * mine, t.offset + o * mine, mine);
  }
}

// Copies this rank's part of a whole-model buffer `global` into its own buffer `local`.
template <class T, class G>
void extractShard(const std::vector<TensorInfo>& layout, const Shard& s, const G* global, T* local) {
  for (const TensorInfo& t : layout)
    forEachRun(t, s, [&](size_t g, size_t l, size_t n) {
      for (size_t i = 0; i < n; ++i) local[l + i] = static_cast<T>(global[g + i]);
    });
}

// Writes the elements this rank speaks for (speaksFor) from `local` into `global`, and only
// those of [begin, end) of the local buffer: summing every rank's `global` (zero elsewhere)
// then gives the whole model, each value exactly once.
void insertShard(const std::vector<TensorInfo>& layout, const Shard& s, const float* local, size_t begin, size_t end,
                 float* global);

}  // namespace gpt
