// SPDX-License-Identifier: BSD-3-Clause
// TeraPipe's choice of token slices (Li et al. 2021). A micro-batch's sequence of T tokens
// is cut into slices that flow through the p stages one after another; with slice i taking
// t_i on a stage (forward and backward; it grows with the slice's length and with the
// context before it), m micro-batches take about m * sum t_i + (p - 1) * max t_i. The
// planner minimises that over cuts on a grid of `granularity` tokens: for every candidate
// cap on max t_i, a dynamic program finds the least sum of slices under the cap.
#pragma once

#include <cstddef>
#include <vector>

namespace gpt {

// Slice times on the grid: positions k * granularity (and T), n + 1 of them; time(i, j) is
// the time of the slice from position i to position j (i < j), as measured.
struct SliceTimes {
  int seq = 0, granularity = 1;
  std::vector<double> table;  // (n + 1) x (n + 1), row-major, i < j used
  int points() const { return (seq + granularity - 1) / granularity + 1; }
  int position(int k) const { return k * granularity < seq ? k * granularity : seq; }
  double time(int i, int j) const {
    return table[static_cast<size_t>(i) * static_cast<size_t>(points()) + static_cast<size_t>(j)];
  }
};

struct SlicePlan {
  std::vector<int> bounds;  // 0 = b_0 < b_1 < ... < b_S = T
  double predicted = 0;     // m * sum t_i + (p - 1) * max t_i, seconds
};

// n slices as equal as the grid allows (boundaries on it).
std::vector<int> uniformSlices(const SliceTimes& t, int n);
// The prediction for given boundaries (on the grid).
double predictedTime(const SliceTimes& t, const std::vector<int>& bounds, int stages, int microbatches);
// The best boundaries.
SlicePlan planSlices(const SliceTimes& t, int stages, int microbatches);

}  // namespace gpt
