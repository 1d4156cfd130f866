// SPDX-License-Identifier: BSD-3-Clause
#include "params.h"

#include <cmath>
#include <cstring>
#include <string_view>

#include "rng.h"

namespace gpt {

std::vector<TensorInfo> parameterLayout(const ModelConfig& c) {
  const size_t C = static_cast<size_t>(c.channels), V = static_cast<size_t>(c.vocab);
  std::vector<TensorInfo> out;
  size_t offset = 0;
  auto add = [&](const char* name, int layer, size_t rows, size_t cols, bool decay, Split split = Split::kWhole,
                 int parts = 1) {
    TensorInfo t{name, layer, rows, cols, offset, decay, split, parts};
    t.globalOffset = offset, t.globalRows = rows, t.globalCols = cols;
    out.push_back(t);
    offset += rows * cols;
  };
  add("wte", -1, V, C, true);
  add("wpe", -1, static_cast<size_t>(c.maxSeq), C, true);
  for (int l = 0; l < c.layers; ++l) {
    add("ln1w", l, 1, C, false);
    add("ln1b", l, 1, C, false);
    add("qkvw", l, 3 * C, C, true, Split::kOut, 3);  // column-parallel: q, k, v of this rank's heads
    add("qkvb", l, 1, 3 * C, false, Split::kOut, 3);
    add("attprojw", l, C, C, true, Split::kIn);  // row-parallel
    add("attprojb", l, 1, C, false);
    add("ln2w", l, 1, C, false);
    add("ln2b", l, 1, C, false);
    add("fcw", l, 4 * C, C, true, Split::kOut);  // column-parallel
    add("fcb", l, 1, 4 * C, false, Split::kOut);
    add("fcprojw", l, C, 4 * C, true, Split::kIn);  // row-parallel
    add("fcprojb", l, 1, C, false);
  }
  add("lnfw", -1, 1, C, false);
  add("lnfb", -1, 1, C, false);
  return out;
}

size_t parameterCount(const ModelConfig& c) {
  const std::vector<TensorInfo> layout = parameterLayout(c);
  return layout.back().offset + layout.back().size();
}

void initParams(const ModelConfig& c, float* base, uint64_t seed) {
  Rng rng(seed);
  const float residualScale = 1.0f / std::sqrt(2.0f * static_cast<float>(c.layers));
  for (const TensorInfo& t : parameterLayout(c)) {
    float* p = base + t.offset;
    const std::string_view name = t.name;
    if (name == "ln1w" || name == "ln2w" || name == "lnfw") {
      for (size_t i = 0; i < t.size(); ++i) p[i] = 1.0f;
    } else if (t.rows == 1) {
      std::memset(p, 0, t.size() * sizeof(float));  // biases and LayerNorm shifts
    } else {
      const float std = 0.02f * (name == "attprojw" || name == "fcprojw" ? residualScale : 1.0f);
      for (size_t i = 0; i < t.size(); ++i) p[i] = std * rng.normal();
    }
  }
}

}  // namespace gpt
