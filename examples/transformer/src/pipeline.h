// SPDX-License-Identifier: BSD-3-Clause
// Runs this rank's part of a pipeline-parallel step: the actions of its stage's schedule
// (schedule.h) over its model shard, with activations and their gradients sent to the
// neighbouring stages through the communication layer (pp.fwd, pp.bwd). With one stage it
// is gradient accumulation over the micro-batches.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "comm.h"
#include "data.h"
#include "local_head.h"
#include "model.h"
#include "schedule.h"
#include "slicing.h"
#include "timeline.h"

namespace gpt {

class Pipeline {
 public:
  // With local updates (schedule.h) the stages that host a local head pass it. With token
  // slices (TeraPipe), `sliceBounds` cuts [0, seq) at its values (first 0, last seq); empty:
  // whole sequences.
  Pipeline(Model<float>& m, Comm& comm, PipeSchedule kind, int microbatches, int seq, Timeline* timeline,
           LocalHead* localHead = nullptr, std::vector<int> sliceBounds = {});

  // One step's forwards and backwards of batches[i], micro-batch i (every rank of a pipeline
  // passes the same batches); each micro-batch's loss is weighted by lossScale in the
  // gradients, which accumulate into the model's. Returns the sum over micro-batches of
  // headForward (0 off the last stage).
  double step(const std::vector<Batch>& batches, float lossScale);

  // Called with a block's index during the step's last backward on this stage, right after
  // the block's backward: its gradient is then final (--overlap-dp starts its all-reduce).
  void setBlockDone(std::function<void(int)> done) { blockDone_ = std::move(done); }

  // Forward only (validation): `b` holds `sequences` sequences. Returns headForward (0 off
  // the last stage).
  double evaluate(const Batch& b, int sequences);

  const std::vector<Action>& actions() const { return schedules_[static_cast<size_t>(stage_)]; }
  const std::vector<std::vector<Action>>& schedules() const { return schedules_; }
  // The local head's loss over the last step's micro-batches (summed as headForward sums).
  double localLoss() const { return localLoss_; }

 private:
  int acquire(int microbatch);
  void window(int unit);              // the model's rows for a unit's computation
  size_t unitOffset(int unit) const;  // where a unit's rows start in the micro-batch's buffers (values)
  size_t unitCount(int unit) const;   // the values a unit's rows hold (what its transfers carry)
  void compute(const Action& a, const Batch& b, float lossScale, double& loss);
  void transfer(const Action& a);

  Model<float>& model_;
  Comm& comm_;
  std::function<void(int)> blockDone_;
  size_t lastBackward_ = SIZE_MAX;  // index in actions() of the step's last backward
  size_t running_ = 0;              // index in actions() of the action running
  Timeline* timeline_;
  int stage_, seq_;
  std::vector<int> bounds_;  // slice boundaries
  int slices_;
  std::vector<std::vector<Action>> schedules_;
  int slots_;
  PipeSchedule kind_;
  LocalHead* localHead_;
  double localLoss_ = 0;
  std::vector<int> slotOf_;                 // per micro-batch; -1: none
  std::vector<int> free_;                   // activation slots not in use
  std::vector<std::vector<float>> gradIn_;  // per slot: the received gradient of the stage's output
};

// Times forward and backward of this rank's part of every slice on the planner's grid
// (slicing.h) of one sequence of `seq` tokens, the best of `repeats` runs each; the model's
// gradients and op times are left as they were found. Collective over a tensor-parallel
// group (its sums run in the timed pieces).
SliceTimes measureSliceTimes(Model<float>& m, int seq, int granularity, int repeats = 2);

// Whether stage `s` hosts a local head under `kind`: with "local" every stage but the last
// (its own), with "local-overlap" every stage but the first (the previous stage's).
bool hostsLocalHead(PipeSchedule kind, const Shard& s);

// The pipeline bubble of one traced step: the fraction of stage-time not spent in forward or
// backward computation. theory: (p - 1) / (m + p - 1), equal stages and free transfers;
// measured: from the spans, over the step's pipeline section (first forward to last
// backward of any stage); replayed: the schedules run again in simulated time with each
// computation's measured duration and free transfers (what the schedule and the stages'
// imbalance cost, without communication or other ranks' use of the CPU).
struct BubbleReport {
  int stages = 0, microbatches = 0, step = -1;
  double theory = 0, measured = 0, replayed = 0;
  double sectionSeconds = 0;  // the measured pipeline section
};

// spansOfStage[s]: the spans of one rank of stage s (the same data-parallel and
// tensor-parallel place in every stage); `step` names the traced step to analyse.
BubbleReport pipelineBubble(const std::vector<std::vector<Span>>& spansOfStage,
                            const std::vector<std::vector<Action>>& schedules, int step);

}  // namespace gpt
