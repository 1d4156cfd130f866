// SPDX-License-Identifier: BSD-3-Clause
#include "grid.h"

#include <stdexcept>

#include "shard.h"

namespace gpt {

std::string resolveGrid(Grid& g, int worldSize, const ModelConfig& c, int seq, bool sequenceParallel) {
  if (g.tp < 1 || g.pp < 1 || g.dp < 0) return "--tp and --pp must be at least 1, --dp at least 0 (0: the rest)";
  if (g.dp == 0) {
    if (worldSize % (g.tp * g.pp) != 0)
      return "--tp " + std::to_string(g.tp) + " x --pp " + std::to_string(g.pp) + " does not divide the " +
             std::to_string(worldSize) + " ranks";
    g.dp = worldSize / (g.tp * g.pp);
  }
  if (g.size() != worldSize)
    return "--dp " + std::to_string(g.dp) + " x --pp " + std::to_string(g.pp) + " x --tp " + std::to_string(g.tp) +
           " = " + std::to_string(g.size()) + " ranks, but " + std::to_string(worldSize) + " were started";
  const std::string split = splitProblem(c, g.tp, g.pp);
  if (!split.empty()) return split;
  if (sequenceParallel && seq % g.tp != 0)
    return "--sp splits each sequence over the tensor-parallel ranks: --tp " + std::to_string(g.tp) +
           " does not divide --seq " + std::to_string(seq);
  return "";
}

std::array<cclComm_t, static_cast<size_t>(Group::kCount)> splitGroups(cclComm_t world, const Grid& g,
                                                                      bool fusedEmbedding) {
  int rank = 0;
  cclCommUserRank(world, &rank);
  const GridPlace at = placeOf(g, rank);
  std::array<cclComm_t, static_cast<size_t>(Group::kCount)> out{};
  out[static_cast<size_t>(Group::kWorld)] = world;
  auto split = [&](Group which, int color, int key) {
    cclComm_t c = nullptr;
    if (cclCommSplit(world, color, key, &c, nullptr) != cclSuccess) {
      const std::string why = cclGetLastError(world);
      for (cclComm_t made : out)
        if (made && made != world) cclCommDestroy(made);
      throw std::runtime_error("cclCommSplit: " + why);
    }
    out[static_cast<size_t>(which)] = c;
  };
  split(Group::kTp, at.d * g.pp + at.p, at.t);
  split(Group::kPp, at.d * g.tp + at.t, at.p);
  split(Group::kDp, at.p * g.tp + at.t, at.d);
  if (g.pp > 1) {
    const bool ends = at.p == 0 || at.p == g.pp - 1;
    if (fusedEmbedding)
      split(Group::kEmb, ends ? at.t : CCL_SPLIT_NOCOLOR, at.d * 2 + (at.p == 0 ? 0 : 1));
    else
      split(Group::kEmb, ends ? at.d * g.tp + at.t : CCL_SPLIT_NOCOLOR, at.p);
  }
  return out;
}

}  // namespace gpt
