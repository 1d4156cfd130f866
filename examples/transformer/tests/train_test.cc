// SPDX-License-Identifier: BSD-3-Clause
// Training over ccl, ranks as threads: data parallelism and ZeRO-1 reproduce one rank's
// training of the same global batch; resuming from a checkpoint is bit-identical; a
// checkpoint written by 4 ranks loads on 1 and on 3; bad data and checkpoints are errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "checkpoint.h"
#include "harness.h"
#include "train.h"

namespace gpt {
namespace {

using harness::corpusPath;
using harness::relativeDifference;
using harness::runOn;
using harness::tempDir;

TrainOptions tiny() {
  TrainOptions o;
  o.model.layers = 2;
  o.model.channels = 32;
  o.model.heads = 4;
  o.model.maxSeq = 32;
  o.data = corpusPath();
  o.seq = 32;
  o.batch = 2;
  o.accum = 1;
  o.steps = 20;
  o.schedule.lr = 1e-3f;
  o.schedule.warmup = 3;
  o.valEvery = 0;
  o.valSequences = 8;
  o.progress = false;
  o.seed = 7;
  return o;
}

// The same global batch (ranks x accum micro-batches) on 1 rank and on n ranks: 20 steps of
// AdamW agree up to fp32 summation order. The tolerance is far below what one step moves
// the parameters (lr 1e-3 against weights of about 0.02).
void expectMatchesOneRank(int n, bool zero) {
  TrainOptions one = tiny();
  one.accum = 12;
  const TrainResult ref = runOn(1, one);
  TrainOptions many = tiny();
  many.accum = 12 / n;
  many.zero = zero;
  const TrainResult got = runOn(n, many);
  ASSERT_EQ(got.params.size(), ref.params.size());
  EXPECT_LT(relativeDifference(ref.params, got.params), 2e-5) << n << " ranks" << (zero ? ", ZeRO-1" : "");
  EXPECT_NEAR(got.finalTrainLoss, ref.finalTrainLoss, 1e-4);
  EXPECT_NEAR(got.finalValLoss, ref.finalValLoss, 1e-4);
  EXPECT_LT(ref.finalTrainLoss, 5.0) << "it learned something: ln(256) = 5.55";
}

TEST(DataParallel, TwoRanksMatchOne) { expectMatchesOneRank(2, false); }
TEST(DataParallel, ThreeRanksMatchOne) { expectMatchesOneRank(3, false); }
TEST(DataParallel, FourRanksMatchOne) { expectMatchesOneRank(4, false); }
TEST(ZeroOne, TwoRanksMatchOne) { expectMatchesOneRank(2, true); }
TEST(ZeroOne, ThreeRanksMatchOne) { expectMatchesOneRank(3, true); }
TEST(ZeroOne, FourRanksMatchOne) { expectMatchesOneRank(4, true); }

TEST(DataParallel, SmallBucketsGiveTheSameResult) {
  TrainOptions o = tiny();
  const TrainResult whole = runOn(2, o);
  o.bucketBytes = 4096;  // many buckets
  const TrainResult bucketed = runOn(2, o);
  EXPECT_EQ(whole.params, bucketed.params);
}

std::vector<uint8_t> fileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// --dump-grads writes each rank's gradient before any reduction: two data-parallel ranks'
// dumps average to the gradient one rank dumps for the same two micro-batches.
TEST(DumpGradients, EachRankWritesItsOwnBeforeTheAverage) {
  auto floats = [](const std::string& path) {
    const std::vector<uint8_t> b = fileBytes(path);
    std::vector<float> v(b.size() / sizeof(float));
    std::memcpy(v.data(), b.data(), v.size() * sizeof(float));
    return v;
  };
  TrainOptions one = tiny();
  one.steps = 3;
  one.accum = 2;
  one.dumpGradsPath = tempDir() + "grads_one";
  one.dumpGradsStep = 1;
  runOn(1, one);
  TrainOptions two = one;
  two.accum = 1;
  two.dumpGradsPath = tempDir() + "grads_two";
  runOn(2, two);
  const std::vector<float> ref = floats(one.dumpGradsPath + ".0");
  const std::vector<float> a = floats(two.dumpGradsPath + ".0"), b = floats(two.dumpGradsPath + ".1");
  ASSERT_FALSE(ref.empty());
  ASSERT_EQ(a.size(), ref.size());
  ASSERT_EQ(b.size(), ref.size());
  EXPECT_NE(a, b) << "each rank's own data";
  std::vector<float> mean(ref.size());
  for (size_t i = 0; i < ref.size(); ++i) mean[i] = 0.5f * (a[i] + b[i]);
  EXPECT_LT(relativeDifference(ref, mean), 1e-5);
}

// Stop after 8 of 20 steps, resume: the same bits as the uninterrupted run, in each layout.
TEST(Checkpoint, ResumeIsBitIdentical) {
  for (const auto& [ranks, zero] : {std::pair{1, false}, std::pair{2, false}, std::pair{3, true}}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks" + (zero ? ", ZeRO-1" : ""));
    TrainOptions o = tiny();
    o.zero = zero;
    o.checkpointPath = tempDir() + "gpt_full.ck";
    const TrainResult full = runOn(ranks, o);
    o.checkpointPath = tempDir() + "gpt_half.ck";
    o.stopAfter = 8;
    const TrainResult half = runOn(ranks, o);
    EXPECT_EQ(half.stepsRun, 8);
    o.stopAfter = 0;
    o.resumePath = o.checkpointPath;
    o.checkpointPath = tempDir() + "gpt_resumed.ck";
    const TrainResult resumed = runOn(ranks, o);
    EXPECT_EQ(resumed.stepsRun, 12);
    EXPECT_EQ(resumed.params, full.params);
    EXPECT_EQ(fileBytes(tempDir() + "gpt_resumed.ck"), fileBytes(tempDir() + "gpt_full.ck"));
  }
}

// A run resumed with the log of the run it continues appends to it: every step's record is
// there once, in order (the first run's were lost when the resumed run truncated the file).
TEST(Checkpoint, ResumeAppendsToTheLog) {
  TrainOptions o = tiny();
  o.steps = 6;
  o.logPath = tempDir() + "resumed.jsonl";
  o.checkpointPath = tempDir() + "resumed_log.ck";
  o.stopAfter = 4;
  runOn(2, o);
  o.stopAfter = 0;
  o.resumePath = o.checkpointPath;
  ASSERT_EQ(runOn(2, o).stepsRun, 2);
  std::ifstream in(o.logPath);
  const std::string step = "\"type\":\"step\",\"step\":";
  std::vector<int> steps;
  int summaries = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"type\":\"summary\"") != std::string::npos) ++summaries;
    const size_t at = line.find(step);
    if (at != std::string::npos) steps.push_back(std::stoi(line.substr(at + step.size())));
  }
  EXPECT_EQ(steps, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(summaries, 2) << "one per run";
}

// The local-update schedules train a head per stage but the last, with its own AdamW: the
// checkpoint keeps them, so resuming is bit-identical there too (it was not while the heads
// restarted from their initialisation).
TEST(Checkpoint, ResumeWithLocalUpdatesIsBitIdentical) {
  for (PipeSchedule schedule : {PipeSchedule::kLocal, PipeSchedule::kLocalOverlap}) {
    SCOPED_TRACE(scheduleName(schedule));
    TrainOptions o = tiny();
    o.steps = 10;
    o.accum = 2;
    o.grid.pp = 2;
    o.pipeSchedule = schedule;
    o.checkpointPath = tempDir() + "gpt_local_full.ck";
    const TrainResult full = runOn(2, o);
    o.checkpointPath = tempDir() + "gpt_local_half.ck";
    o.stopAfter = 4;
    runOn(2, o);
    const Checkpoint half = loadCheckpoint(o.checkpointPath);
    EXPECT_EQ(half.localHeads, 1u);
    EXPECT_EQ(half.localHeadSteps, 4u);
    o.stopAfter = 0;
    o.resumePath = o.checkpointPath;
    o.checkpointPath = tempDir() + "gpt_local_resumed.ck";
    const TrainResult resumed = runOn(2, o);
    EXPECT_EQ(resumed.stepsRun, 6);
    EXPECT_EQ(resumed.params, full.params);
    EXPECT_EQ(fileBytes(tempDir() + "gpt_local_resumed.ck"), fileBytes(tempDir() + "gpt_local_full.ck"));
  }
}

// A checkpoint of version 1 (before the local heads were kept: a 72-byte header) still loads.
TEST(Checkpoint, VersionOneLoads) {
  TrainOptions o = tiny();
  o.steps = 2;
  o.checkpointPath = tempDir() + "gpt_v2.ck";
  runOn(1, o);
  const std::vector<uint8_t> v2 = fileBytes(o.checkpointPath);
  ASSERT_GT(v2.size(), 104u);
  // Version 1: the header's first 72 bytes, version 1 and 72 header bytes, the same body.
  std::vector<uint8_t> v1(v2.begin(), v2.begin() + 72);
  v1.insert(v1.end(), v2.begin() + 96, v2.end() - 8);
  const uint32_t version = 1, headerBytes = 72;
  std::memcpy(v1.data() + 8, &version, 4);
  std::memcpy(v1.data() + 12, &headerBytes, 4);
  uint64_t check = 0xcbf29ce484222325ull;  // FNV-1a, as checkpoint.cc
  for (uint8_t b : v1) check = (check ^ b) * 0x100000001b3ull;
  v1.resize(v1.size() + 8);
  std::memcpy(v1.data() + v1.size() - 8, &check, 8);
  const std::string path = tempDir() + "gpt_v1.ck";
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(v1.data()), static_cast<std::streamsize>(v1.size()));
  const Checkpoint a = loadCheckpoint(o.checkpointPath), b = loadCheckpoint(path);
  EXPECT_EQ(b.step, a.step);
  EXPECT_EQ(b.params, a.params);
  EXPECT_EQ(b.v, a.v);
  EXPECT_EQ(b.localHeads, 0u);
}

// Written by 4 ZeRO-1 ranks, read by 1 and by 3: parameters and optimiser state are whole.
TEST(Checkpoint, FourRanksLoadOnOneAndThree) {
  TrainOptions o = tiny();
  o.zero = true;
  o.steps = 6;
  o.checkpointPath = tempDir() + "gpt_four.ck";
  const TrainResult four = runOn(4, o);
  const Checkpoint ck = loadCheckpoint(o.checkpointPath);
  EXPECT_EQ(ck.params, four.params);
  EXPECT_EQ(ck.step, 6u);
  for (int ranks : {1, 3}) {
    TrainOptions next = tiny();
    next.zero = ranks > 1;
    next.steps = 8;
    next.resumePath = o.checkpointPath;
    next.checkpointPath = tempDir() + "gpt_next.ck";
    const TrainResult r = runOn(ranks, next);
    EXPECT_EQ(r.stepsRun, 2) << ranks;
    EXPECT_TRUE(std::isfinite(r.finalTrainLoss));
    // The moments came along: a second load of the same file into this layout resumes
    // exactly as the first (compared through the checkpoint each writes).
    const TrainResult again = runOn(ranks, next);
    EXPECT_EQ(again.params, r.params) << ranks;
  }
}

TEST(Checkpoint, CorruptOrForeignFilesAreClearErrors) {
  TrainOptions o = tiny();
  o.steps = 2;
  o.checkpointPath = tempDir() + "gpt_ok.ck";
  runOn(1, o);
  std::vector<uint8_t> bytes = fileBytes(o.checkpointPath);
  auto expectRefused = [&](const std::vector<uint8_t>& b, const char* why) {
    const std::string bad = tempDir() + "gpt_bad.ck";
    std::ofstream(bad, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    try {
      loadCheckpoint(bad);
      ADD_FAILURE() << "accepted: " << why;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  std::vector<uint8_t> flipped = bytes;
  flipped[bytes.size() / 2] ^= 1;
  expectRefused(flipped, "checksum");
  expectRefused(std::vector<uint8_t>(bytes.begin(), bytes.begin() + 100), "truncated");
  std::vector<uint8_t> foreign = bytes;
  foreign[0] = 'X';
  expectRefused(foreign, "magic");
  expectRefused({}, "too short");
  EXPECT_THROW(loadCheckpoint(tempDir() + "no_such.ck"), std::runtime_error);
  // A checkpoint of another shape is refused by the trainer.
  TrainOptions other = tiny();
  other.model.layers = 3;
  other.resumePath = o.checkpointPath;
  EXPECT_THROW(runOn(1, other), std::runtime_error);
}

// A path the run cannot write fails it before the first step (the log, where one can be
// written, holds no step), not after the last: checked on rank 0, which writes them.
TEST(Checkpoint, UnwritablePathsFailBeforeTraining) {
  for (auto field : {&TrainOptions::checkpointPath, &TrainOptions::logPath, &TrainOptions::tracePath}) {
    TrainOptions o = tiny();
    const std::string log = tempDir() + "unwritable.jsonl";
    std::remove(log.c_str());
    o.logPath = log;
    o.*field = tempDir() + "no_such_folder/out";
    try {
      runOn(2, o);
      ADD_FAILURE() << "accepted " << o.*field;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("cannot write " + o.*field), std::string::npos) << e.what();
    }
    std::ifstream in(log);
    const std::string logged((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(logged.find("\"type\":\"step\""), std::string::npos) << o.*field << ": steps ran";
  }
}

TEST(Data, MissingEmptyOrShortFilesAreClearErrors) {
  TrainOptions o = tiny();
  o.data = tempDir() + "no_such_text.txt";
  EXPECT_THROW(runOn(1, o), std::runtime_error);
  o.data = tempDir() + "empty.txt";
  std::ofstream(o.data, std::ios::trunc);
  EXPECT_THROW(runOn(1, o), std::runtime_error);
  o.data = tempDir() + "short.txt";
  std::ofstream(o.data, std::ios::trunc) << "too short for a sequence of 32";
  try {
    runOn(1, o);
    ADD_FAILURE() << "a too short text was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("too short"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpt
