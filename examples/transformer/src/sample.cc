// SPDX-License-Identifier: BSD-3-Clause
#include "sample.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "rng.h"

namespace gpt {

std::string generate(Model<float>& m, const std::string& prompt, int count, float temperature, int topK,
                     uint64_t seed) {
  Rng rng(seed);
  std::vector<int> ctx(prompt.begin(), prompt.end());
  for (int& t : ctx) t &= 0xff;
  if (ctx.empty()) ctx.push_back('\n');
  std::string out;
  const int V = m.config.vocab;
  std::vector<float> p(static_cast<size_t>(V));
  std::vector<int> order(static_cast<size_t>(V));
  for (int i = 0; i < count; ++i) {
    const int Tn = std::min<int>(static_cast<int>(ctx.size()), m.config.maxSeq);
    const int* window = ctx.data() + ctx.size() - static_cast<size_t>(Tn);
    forward(m, window, nullptr, 1, Tn);
    const float* logits = m.acts[0].logits.data() + static_cast<size_t>(Tn - 1) * V;
    std::iota(order.begin(), order.end(), 0);
    const int k = topK > 0 ? std::min(topK, V) : V;
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int a, int b) { return logits[a] > logits[b]; });
    const float t = std::max(temperature, 1e-4f);
    double sum = 0;
    for (int j = 0; j < k; ++j) {
      p[static_cast<size_t>(j)] = std::exp((logits[order[static_cast<size_t>(j)]] - logits[order[0]]) / t);
      sum += p[static_cast<size_t>(j)];
    }
    double u = rng.uniform() * sum;
    int pick = order[static_cast<size_t>(k - 1)];
    for (int j = 0; j < k; ++j) {
      u -= p[static_cast<size_t>(j)];
      if (u <= 0) {
        pick = order[static_cast<size_t>(j)];
        break;
      }
    }
    ctx.push_back(pick);
    out.push_back(static_cast<char>(pick));
  }
  return out;
}

}  // namespace gpt
