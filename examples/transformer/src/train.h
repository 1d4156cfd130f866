// SPDX-License-Identifier: BSD-3-Clause
// One rank's training run: data, model, optimiser and the data-parallel step over ccl.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ccl/ccl.h"
#include "comm.h"
#include "config.h"
#include "optimizer.h"

namespace gpt {

struct TrainOptions {
  ModelConfig model;
  std::string data;  // a UTF-8 text file (its token file is made beside it)
  int seq = 64;      // training sequence length (<= model.maxSeq)
  int batch = 8;     // micro-batch: sequences per forward/backward
  int accum = 1;     // micro-batches per step and rank
  int steps = 100;
  Schedule schedule;
  AdamWConfig adamw;
  float clip = 1.0f;  // global gradient-norm clipping; 0: off
  uint64_t seed = 1337;
  int valEvery = 50;             // validation every this many steps (and at the end); 0: only at the end
  int valSequences = 64;         // validation windows
  bool zero = false;             // ZeRO-1: reduce-scatter gradients, shard AdamW, all-gather parameters
  size_t bucketBytes = 8 << 20;  // gradient all-reduce buckets (plain data parallel)
  SiteCodec gradCodec;           // what dp.grad carries
  int threads = 1;               // OpenMP/BLAS threads of this rank
  std::string logPath;           // JSONL, one record per step (rank 0); empty: none
  std::string checkpointPath;    // written every saveEvery steps and at the end; empty: none
  int saveEvery = 0;
  std::string resumePath;  // a checkpoint to continue from
  bool progress = true;    // the one-line progress display (rank 0)
  int stopAfter = 0;       // stop (after saving) once this many steps ran in this process; 0: run to the end
};

struct TrainResult {
  double finalTrainLoss = 0;
  double finalValLoss = 0;
  double unigramEntropy = 0;  // of the validation split, nats
  double tokensPerSecond = 0;
  unsigned long long gradRawBytes = 0, gradWireBytes = 0;
  int stepsRun = 0;
  long peakRssBytes = 0;
  std::vector<float> params;                              // the final parameters, parameterLayout order
  std::vector<std::pair<std::string, double>> opSeconds;  // forward+backward time per kind of op
};

// Trains on `comm` (one rank of a data-parallel group); every rank must call it with the
// same options. Throws std::runtime_error with a clear message on bad data, a bad
// checkpoint or a failed collective.
TrainResult train(const TrainOptions& o, cclComm_t comm);

}  // namespace gpt
