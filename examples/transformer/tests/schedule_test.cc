// SPDX-License-Identifier: BSD-3-Clause
// Pipeline schedules as data: every stage runs each micro-batch's forward and backward once,
// in order; no schedule deadlocks when sends wait for their receives; 1F1B keeps at most
// p - s micro-batches in flight; with equal stages both schedules take (m + p - 1) slots, the
// bubble of theory; phases are tagged as Megatron counts them; and the simulator does catch
// deadlocks and misrouted micro-batches.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "schedule.h"

namespace gpt {
namespace {

constexpr PipeSchedule kKinds[] = {PipeSchedule::kGPipe, PipeSchedule::k1F1B};
constexpr PipeSchedule kAllKinds[] = {PipeSchedule::kGPipe, PipeSchedule::k1F1B, PipeSchedule::kLocal,
                                      PipeSchedule::kLocalOverlap};

TEST(Schedule, EachMicrobatchOnceInOrderWithoutDeadlock) {
  for (PipeSchedule kind : kAllKinds)
    for (int p = 1; p <= 8; ++p)
      for (int m = 1; m <= 12; ++m) {
        SCOPED_TRACE(std::string(scheduleName(kind)) + " p" + std::to_string(p) + " m" + std::to_string(m));
        const auto all = pipelineSchedules(kind, p, m);
        ASSERT_EQ(all.size(), static_cast<size_t>(p));
        for (int s = 0; s < p; ++s) {
          std::map<int, int> forwards, backwards;
          std::set<int> received;
          for (const Action& a : all[static_cast<size_t>(s)]) {
            if (a.kind == Action::kForward) {
              ++forwards[a.microbatch];
              if (s > 0) {
                EXPECT_TRUE(received.count(a.microbatch)) << "forward before its activation arrived";
              }
            }
            if (a.kind == Action::kBackward) {
              ++backwards[a.microbatch];
              EXPECT_EQ(forwards[a.microbatch], 1) << "backward before its forward";
            }
            for (const Transfer& t : a.transfers)
              if (t.kind == Transfer::kRecvActivation) received.insert(t.microbatch);
          }
          for (int mb = 0; mb < m; ++mb) {
            EXPECT_EQ(forwards[mb], 1);
            EXPECT_EQ(backwards[mb], 1);
          }
        }
        EXPECT_NO_THROW(simulatePipeline(all, [](int, const Action&) { return 1.0; }));
      }
}

TEST(Schedule, ActivationsInFlight) {
  for (int p = 1; p <= 8; ++p)
    for (int m = 1; m <= 12; ++m) {
      const auto gpipe = pipelineSchedules(PipeSchedule::kGPipe, p, m);
      const auto ofob = pipelineSchedules(PipeSchedule::k1F1B, p, m);
      for (int s = 0; s < p; ++s) {
        EXPECT_EQ(activationSlots(gpipe[static_cast<size_t>(s)]), m);
        EXPECT_EQ(activationSlots(ofob[static_cast<size_t>(s)]), std::min(p - s, m)) << "p" << p << " m" << m;
      }
    }
}

// Equal stages, backward twice the forward, free transfers: both schedules finish after
// (m + p - 1) (tf + tb), so the bubble is (p - 1) / (m + p - 1).
TEST(Schedule, EqualStagesGiveTheTheoreticalBubble) {
  for (PipeSchedule kind : kKinds)
    for (int p = 1; p <= 8; ++p)
      for (int m = 1; m <= 12; ++m) {
        const auto all = pipelineSchedules(kind, p, m);
        const auto finish =
            simulatePipeline(all, [](int, const Action& a) { return a.kind == Action::kForward ? 1.0 : 2.0; });
        const double makespan = *std::max_element(finish.begin(), finish.end());
        EXPECT_DOUBLE_EQ(makespan, 3.0 * (m + p - 1)) << scheduleName(kind) << " p" << p << " m" << m;
        const double bubble = 1.0 - 3.0 * m * p / (p * makespan);
        EXPECT_NEAR(bubble, double(p - 1) / (m + p - 1), 1e-12);
      }
}

TEST(Schedule, PhasesAsMegatronCountsThem) {
  for (int p = 1; p <= 6; ++p)
    for (int m = 1; m <= 9; ++m) {
      const auto all = pipelineSchedules(PipeSchedule::k1F1B, p, m);
      for (int s = 0; s < p; ++s) {
        int warmup = 0, cooldown = 0;
        for (const Action& a : all[static_cast<size_t>(s)]) {
          if (a.kind == Action::kForward && a.phase == Phase::kWarmup) ++warmup;
          if (a.kind == Action::kBackward && a.phase == Phase::kCooldown) ++cooldown;
          if (a.kind == Action::kBackward) {
            EXPECT_NE(a.phase, Phase::kWarmup);
          }
          if (a.kind == Action::kForward) {
            EXPECT_NE(a.phase, Phase::kCooldown);
          }
        }
        EXPECT_EQ(warmup, std::min(p - s - 1, m));
        EXPECT_EQ(cooldown, std::min(p - s - 1, m));
      }
      // Both ends of every message agree on its micro-batch and phase, in order.
      for (int s = 0; s + 1 < p; ++s)
        for (auto [send, recv, from, to] : {std::tuple{Transfer::kSendActivation, Transfer::kRecvActivation, s, s + 1},
                                            std::tuple{Transfer::kSendGradient, Transfer::kRecvGradient, s + 1, s}}) {
          std::vector<std::pair<int, Phase>> sent, got;
          for (const Action& a : all[static_cast<size_t>(from)])
            for (const Transfer& t : a.transfers)
              if (t.kind == send) sent.emplace_back(t.microbatch, t.phase);
          for (const Action& a : all[static_cast<size_t>(to)])
            for (const Transfer& t : a.transfers)
              if (t.kind == recv) got.emplace_back(t.microbatch, t.phase);
          EXPECT_EQ(sent, got);
          EXPECT_EQ(sent.size(), static_cast<size_t>(m));
        }
    }
  const auto gpipe = pipelineSchedules(PipeSchedule::kGPipe, 3, 4);
  for (const Action& a : gpipe[0]) {
    if (a.kind != Action::kTransfer) {
      EXPECT_EQ(a.phase, a.kind == Action::kForward ? Phase::kWarmup : Phase::kCooldown);
    }
  }
}

// 1F1B with each send in a group of its own (sends first): two neighbours each wait for the
// other to receive.
TEST(Schedule, SimulatorFindsDeadlocksAndMisroutedMicrobatches) {
  auto split = pipelineSchedules(PipeSchedule::k1F1B, 2, 2);
  for (auto& stage : split) {
    std::vector<Action> out;
    for (const Action& a : stage) {
      if (a.kind != Action::kTransfer) {
        out.push_back(a);
        continue;
      }
      for (const Transfer& t : a.transfers) out.push_back({Action::kTransfer, -1, a.phase, {t}});
    }
    stage = out;
  }
  EXPECT_THROW(simulatePipeline(split, [](int, const Action&) { return 1.0; }), std::logic_error);
  auto swapped = pipelineSchedules(PipeSchedule::kGPipe, 2, 2);
  for (Action& a : swapped[1])
    for (Transfer& t : a.transfers)
      if (t.kind == Transfer::kRecvActivation) t.microbatch = 1 - t.microbatch;
  EXPECT_THROW(simulatePipeline(swapped, [](int, const Action&) { return 1.0; }), std::logic_error);
}

// Local updates: chunked stages send no gradient back and keep one micro-batch's
// activations; overlapping ones send one gradient per micro-batch (the previous stage's
// local head's), computed right after the forward, before their own backward.
TEST(Schedule, LocalUpdatesSendLittleOrNothingBack) {
  for (int p = 2; p <= 6; ++p)
    for (int m = 1; m <= 8; ++m) {
      const auto chunked = pipelineSchedules(PipeSchedule::kLocal, p, m);
      const auto overlap = pipelineSchedules(PipeSchedule::kLocalOverlap, p, m);
      for (int s = 0; s < p; ++s) {
        int sentBack = 0, local = 0;
        for (const Action& a : chunked[static_cast<size_t>(s)]) {
          EXPECT_NE(a.kind, Action::kLocalBackward);
          for (const Transfer& t : a.transfers)
            EXPECT_TRUE(t.kind == Transfer::kSendActivation || t.kind == Transfer::kRecvActivation);
        }
        EXPECT_EQ(activationSlots(chunked[static_cast<size_t>(s)]), 1);
        const std::vector<Action>& o = overlap[static_cast<size_t>(s)];
        for (size_t i = 0; i < o.size(); ++i) {
          for (const Transfer& t : o[i].transfers) sentBack += t.kind == Transfer::kSendGradient;
          if (o[i].kind != Action::kLocalBackward) continue;
          ++local;
          // Right after that micro-batch's forward (and the send of its activation).
          int back = static_cast<int>(i) - 1;
          while (back >= 0 && o[static_cast<size_t>(back)].kind == Action::kTransfer) --back;
          ASSERT_GE(back, 0);
          EXPECT_EQ(o[static_cast<size_t>(back)].kind, Action::kForward);
          EXPECT_EQ(o[static_cast<size_t>(back)].microbatch, o[i].microbatch);
        }
        EXPECT_EQ(sentBack, s > 0 ? m : 0);
        EXPECT_EQ(local, s > 0 ? m : 0);
        EXPECT_EQ(activationSlots(o), 1);
      }
    }
}

TEST(Schedule, Names) {
  PipeSchedule s;
  EXPECT_TRUE(scheduleFromName("gpipe", &s));
  EXPECT_EQ(s, PipeSchedule::kGPipe);
  EXPECT_TRUE(scheduleFromName("1f1b", &s));
  EXPECT_EQ(s, PipeSchedule::k1F1B);
  EXPECT_TRUE(scheduleFromName("local-overlap", &s));
  EXPECT_EQ(s, PipeSchedule::kLocalOverlap);
  EXPECT_FALSE(scheduleFromName("zb-h1", &s));
  EXPECT_THROW(pipelineSchedules(PipeSchedule::k1F1B, 0, 1), std::invalid_argument);
}

}  // namespace
}  // namespace gpt
