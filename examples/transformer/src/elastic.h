// SPDX-License-Identifier: BSD-3-Clause
// --elastic: a data-parallel run (--tp 1 --pp 1, plain or ZeRO-1) that loses ranks goes on
// with the survivors, from the state of a step they completed, without a restart.
//
// What each rank keeps after every completed step:
//   plain  the parameters and both AdamW moments, whole (every rank holds the same): one
//          more copy of each, 3P floats.
//   ZeRO-1 the parameters whole (after their all-gather), its own shard of each moment, and a
//          replica of the next rank's shards, sent to it after each step (each rank sends
//          its shards to the previous rank of the data-parallel ring: 8P/n bytes out and in
//          per step, uncompressed, under dp.param). Two such steps are kept: when a rank is
//          lost the others may be one step apart (a rank that finished step s's exchange
//          may still have to see its neighbour finish it), never more, since no rank
//          finishes step s+1's reduce-scatter before every rank has finished step s.
//          2 (P + 4P/n) floats in all.
// After a failed call the survivors shrink the world (cclCommShrink, ALIVE and ABORT) and
// agree on the state to go on from: with a whole copy, the latest any of them holds, from
// the lowest rank holding it; else the latest step every one of them completed, its moments
// assembled from the survivors' own shards and, for a lost rank, the replica its previous
// rank keeps. Two lost ranks that were neighbours take one shard with them: every survivor
// then fails with the same error (never a split), and the run must restart from a checkpoint.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include <ccl/ccl.h>

#include "checkpoint.h"
#include "comm.h"
#include "data_parallel.h"
#include "model.h"
#include "optimizer.h"

namespace gpt {

struct ElasticState {
  // One completed step. `ck.step` is the next step to run. With `ranks` > 1 it is ZeRO-1's:
  // ck.m and ck.v hold the shard of data-parallel rank `rank` of `ranks` only, nextM and
  // nextV the next rank's (padded to the shard length). With `ranks` == 1 everything is whole.
  struct Kept {
    bool held = false;
    Checkpoint ck;
    int ranks = 1, rank = 0;
    std::vector<float> nextM, nextV;
  };
  std::array<Kept, 2> kept;  // plain data parallel uses kept[0] only
  int resume = -1;           // after a shrink: the whole state trainOn goes on from
  bool restarted = false;    // trainOn runs again after a shrink
};

// After this rank's step `step` completed (parameters shared): keeps what the survivors of a
// later loss go on from. ZeRO-1: exchanges the shards with the ring neighbours over `comm`'s
// data-parallel group (a CommError if a rank is lost meanwhile).
void keepStep(ElasticState& state, Comm& comm, const DataParallel& dp, const Model<float>& model, const AdamW& opt,
              int step, uint64_t dataSeed);

// After a failed call: the survivors shrink `world` to the ranks that are alive (revoking
// it: calls still waiting on it fail) and agree on the state to go on from, which `state`
// then holds whole at kept[resume] (resume -1: no step was completed, start again). Returns
// the new world. Throws std::runtime_error, on every survivor alike, when the state cannot
// be rebuilt.
cclComm_t goOnWithoutLost(cclComm_t world, const ModelConfig& model, ElasticState& state);

}  // namespace gpt
