// SPDX-License-Identifier: BSD-3-Clause
// One rank's training run: data, model shard, optimiser, and the step over the grid of
// tensor-, pipeline- and data-parallel ranks (grid.h), every collective through ccl.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ccl/ccl.h"
#include "comm.h"
#include "config.h"
#include "grid.h"
#include "optimizer.h"
#include "pipeline.h"
#include "schedule.h"

namespace gpt {

struct TrainOptions {
  ModelConfig model;
  std::string data;               // a UTF-8 text file (its token file is made beside it)
  int seq = 64;                   // training sequence length (<= model.maxSeq)
  int batch = 8;                  // micro-batch: sequences per forward/backward
  int accum = 1;                  // micro-batches per step and data-parallel rank (a pipeline's micro-batches)
  Grid grid{0, 1, 1};             // dp 0: the world's ranks that tp x pp leaves
  bool sequenceParallel = false;  // with tp > 1
  PipeSchedule pipeSchedule = PipeSchedule::k1F1B;
  int steps = 100;
  Schedule schedule;
  AdamWConfig adamw;
  float clip = 1.0f;  // global gradient-norm clipping; 0: off
  uint64_t seed = 1337;
  int valEvery = 50;        // validation every this many steps (and at the end); 0: only at the end
  int codecErrorEvery = 0;  // every this many steps, compressed allreduces are also run exactly (0: never)
  int valSequences = 64;    // validation windows
  bool zero = false;        // ZeRO-1: reduce-scatter gradients, shard AdamW, all-gather parameters
  // Go on without a lost rank: the survivors shrink the world (cclCommShrink), the
  // data-parallel replicas that lost a rank leave, and the rest rebuild the state of a step
  // they completed (elastic.h) and train on with fewer replicas (a smaller global batch)
  // instead of stopping.
  bool elastic = false;
  bool fuseEmbeddingSync = false;  // wte's gradient: one collective over both end stages and all DP ranks
  int autoencoderDim = 0;          // Bian et al.'s learned autoencoder on tp.fwd: code width (0: off)
  int autoencoderFirst = 0, autoencoderEnd = 1 << 30;  // the blocks it covers
  int slices = 1;           // TeraPipe's token slices per micro-batch (uniform); with planSlices: planned
  bool planSlices = false;  // slices chosen by the planner from times measured at the start
  int sliceGranularity = 16;
  size_t bucketBytes = 8 << 20;  // gradient all-reduce buckets (plain data parallel)
  bool overlapDp = false;        // each block's gradient all-reduced asynchronously during the last backward
  std::array<SiteCodec, static_cast<size_t>(Site::kCount)> codecs{};  // what each site carries
  int threads = 1;                                                    // OpenMP/BLAS threads of this rank
  std::string logPath;         // JSONL, one record per step (rank 0); empty: none
  std::string checkpointPath;  // written every saveEvery steps and at the end; empty: none
  int saveEvery = 0;
  std::string resumePath;  // a checkpoint to continue from
  bool progress = true;    // the one-line progress display (rank 0)
  // Stop (after saving) once this many steps ran in this process, counted from the step it
  // started from (across --elastic's restarts); 0: run to the end.
  int stopAfter = 0;
  std::string tracePath;  // Chrome trace of steps [traceStep, traceStep + traceSteps); empty: none
  int traceStep = 1;
  int traceSteps = 1;
  // Each rank's gradient buffer at step dumpGradsStep, before any reduction, as raw fp32 in
  // dumpGradsPath + "." + world rank (perf/accuracy's recorded-gradient data); empty: none.
  std::string dumpGradsPath;
  int dumpGradsStep = 0;
};

struct TrainResult {
  double finalTrainLoss = 0;
  std::vector<double> losses;  // training loss of every step this run ran
  double finalValLoss = 0;
  double unigramEntropy = 0;  // of the validation split, nats
  double tokensPerSecond = 0;
  unsigned long long gradRawBytes = 0, gradWireBytes = 0;
  // The steps this call ran, which tokensPerSecond is measured over: under --elastic, those
  // since the survivors last went on (on `ranks`). stepsInAll: from the step the process
  // started from to the one it ended before, across the restarts (stepsRun without any).
  int stepsRun = 0, stepsInAll = 0;
  long peakRssBytes = 0;
  std::vector<float> params;                              // the final parameters, parameterLayout order
  std::vector<std::pair<std::string, double>> opSeconds;  // forward+backward time per kind of op
  std::vector<SiteStats> sites;                           // per Site, summed over the grid (siteTotals)
  std::string layout;                                     // "dp2 x pp2 x tp1 ..." as the run was laid out
  std::string compression;                                // the sites' codecs as --compress spells them
  std::vector<BubbleReport> bubbles;                      // per traced step, with more than one stage (rank 0)
  std::vector<int> sliceBounds;                           // token slices used ({0, seq}: none)
  double predictedSliceSeconds = 0;                       // the planner's m * sum t + (p - 1) * max t
  GridCounters counters;                                  // every rank's, at the end (rank 0)
  bool left = false;  // --elastic: this rank's data-parallel replica lost a rank, and it left the run
  // This rank's world rank and the world's size at the end: under --elastic, after the
  // shrinks (the report comes from rank 0 of that world, not from the launch's rank 0).
  int rank = 0, ranks = 1;
};

// Trains on `world` (one rank of the grid o.grid lays over it); every rank must call it with
// the same options. Every rank returns the run's losses; rank 0's result also holds the whole
// model's parameters and the grid's counters. Throws std::invalid_argument for an impossible
// grid or shape, std::runtime_error with a clear message on bad data, a bad checkpoint, an
// output path that cannot be written (on every rank alike, before the first step) or a
// failed collective (naming its site and call).
TrainResult train(const TrainOptions& o, cclComm_t world);

}  // namespace gpt
