// SPDX-License-Identifier: BSD-3-Clause
// Shards of the model: stages cover every block once; the shards of every rank of a grid
// rebuild the whole parameter buffer exactly, each value spoken for by one rank; split
// tensors hold the slices Megatron gives them.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "shard.h"

namespace gpt {
namespace {

ModelConfig model() {
  ModelConfig c;
  c.layers = 5;
  c.channels = 32;
  c.heads = 4;
  c.maxSeq = 8;
  return c;
}

Shard shardOf(const ModelConfig& c, int tp, int tpRank, int pp, int stage) {
  Shard s;
  s.tp = tp, s.tpRank = tpRank, s.pp = pp, s.stage = stage;
  std::tie(s.firstLayer, s.endLayer) = stageLayers(c.layers, pp, stage);
  return s;
}

TEST(Shard, StagesCoverEveryBlockOnce) {
  for (int layers = 1; layers <= 12; ++layers)
    for (int pp = 1; pp <= layers; ++pp) {
      int next = 0, smallest = layers, largest = 0;
      for (int s = 0; s < pp; ++s) {
        const auto [first, end] = stageLayers(layers, pp, s);
        EXPECT_EQ(first, next);
        smallest = std::min(smallest, end - first);
        largest = std::max(largest, end - first);
        next = end;
      }
      EXPECT_EQ(next, layers);
      EXPECT_GE(smallest, 1);
      EXPECT_LE(largest - smallest, 1);
    }
}

TEST(Shard, EveryGridRebuildsTheWholeModel) {
  const ModelConfig c = model();
  const size_t P = parameterCount(c);
  std::vector<float> whole(P);
  std::iota(whole.begin(), whole.end(), 1.0f);
  for (int tp : {1, 2, 4})
    for (int pp : {1, 2, 3, 5}) {
      SCOPED_TRACE("tp" + std::to_string(tp) + " pp" + std::to_string(pp));
      std::vector<float> rebuilt(P, 0.0f);
      std::vector<int> spoken(P, 0);
      size_t held = 0;
      for (int stage = 0; stage < pp; ++stage)
        for (int t = 0; t < tp; ++t) {
          const Shard s = shardOf(c, tp, t, pp, stage);
          ASSERT_EQ(shardProblem(c, s), "");
          const std::vector<TensorInfo> layout = shardLayout(c, s);
          const size_t n = shardCount(layout);
          held += n;
          std::vector<float> local(n, -1.0f);
          extractShard(layout, s, whole.data(), local.data());
          for (float v : local) EXPECT_GE(v, 1.0f) << "an element of the shard was not filled";
          std::vector<float> mine(P, 0.0f);
          insertShard(layout, s, local.data(), 0, n, mine.data());
          for (size_t i = 0; i < P; ++i)
            if (mine[i] != 0.0f) {
              rebuilt[i] += mine[i];
              ++spoken[i];
            }
        }
      EXPECT_EQ(rebuilt, whole);
      EXPECT_TRUE(std::all_of(spoken.begin(), spoken.end(), [](int k) { return k == 1; }));
      // Split tensors are held once; whole ones tp times; wte once more on the last stage.
      EXPECT_GE(held, P);
    }
}

TEST(Shard, MegatronSlices) {
  const ModelConfig c = model();
  const size_t C = 32;
  const std::vector<TensorInfo> global = parameterLayout(c);
  auto find = [](const std::vector<TensorInfo>& l, const std::string& name, int layer) {
    for (const TensorInfo& t : l)
      if (name == t.name && t.layer == layer) return t;
    ADD_FAILURE() << name;
    return l.front();
  };
  std::vector<float> whole(parameterCount(c));
  std::iota(whole.begin(), whole.end(), 0.0f);
  const Shard s = shardOf(c, 2, 1, 1, 0);
  const std::vector<TensorInfo> layout = shardLayout(c, s);
  std::vector<float> local(shardCount(layout));
  extractShard(layout, s, whole.data(), local.data());
  // qkvw: rows of this rank's heads in each of q, k and v.
  const TensorInfo qkv = find(layout, "qkvw", 0), qkvG = find(global, "qkvw", 0);
  EXPECT_EQ(qkv.rows, 3 * C / 2);
  EXPECT_EQ(qkv.cols, C);
  for (size_t part = 0; part < 3; ++part)
    EXPECT_EQ(local[qkv.offset + part * (C / 2) * C], whole[qkvG.offset + (part * C + C / 2) * C]) << part;
  // attprojw: this rank's half of the columns of every row.
  const TensorInfo proj = find(layout, "attprojw", 0), projG = find(global, "attprojw", 0);
  EXPECT_EQ(proj.rows, C);
  EXPECT_EQ(proj.cols, C / 2);
  EXPECT_EQ(local[proj.offset + 3 * (C / 2)], whole[projG.offset + 3 * C + C / 2]);
  // fcb: the second half; attprojb (row-parallel bias): whole.
  const TensorInfo fcb = find(layout, "fcb", 0), fcbG = find(global, "fcb", 0);
  EXPECT_EQ(fcb.size(), 2 * C);
  EXPECT_EQ(local[fcb.offset], whole[fcbG.offset + 2 * C]);
  EXPECT_EQ(find(layout, "attprojb", 0).size(), C);
  EXPECT_FALSE(speaksFor(find(layout, "attprojb", 0), s));
  EXPECT_TRUE(speaksFor(fcb, s));
}

TEST(Shard, StagesHoldTheirEnds) {
  const ModelConfig c = model();
  const auto names = [&](const Shard& s) {
    std::vector<std::string> out;
    for (const TensorInfo& t : shardLayout(c, s))
      if (t.layer < 0) out.push_back(std::string(t.name) + (t.tiedCopy ? "*" : ""));
    return out;
  };
  EXPECT_EQ(names(shardOf(c, 1, 0, 3, 0)), (std::vector<std::string>{"wte", "wpe"}));
  EXPECT_EQ(names(shardOf(c, 1, 0, 3, 1)), std::vector<std::string>{});
  EXPECT_EQ(names(shardOf(c, 1, 0, 3, 2)), (std::vector<std::string>{"wte*", "lnfw", "lnfb"}));
  EXPECT_EQ(names(shardOf(c, 1, 0, 1, 0)), (std::vector<std::string>{"wte", "wpe", "lnfw", "lnfb"}));
}

TEST(Shard, ImpossibleShardsAreClearErrors) {
  const ModelConfig c = model();
  EXPECT_NE(shardProblem(c, shardOf(c, 3, 0, 1, 0)).find("does not divide --heads"), std::string::npos);
  Shard s = shardOf(c, 1, 0, 5, 0);
  s.pp = 6;
  EXPECT_NE(shardProblem(c, s).find("exceeds --layers"), std::string::npos);
}

}  // namespace
}  // namespace gpt
