// SPDX-License-Identifier: BSD-3-Clause
#include "slicing.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace gpt {
namespace {

int pointOf(const SliceTimes& t, int position) {
  const int k = position / t.granularity;
  if (t.position(k) != position) {
    if (position == t.seq) return t.points() - 1;
    throw std::invalid_argument("slice boundary off the planner's grid");
  }
  return k;
}

}  // namespace

std::vector<int> uniformSlices(const SliceTimes& t, int n) {
  const int last = t.points() - 1;
  n = std::clamp(n, 1, last);
  std::vector<int> out;
  for (int s = 0; s <= n; ++s) out.push_back(t.position(static_cast<int>(static_cast<long>(s) * last / n)));
  return out;
}

double predictedTime(const SliceTimes& t, const std::vector<int>& bounds, int stages, int microbatches) {
  double sum = 0, most = 0;
  for (size_t s = 0; s + 1 < bounds.size(); ++s) {
    const double x = t.time(pointOf(t, bounds[s]), pointOf(t, bounds[s + 1]));
    sum += x;
    most = std::max(most, x);
  }
  return microbatches * sum + (stages - 1) * most;
}

SlicePlan planSlices(const SliceTimes& t, int stages, int microbatches) {
  const int n = t.points() - 1;
  std::vector<double> caps;
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j <= n; ++j) caps.push_back(t.time(i, j));
  std::sort(caps.begin(), caps.end());
  caps.erase(std::unique(caps.begin(), caps.end()), caps.end());
  const double inf = std::numeric_limits<double>::infinity();
  SlicePlan best;
  best.predicted = inf;
  std::vector<double> f(static_cast<size_t>(n) + 1);
  std::vector<int> from(static_cast<size_t>(n) + 1);
  for (double cap : caps) {
    // Least sum of slice times covering [0, point j) with every slice at most `cap`.
    std::fill(f.begin(), f.end(), inf);
    f[0] = 0;
    for (int j = 1; j <= n; ++j)
      for (int i = 0; i < j; ++i) {
        const double x = t.time(i, j);
        if (x <= cap && f[static_cast<size_t>(i)] + x < f[static_cast<size_t>(j)]) {
          f[static_cast<size_t>(j)] = f[static_cast<size_t>(i)] + x;
          from[static_cast<size_t>(j)] = i;
        }
      }
    if (f[static_cast<size_t>(n)] == inf) continue;
    const double total = microbatches * f[static_cast<size_t>(n)] + (stages - 1) * cap;
    if (total >= best.predicted) continue;
    best.predicted = total;
    best.bounds.clear();
    for (int j = n; j > 0; j = from[static_cast<size_t>(j)]) best.bounds.push_back(t.position(j));
    best.bounds.push_back(0);
    std::reverse(best.bounds.begin(), best.bounds.end());
  }
  // The cap bounds the largest slice; the plan's own largest may be smaller.
  best.predicted = predictedTime(t, best.bounds, stages, microbatches);
  return best;
}

}  // namespace gpt
