// SPDX-License-Identifier: BSD-3-Clause
#include "shard.h"

#include <algorithm>
#include <string_view>

namespace gpt {

Shard wholeModel(const ModelConfig& c) {
  Shard s;
  s.endLayer = c.layers;
  return s;
}

std::pair<int, int> stageLayers(int layers, int pp, int stage) {
  const int base = layers / pp, extra = layers % pp;
  const int first = stage * base + std::min(stage, extra);
  return {first, first + base + (stage < extra ? 1 : 0)};
}

std::string splitProblem(const ModelConfig& c, int tp, int pp) {
  if (tp < 1 || pp < 1) return "--tp and --pp must be at least 1";
  if (c.heads % tp != 0)
    return "--tp " + std::to_string(tp) + " does not divide --heads " + std::to_string(c.heads) +
           " (each tensor-parallel rank takes whole heads)";
  if (pp > c.layers)
    return "--pp " + std::to_string(pp) + " exceeds --layers " + std::to_string(c.layers) +
           " (each pipeline stage needs a block)";
  return "";
}

std::string shardProblem(const ModelConfig& c, const Shard& s) {
  const std::string split = splitProblem(c, s.tp, s.pp);
  if (!split.empty()) return split;
  if (s.tpRank < 0 || s.tpRank >= s.tp || s.stage < 0 || s.stage >= s.pp) return "rank outside its grid";
  const auto [first, end] = stageLayers(c.layers, s.pp, s.stage);
  if (s.firstLayer != first || s.endLayer != end) return "a stage's blocks differ from stageLayers";
  return "";
}

std::vector<TensorInfo> shardLayout(const ModelConfig& c, const Shard& s) {
  std::vector<TensorInfo> out;
  size_t offset = 0;
  for (TensorInfo t : parameterLayout(c)) {
    const std::string_view name = t.name;
    const bool keep = t.layer >= 0    ? s.holds(t.layer)
                      : name == "wte" ? s.embedding() || s.head()
                      : name == "wpe" ? s.embedding()
                                      : s.head();
    if (!keep) continue;
    const size_t tp = static_cast<size_t>(s.tp);
    const bool vector = t.rows == 1;
    if (t.split == Split::kOut) (vector ? t.cols : t.rows) /= tp;
    if (t.split == Split::kIn) t.cols /= tp;
    t.offset = offset;
    t.tiedCopy = name == "wte" && !s.embedding();
    offset += t.size();
    out.push_back(t);
  }
  return out;
}

size_t shardCount(const std::vector<TensorInfo>& layout) {
  return layout.empty() ? 0 : layout.back().offset + layout.back().size();
}

bool speaksFor(const TensorInfo& t, const Shard& s) {
  return !t.tiedCopy && (t.split != Split::kWhole || s.tpRank == 0);
}

void insertShard(const std::vector<TensorInfo>& layout, const Shard& s, const float* local, size_t begin, size_t end,
                 float* global) {
  for (const TensorInfo& t : layout) {
    if (!speaksFor(t, s)) continue;
    forEachRun(t, s, [&](size_t g, size_t l, size_t n) {
      const size_t lo = std::max(l, begin), hi = std::min(l + n, end);
      for (size_t i = lo; i < hi; ++i) global[g + (i - l)] = local[i];
    });
  }
}

}  // namespace gpt
