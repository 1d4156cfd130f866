// SPDX-License-Identifier: BSD-3-Clause
// The process grid: world = dp x pp x tp ranks, tp fastest-varying, so world rank
// r = (d * pp + p) * tp + t. A rank's communicators come from cclCommSplit of the world's:
// its tensor-parallel group (same d, p), its pipeline (same d, t), its data-parallel group
// (same p, t) and, with more than one stage, the tied-embedding pair (first and last stage
// of its pipeline).
#pragma once

#include <array>
#include <string>

#include "ccl/ccl.h"
#include "comm.h"
#include "config.h"

namespace gpt {

struct Grid {
  int dp = 1, pp = 1, tp = 1;
  int size() const { return dp * pp * tp; }
};

struct GridPlace {
  int d = 0, p = 0, t = 0;
};

inline GridPlace placeOf(const Grid& g, int rank) { return {rank / (g.tp * g.pp), (rank / g.tp) % g.pp, rank % g.tp}; }
inline int rankOf(const Grid& g, const GridPlace& at) { return (at.d * g.pp + at.p) * g.tp + at.t; }

// Fills in dp when it is 0 (the world's ranks that tp x pp leaves), then says why `g` cannot
// train model `c` on `worldSize` ranks with sequence length `seq` (empty when it can).
std::string resolveGrid(Grid& g, int worldSize, const ModelConfig& c, int seq, bool sequenceParallel);

// This rank's communicators, split from `world` (every world rank must call it, in the
// same order as every other split of `world`). Group::kWorld is `world` itself; kEmb is null
// with one stage or on a middle stage. kEmb pairs the first and last stage of a pipeline, or
// with `fusedEmbedding` gathers the first and last stages of every pipeline of the rank's
// tensor-parallel place (Optimus-CC's fused embedding synchronisation: one collective sums
// wte's gradient over both stages and every data-parallel rank). Throws
// std::runtime_error when a split fails.
std::array<cclComm_t, static_cast<size_t>(Group::kCount)> splitGroups(cclComm_t world, const Grid& g,
                                                                      bool fusedEmbedding = false);

}  // namespace gpt
