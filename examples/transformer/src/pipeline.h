// SPDX-License-Identifier: BSD-3-Clause
// Runs this rank's part of a pipeline-parallel step: the actions of its stage's schedule
// (schedule.h) over its model shard, with activations and their gradients sent to the
// neighbouring stages through the communication layer (pp.fwd, pp.bwd). With one stage it
// is gradient accumulation over the micro-batches.
#pragma once

#include <vector>

#include "comm.h"
#include "data.h"
#include "model.h"
#include "schedule.h"
#include "timeline.h"

namespace gpt {

class Pipeline {
 public:
  Pipeline(Model<float>& m, Comm& comm, PipeSchedule kind, int microbatches, int seq, Timeline* timeline);

  // One step's forwards and backwards of batches[i], micro-batch i (every rank of a pipeline
  // passes the same batches); each micro-batch's loss is weighted by lossScale in the
  // gradients, which accumulate into the model's. Returns the sum over micro-batches of
  // headForward (0 off the last stage).
  double step(const std::vector<Batch>& batches, float lossScale);

  // Forward only (validation): `b` holds `sequences` sequences. Returns headForward (0 off
  // the last stage).
  double evaluate(const Batch& b, int sequences);

  const std::vector<Action>& actions() const { return schedules_[static_cast<size_t>(stage_)]; }

 private:
  int acquire(int microbatch);
  void compute(const Action& a, const Batch& b, float lossScale, double& loss);
  void transfer(const Action& a);

  Model<float>& model_;
  Comm& comm_;
  Timeline* timeline_;
  int stage_, seq_;
  std::vector<std::vector<Action>> schedules_;
  int slots_;
  std::vector<int> slotOf_;                 // per micro-batch; -1: none
  std::vector<int> free_;                   // activation slots not in use
  std::vector<std::vector<float>> gradIn_;  // per slot: the received gradient of the stage's output
};

}  // namespace gpt
