// SPDX-License-Identifier: BSD-3-Clause
// --elastic: a run with data parallelism (plain or ZeRO-1, with or without tensor and
// pipeline parallelism) that loses ranks goes on with the survivors, from the state of a step
// they completed, without a restart.
//
// What each rank keeps after every completed step:
//   plain  the parameters and both AdamW moments of the part of the model it holds (with
//          --tp 1 --pp 1 the whole model, as every rank holds it): one more copy of each. With
//          the whole model one step is kept; with a part, two (below).
//   ZeRO-1 (--tp 1 --pp 1) the parameters whole (after their all-gather), its own shard of
//          each moment, and a replica of the next rank's shards, sent to it after each step
//          (each rank sends its shards to the previous rank of the data-parallel ring: 8P/n
//          bytes out and in per step, uncompressed, under dp.param). Two such steps are kept.
// Two steps: when a rank is lost the others may be one step apart (a rank that finished step
// s may still have to see others finish it), never more, since no rank finishes step s+1's
// world-wide statistics all-reduce before every rank has finished step s.
//
// After a failed call the survivors shrink the world (cclCommShrink, ALIVE and ABORT). With
// tensor or pipeline parallelism a data-parallel replica (the tp x pp ranks of one
// data-parallel index) that lost a rank cannot go on: its other ranks leave the run, and the
// replicas left go on with a smaller data-parallel dimension (a second shrink, with the list
// of those leaving). Then the survivors agree on the state to go on from: with a whole copy,
// the latest any of them holds, from the lowest rank holding it; else the latest step every
// one of them completed, assembled whole in exact all-reduces (each element from one rank,
// the others adding zeros): the parameters and moments from the lowest replica's ranks, or
// under ZeRO-1 the moments from every survivor's own shard and, for a lost rank, the replica
// its previous rank keeps. When no replica is whole, or two lost ZeRO-1 ranks were
// neighbours (a shard is gone), every survivor fails with the same error (never a split), and
// the run must go on from a checkpoint.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include <ccl/ccl.h>

#include "checkpoint.h"
#include "comm.h"
#include "data_parallel.h"
#include "grid.h"
#include "model.h"
#include "optimizer.h"
#include "shard.h"

namespace gpt {

struct ElasticState {
  // One completed step of this rank. `ck.step` is the next step to run; ck.params, ck.m and
  // ck.v hold `shard`'s part of the model (shardLayout order), of data-parallel replica
  // `replica` of `replicas`. With `zero`, ck.m and ck.v hold only ZeRO-1's shard `replica` of
  // the moments, nextM and nextV the next replica's (padded to the shard length).
  struct Kept {
    bool held = false;
    Checkpoint ck;
    Shard shard;
    int replica = 0, replicas = 1;
    bool zero = false;
    std::vector<float> nextM, nextV;
    bool whole() const { return shard.whole() && !zero; }
  };
  std::array<Kept, 2> kept;  // a whole model's uses kept[0] only
  int resume = -1;           // after a shrink: the whole state trainOn goes on from
  bool restarted = false;    // trainOn runs again after a shrink
  int firstStep = -1;        // the step the first start began from (--stop-after counts from it)
};

// After this rank's step `step` completed (parameters shared): keeps what the survivors of a
// later loss go on from. ZeRO-1: exchanges the shards with the ring neighbours over `comm`'s
// data-parallel group (a CommError if a rank is lost meanwhile).
void keepStep(ElasticState& state, Comm& comm, const DataParallel& dp, const Model<float>& model, const AdamW& opt,
              int step, uint64_t dataSeed);

// After a failed call: the survivors shrink `world` (laid out as `grid`) to the ranks that
// go on (revoking it: calls still waiting on it fail), set grid.dp to the replicas left and
// agree on the state to go on from, which `state` then holds whole at kept[resume] (resume
// -1: no step was completed, start again). Returns the new world, or null on a rank that
// leaves (its replica lost a rank). Throws std::runtime_error, on every survivor alike, when
// the run cannot go on.
cclComm_t goOnWithoutLost(cclComm_t world, const ModelConfig& model, Grid& grid, ElasticState& state);

}  // namespace gpt
