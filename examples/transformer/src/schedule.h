// SPDX-License-Identifier: BSD-3-Clause
// Pipeline schedules as data: for each stage, the list of what it does in one step, in
// order: the forward or backward of a micro-batch, or a group of transfers (sends and
// receives that sit in one cclGroupStart/End because they depend on each other). Every
// action and transfer carries its phase, so that a later change can treat phases apart
// (compress only the cool-down's sends, say) without touching the executor.
//
// GPipe: every forward, then every backward. 1F1B (PipeDream-flush, as Megatron runs it):
// stage s of p runs min(p - s - 1, m) forwards (warm-up), then alternates one forward and
// one backward (steady state), then runs the remaining backwards (cool-down), so that it
// keeps at most p - s micro-batches' activations. A transfer's phase is the phase of the
// action that produced its data, the same at both ends.
//
// Local updates (Laskin et al. 2020) replace backpropagation across stages by local losses:
// "local" (chunked: every stage but the last is a chunk of blocks with a small head and loss
// of its own at its end) runs each micro-batch's forward and, at once, the local backward,
// and no gradient crosses a stage boundary; "local-overlap" (overlapping chunks: the local
// head of stage s sits after the first block of stage s + 1, which both losses train) sends
// that head's gradient back one stage, right after the forward that computed it.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace gpt {

enum class PipeSchedule { kGPipe, k1F1B, kLocal, kLocalOverlap };
// Whether stages train on local losses (a head per stage but the last).
inline bool localUpdates(PipeSchedule s) { return s == PipeSchedule::kLocal || s == PipeSchedule::kLocalOverlap; }
const char* scheduleName(PipeSchedule s);
bool scheduleFromName(const std::string& name, PipeSchedule* out);

enum class Phase { kWarmup, kSteady, kCooldown };
const char* phaseName(Phase p);

struct Transfer {
  enum Kind { kSendActivation, kRecvActivation, kSendGradient, kRecvGradient } kind;
  int microbatch;
  Phase phase;
  bool send() const { return kind == kSendActivation || kind == kSendGradient; }
  // The stage at the other end, from stage `stage`.
  int peer(int stage) const { return kind == kSendActivation || kind == kRecvGradient ? stage + 1 : stage - 1; }
};

// kBackward: the backward of the stage's own loss (the model's head on the last stage, else
// the gradient received from the next stage; with "local", of the local head at the stage's
// end). kLocalBackward ("local-overlap", stages after the first): the previous stage's local
// head, after this stage's first block, backward through that block only.
struct Action {
  enum Kind { kForward, kBackward, kTransfer, kLocalBackward } kind;
  int microbatch = -1;  // kForward, kBackward
  Phase phase = Phase::kSteady;
  std::vector<Transfer> transfers;  // kTransfer
};

// Every stage's actions for one step of `microbatches` micro-batches over `stages` stages.
// With `slices` > 1 (TeraPipe's token slices, GPipe only) the units that flow are (micro-batch,
// slice) pairs, numbered mb * slices + slice: every unit's forward in that order, then the
// backwards of each micro-batch's slices from the last to the first.
std::vector<std::vector<Action>> pipelineSchedules(PipeSchedule kind, int stages, int microbatches, int slices = 1);

// The most micro-batches whose activations a stage keeps at once under `actions`.
int activationSlots(const std::vector<Action>& actions);

// Runs the schedules in simulated time: computing takes duration(stage, action), transfers
// complete when both ends have posted them (as a rendezvous send would; sends are matched to
// receives in order per pair of stages, as ccl matches them). Returns the time each stage
// finishes; throws std::logic_error when the schedules deadlock or a receive would take
// another micro-batch's data.
std::vector<double> simulatePipeline(const std::vector<std::vector<Action>>& schedules,
                                     const std::function<double(int stage, const Action&)>& duration);

}  // namespace gpt
