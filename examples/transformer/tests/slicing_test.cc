// SPDX-License-Identifier: BSD-3-Clause
// TeraPipe's planner: its cuts are the best of every cut on the grid (brute force), for slice
// times that grow with length and context; uniform cuts and predictions; and the schedule
// of (micro-batch, slice) units: deadlock-free, each micro-batch's slices backward from the
// last.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "schedule.h"
#include "slicing.h"

namespace gpt {
namespace {

// t = a * length + b * length * end (attention over the context) + c per slice.
SliceTimes synthetic(int seq, int granularity, double a, double b, double c) {
  SliceTimes t{seq, granularity, {}};
  const int n = t.points();
  t.table.assign(static_cast<size_t>(n) * n, 0.0);
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j) {
      const double len = t.position(j) - t.position(i);
      t.table[static_cast<size_t>(i) * n + j] = a * len + b * len * t.position(j) + c;
    }
  return t;
}

// The best prediction over every subset of grid points as cuts.
double bruteForce(const SliceTimes& t, int stages, int m) {
  const int inner = t.points() - 2;
  double best = INFINITY;
  for (unsigned mask = 0; mask < (1u << inner); ++mask) {
    std::vector<int> bounds = {0};
    for (int k = 0; k < inner; ++k)
      if (mask >> k & 1u) bounds.push_back(t.position(k + 1));
    bounds.push_back(t.seq);
    best = std::min(best, predictedTime(t, bounds, stages, m));
  }
  return best;
}

TEST(Slicing, PlanIsTheBestCutOnTheGrid) {
  for (auto [a, b, c] :
       {std::tuple{1.0, 0.0, 0.0}, std::tuple{1.0, 0.01, 0.5}, std::tuple{0.2, 0.05, 3.0}, std::tuple{1.0, 0.0, 20.0}})
    for (int stages : {1, 2, 4, 8})
      for (int m : {1, 3}) {
        const SliceTimes t = synthetic(100, 8, a, b, c);  // 13 grid points, the last slice short
        const SlicePlan plan = planSlices(t, stages, m);
        EXPECT_NEAR(plan.predicted, bruteForce(t, stages, m), 1e-9) << a << " " << b << " " << c << " p" << stages;
        EXPECT_EQ(plan.bounds.front(), 0);
        EXPECT_EQ(plan.bounds.back(), 100);
        EXPECT_NEAR(predictedTime(t, plan.bounds, stages, m), plan.predicted, 1e-9);
      }
  // More stages favour more slices; a large per-slice cost fewer.
  const SliceTimes t = synthetic(128, 8, 1.0, 0.0, 2.0);
  EXPECT_GT(planSlices(t, 8, 1).bounds.size(), planSlices(t, 2, 1).bounds.size());
  EXPECT_EQ(planSlices(t, 1, 1).bounds, (std::vector<int>{0, 128})) << "one stage: no reason to cut";
}

TEST(Slicing, UniformCutsOnTheGrid) {
  const SliceTimes t = synthetic(128, 16, 1, 0, 0);
  EXPECT_EQ(uniformSlices(t, 4), (std::vector<int>{0, 32, 64, 96, 128}));
  EXPECT_EQ(uniformSlices(t, 1), (std::vector<int>{0, 128}));
  EXPECT_EQ(uniformSlices(t, 100).size(), 9u) << "at most one slice per grid step";
  EXPECT_THROW(predictedTime(t, {0, 7, 128}, 2, 1), std::invalid_argument);
}

TEST(Slicing, UnitScheduleRunsEachMicrobatchsSlicesBackwardFromTheLast) {
  for (int p = 1; p <= 4; ++p)
    for (int m = 1; m <= 3; ++m)
      for (int s = 1; s <= 4; ++s) {
        const auto all = pipelineSchedules(PipeSchedule::kGPipe, p, m, s);
        EXPECT_NO_THROW(simulatePipeline(all, [](int, const Action&) { return 1.0; }));
        std::vector<int> backward;
        for (const Action& a : all[0])
          if (a.kind == Action::kBackward) backward.push_back(a.microbatch);
        ASSERT_EQ(backward.size(), static_cast<size_t>(m * s));
        for (int mb = 0; mb < m; ++mb)
          for (int k = 0; k < s; ++k) EXPECT_EQ(backward[static_cast<size_t>(mb * s + k)], mb * s + (s - 1 - k));
      }
  EXPECT_THROW(pipelineSchedules(PipeSchedule::k1F1B, 2, 2, 2), std::invalid_argument);
}

}  // namespace
}  // namespace gpt
