// SPDX-License-Identifier: BSD-3-Clause
// Per-site compression in the trainer: --compress specs parse (and bad ones are refused
// with the reason); a site's codec applies to the blocks, sending stages and pipeline phases
// it names, after its warm-up, and nowhere else, as the per-rank, per-block counters show;
// compressed training stays close to uncompressed training.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "comm.h"
#include "harness.h"
#include "launch.h"
#include "site_codec.h"
#include "train.h"

namespace gpt {
namespace {

using harness::corpusPath;
using harness::runOn;

TEST(SiteCodecSpec, ParsesAndDescribesItself) {
  for (const char* spec : {"tp.fwd=int4:block=32:layers=2-3", "dp.grad=int4:feedback=loco:beta=0.800000:reset=1024",
                           "pp.bwd=fp8_e4m3:stages=1-:phases=cooldown:warmup=5", "tp.bwd=int8:stochastic:seed=7",
                           "pp.fwd=topk:keep=0.050000", "emb.sync=int8:scale-bits=16", "dp.grad=int2:stages=0",
                           "pp.bwd=powersgd:rank=12:feedback=ef", "dp.grad=powersgd:rank=2:feedback=ef:stages=0-1",
                           "pp.fwd=int8:stages=0+2-3+5-", "tp.fwd=int2_midrise:scale=channel",
                           "pp.bwd=powersgd:rank=4:warmstart=on", "pp.bwd=powersgd:feedback=ef:warmstart=off"}) {
    const auto [site, codec] = parseSiteCodec(spec);
    EXPECT_EQ(describe(site, codec), spec);
  }
  const SiteCodec c = parseSiteCodec("pp.bwd=int8:stages=1-2:phases=steady+cooldown:warmup=3").second;
  EXPECT_EQ(c.stages, 0b110u);
  EXPECT_FALSE(applies(c, {2, -1, 1, static_cast<int>(Phase::kSteady)})) << "warm-up";
  EXPECT_TRUE(applies(c, {3, -1, 1, static_cast<int>(Phase::kSteady)}));
  EXPECT_TRUE(applies(c, {3, -1, 2, static_cast<int>(Phase::kCooldown)}));
  EXPECT_FALSE(applies(c, {3, -1, 0, static_cast<int>(Phase::kSteady)})) << "stage outside the set";
  EXPECT_FALSE(applies(c, {3, -1, 1, static_cast<int>(Phase::kWarmup)})) << "phase outside the set";
  EXPECT_FALSE(applies(parseSiteCodec("dp.grad=none").second, {5, -1, 0, -1}));
  const SiteCodec set = parseSiteCodec("pp.fwd=int8:stages=0+2").second;
  EXPECT_TRUE(applies(set, {0, -1, 0, -1}));
  EXPECT_FALSE(applies(set, {0, -1, 1, -1})) << "stage 1 is not in {0, 2}";
  EXPECT_TRUE(applies(set, {0, -1, 2, -1}));
  // stochastic as --help spells the keys (=0|1) as well as the bare word.
  EXPECT_EQ(parseSiteCodec("dp.grad=int8:stochastic=1").second.compression.stochasticRounding, 1);
  EXPECT_EQ(parseSiteCodec("dp.grad=int8:stochastic=0").second.compression.stochasticRounding, 0);
}

TEST(SiteCodecSpec, BadSpecsSayWhatIsWrong) {
  auto why = [](const std::string& spec) {
    try {
      parseSiteCodec(spec);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(why("tp.fwd").find("expected SITE=CODEC"), std::string::npos);
  EXPECT_NE(why("tp.fw=int8").find("no site tp.fw"), std::string::npos);
  EXPECT_NE(why("stat=int8").find("stat is not compressed"), std::string::npos);
  EXPECT_NE(why("tp.fwd=int3").find("no codec int3"), std::string::npos);
  EXPECT_NE(why("tp.fwd=int8:stages=0").find("stages= does not apply to tp.fwd"), std::string::npos);
  EXPECT_NE(why("dp.grad=int8:layers=0").find("layers= does not apply to dp.grad"), std::string::npos);
  EXPECT_NE(why("dp.grad=int8:phases=cooldown").find("phases= applies to pp.fwd and pp.bwd only"), std::string::npos);
  EXPECT_NE(why("pp.fwd=int8:phases=epilogue").find("epilogue is not warmup"), std::string::npos);
  EXPECT_NE(why("pp.bwd=powersgd:feedback=loco").find("not loco"), std::string::npos);
  EXPECT_EQ(why("pp.bwd=powersgd:rank=8:feedback=ef:phases=cooldown"), "accepted") << "lazy error propagation";
  EXPECT_NE(why("tp.fwd=int8:layers=3-1").find("empty range"), std::string::npos);
  EXPECT_NE(why("tp.fwd=int8:block=7").find("block"), std::string::npos);
  EXPECT_NE(why("tp.fwd=topk:keep=2").find("keep"), std::string::npos);
  EXPECT_NE(why("tp.fwd=int8:colour=red").find("unknown key colour"), std::string::npos);
  EXPECT_NE(why("dp.grad=int8:stochastic=2").find("stochastic=2 is not 0 or 1"), std::string::npos);
  EXPECT_NE(why("dp.grad=none:feedback=ef").find("feedback without a codec"), std::string::npos);
  EXPECT_NE(why("tp.fwd=topk:scale=channel").find("scale=channel takes a quantiser"), std::string::npos);
  EXPECT_NE(why("tp.fwd=int4:scale=row").find("is not channel or block"), std::string::npos);
  EXPECT_NE(why("tp.fwd=int4:warmstart=on").find("warmstart= takes powersgd"), std::string::npos);
  EXPECT_TRUE(parseSiteCodec("pp.bwd=powersgd:warmstart=on").second.warmStartOnly) << "a state without error";
  EXPECT_FALSE(parseSiteCodec("pp.bwd=powersgd:feedback=ef:warmstart=on").second.warmStartOnly);
}

TrainOptions small() {
  TrainOptions o;
  o.model.layers = 4;
  o.model.channels = 32;
  o.model.heads = 4;
  o.model.maxSeq = 16;
  o.data = corpusPath();
  o.seq = 16;
  o.batch = 4;
  o.steps = 4;
  o.schedule.lr = 3e-3f;
  o.valEvery = 0;
  o.valSequences = 4;
  o.progress = false;
  o.seed = 5;
  return o;
}

void set(TrainOptions& o, const std::string& spec) {
  const auto [site, codec] = parseSiteCodec(spec);
  o.codecs[static_cast<size_t>(site)] = codec;
}

// Summed over every rank (and block) that `pick` accepts.
template <class Pick>
SiteStats total(const GridCounters& g, Site s, Pick pick) {
  SiteStats out;
  for (int r = 0; r < g.ranks; ++r)
    for (int k = 0; k <= g.layers; ++k) {
      if (!pick(r, k - 1)) continue;
      const SiteStats& st = g.at(r, static_cast<int>(s), k);
      out.calls += st.calls, out.rawBytes += st.rawBytes, out.wireBytes += st.wireBytes;
    }
  return out;
}

TEST(SiteCompression, OnlyTheNamedBlocks) {
  TrainOptions o = small();
  o.grid = {1, 1, 2};
  set(o, "tp.fwd=int4:layers=2-3");
  const TrainResult r = runOn(2, o);
  for (int layer = 0; layer < 4; ++layer) {
    const SiteStats st = total(r.counters, Site::kTpFwd, [&](int, int l) { return l == layer; });
    ASSERT_GT(st.rawBytes, 0u) << layer;
    if (layer < 2)
      EXPECT_EQ(st.wireBytes, st.rawBytes) << "block " << layer << " is not in the range";
    else
      EXPECT_LT(st.wireBytes * 4, st.rawBytes * 2) << "block " << layer << " goes int4";
  }
  const SiteStats bwd = total(r.counters, Site::kTpBwd, [](int, int) { return true; });
  EXPECT_EQ(bwd.wireBytes, bwd.rawBytes) << "tp.bwd has no codec";
}

TEST(SiteCompression, OnlyTheNamedStagesAfterTheWarmup) {
  TrainOptions o = small();
  o.grid = {2, 2, 1};
  o.accum = 2;
  set(o, "dp.grad=int8:stages=1");
  const TrainResult r = runOn(4, o);
  const GridCounters& g = r.counters;
  for (int stage : {0, 1}) {
    const SiteStats st = total(g, Site::kDpGrad, [&](int rank, int) { return g.stageOf[rank] == stage; });
    ASSERT_GT(st.rawBytes, 0u);
    if (stage == 0)
      EXPECT_EQ(st.wireBytes, st.rawBytes);
    else
      EXPECT_LT(st.wireBytes * 3, st.rawBytes);
  }
  o.steps = 3;
  set(o, "dp.grad=int8:warmup=3");
  const SiteStats warm = total(runOn(4, o).counters, Site::kDpGrad, [](int, int) { return true; });
  EXPECT_EQ(warm.wireBytes, warm.rawBytes) << "every step was a warm-up step";
}

// pp4, 4 micro-batches, 1F1B: stage s sends its gradient back in the cool-down min(3 - s, 4)
// times; the last stage never cools down.
TEST(SiteCompression, OnlyTheNamedPhases) {
  TrainOptions o = small();
  o.grid = {1, 4, 1};
  o.accum = 4;
  o.steps = 2;
  set(o, "pp.bwd=int8:phases=cooldown");
  const TrainResult r = runOn(4, o);
  const GridCounters& g = r.counters;
  const SiteStats full = total(g, Site::kPpBwd, [&](int rank, int) { return g.stageOf[rank] == 3; });
  ASSERT_GT(full.rawBytes, 0u);
  EXPECT_EQ(full.wireBytes, full.rawBytes) << "stage 3 has no cool-down";
  const double perSend = static_cast<double>(full.rawBytes) / (o.steps * o.accum);
  for (int stage : {1, 2}) {
    const SiteStats st = total(g, Site::kPpBwd, [&](int rank, int) { return g.stageOf[rank] == stage; });
    const int cooled = o.steps * (3 - stage);  // compressed sends
    EXPECT_EQ(st.rawBytes, full.rawBytes);
    const double uncompressed = perSend * (o.steps * o.accum - cooled);
    EXPECT_GT(static_cast<double>(st.wireBytes), uncompressed) << stage;
    EXPECT_LT(static_cast<double>(st.wireBytes), uncompressed + cooled * perSend * 0.3) << stage;
  }
}

// PowerSGD on dp.grad (Optimus-CC's selective stage compression): each weight matrix is
// all-reduced with its own shape on the named stages, the vectors in one uncompressed call;
// the other stages keep their buckets.
TEST(SiteCompression, PowerSgdPerMatrixOnTheNamedStages) {
  TrainOptions o = small();
  o.grid = {2, 2, 1};
  o.accum = 2;
  o.steps = 3;
  set(o, "dp.grad=powersgd:rank=2:feedback=ef:stages=0");
  const TrainResult r = runOn(4, o);
  const GridCounters& g = r.counters;
  const SiteStats first = total(g, Site::kDpGrad, [&](int rank, int) { return g.stageOf[rank] == 0; });
  const SiteStats last = total(g, Site::kDpGrad, [&](int rank, int) { return g.stageOf[rank] == 1; });
  // Stage 0 holds wte, wpe and 2 blocks: 2 + 4 x 2 matrices and one call of vectors, per step
  // and rank; stage 1 sends one bucket.
  EXPECT_EQ(first.calls, static_cast<unsigned long long>(2 * o.steps * (2 + 4 * 2 + 1)));
  EXPECT_EQ(last.calls, static_cast<unsigned long long>(2 * o.steps));
  EXPECT_LT(first.wireBytes * 4, first.rawBytes);
  EXPECT_EQ(last.wireBytes, last.rawBytes);
  EXPECT_NEAR(r.losses.back(),
              runOn(1,
                    [&] {
                      TrainOptions one = small();
                      one.accum = 4;
                      one.steps = 3;
                      return one;
                    }())
                  .losses.back(),
              0.05)
      << "rank-2 gradients with error feedback still train";
}

// An autoencoder as wide as the model (E orthonormal and square, D = E^T) starts as the
// identity: the first step's loss and the model's first update are the uncompressed run's
// (its own gradients are checked against finite differences in autoencoder_test.cc).
// Narrower, it sends width / channels of the bytes, on the blocks it covers.
TEST(SiteCompression, AutoencoderStartsAsTheIdentity) {
  TrainOptions o = small();
  o.grid = {1, 1, 2};
  o.steps = 1;
  const TrainResult plain = runOn(2, o);
  o.autoencoderDim = o.model.channels;
  const TrainResult same = runOn(2, o);
  EXPECT_NEAR(same.losses[0], plain.losses[0], 1e-5);
  // E^T E is the identity to fp32 Gram-Schmidt's rounding (about 1e-6), so the gradients
  // differ that much; AdamW's first step, lr * g / (|g| + eps), turns that into at most a few
  // 1e-5 of the largest parameter. A wrong backward moves parameters by about lr = 3e-3.
  EXPECT_LT(harness::relativeDifference(plain.params, same.params), 2e-4);
  o.steps = 2;
  o.autoencoderDim = 8;
  o.autoencoderFirst = 2;
  const TrainResult narrow = runOn(2, o);
  for (int layer = 0; layer < 4; ++layer) {
    const SiteStats st = total(narrow.counters, Site::kTpFwd, [&](int, int l) { return l == layer; });
    if (layer < 2)
      EXPECT_EQ(st.wireBytes, st.rawBytes) << layer;
    else
      EXPECT_EQ(st.wireBytes * 4, st.rawBytes) << "8 of 32 channels, block " << layer;
  }
}

// Local updates: chunked stages send no gradient back; overlapping ones send one per
// micro-batch; both still learn.
TEST(SiteCompression, LocalUpdatesSendNoGradientBack) {
  TrainOptions o = small();
  o.grid = {1, 4, 1};
  o.accum = 4;
  o.steps = 6;
  for (PipeSchedule kind : {PipeSchedule::kLocal, PipeSchedule::kLocalOverlap}) {
    o.pipeSchedule = kind;
    const TrainResult r = runOn(4, o);
    const SiteStats back = r.sites[static_cast<size_t>(Site::kPpBwd)];
    const unsigned long long perSend = static_cast<unsigned long long>(o.batch) * o.seq * o.model.channels * 4;
    if (kind == PipeSchedule::kLocal) {
      EXPECT_EQ(back.calls, 0u);
    } else {
      EXPECT_EQ(back.rawBytes, 3 * perSend * static_cast<unsigned>(o.steps * o.accum))
          << "stages 1-3 send one gradient per micro-batch";
    }
    EXPECT_LT(r.losses.back(), r.losses.front() - 0.1) << scheduleName(kind);
  }
}

// Compression changes the numbers by its bound, not the training: int8 activations in every
// place a layout can put them stay within 0.02 nats of the uncompressed losses.
TEST(SiteCompression, Int8EverywhereStaysClose) {
  TrainOptions o = small();
  o.grid = {1, 2, 2};
  o.accum = 2;
  o.steps = 6;
  const TrainResult plain = runOn(4, o);
  for (const char* spec : {"tp.fwd=int8", "tp.bwd=int8", "pp.fwd=int8", "pp.bwd=int8", "emb.sync=int8"}) set(o, spec);
  const TrainResult squeezed = runOn(4, o);
  for (size_t i = 0; i < plain.losses.size(); ++i) EXPECT_NEAR(squeezed.losses[i], plain.losses[i], 0.02) << i;
  for (Site s : {Site::kTpFwd, Site::kTpBwd, Site::kPpFwd, Site::kPpBwd, Site::kEmbSync}) {
    const SiteStats& st = squeezed.sites[static_cast<size_t>(s)];
    EXPECT_LT(st.wireBytes * 3, st.rawBytes) << siteName(s);
  }
}

// scale=channel: a tokens x channels allreduce gets one scale per channel over its tokens
// (Bian et al.): every element lands within the codec's bound for its own channel's
// magnitude, so channels a thousand times smaller than others survive, which blocks along a
// row (mixing channels) cannot promise.
TEST(SiteCompression, ChannelScalesBoundEachChannelByItsOwnMagnitude) {
  const size_t rows = 64, cols = 96, count = rows * cols;
  const int n = 2;
  auto input = [&](int rank, std::vector<float>& x) {
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < cols; ++c)
        x[r * cols + c] = std::ldexp(std::sin(0.37f * float(r * cols + c) + float(rank)), int(c % 6) * 2 - 5);
  };
  for (const char* spec : {"tp.fwd=int4:scale=channel", "tp.fwd=int4"}) {
    const SiteCodec codec = parseSiteCodec(spec).second;
    std::vector<std::vector<float>> out(n, std::vector<float>(count));
    runRanks(nullptr, nullptr, n, [&](cclComm_t world, int rank) {
      std::array<cclComm_t, static_cast<size_t>(Group::kCount)> comms{};
      comms[static_cast<size_t>(Group::kWorld)] = world;
      ASSERT_EQ(cclCommSplit(world, 0, rank, &comms[static_cast<size_t>(Group::kTp)], nullptr), cclSuccess);
      Comm comm(comms, 1);
      comm.setCodec(Site::kTpFwd, codec);
      input(rank, out[static_cast<size_t>(rank)]);
      if (codec.channelScales) {
        // Only a blocking allreduce can travel transposed: the others refuse, before sending.
        std::vector<float> all(count * n);
        EXPECT_THROW(comm.allGather(Site::kTpFwd, 0, out[static_cast<size_t>(rank)].data(), all.data(), count, 0),
                     std::runtime_error);
      }
      comm.allReduce(Site::kTpFwd, 0, out[static_cast<size_t>(rank)].data(), count, cclSum, 0, cols);
    });
    // The bound's terms (ccl.h): |x| summed over the ranks at the element, and its largest
    // over the block the element travels in: the element's channel, with channel scales.
    std::vector<float> exact(count, 0.0f), sumAbs(count, 0.0f), a(count), chanMax(cols, 0.0f);
    for (int r = 0; r < n; ++r) {
      input(r, a);
      for (size_t i = 0; i < count; ++i) exact[i] += a[i], sumAbs[i] += std::fabs(a[i]);
    }
    for (size_t i = 0; i < count; ++i) chanMax[i % cols] = std::max(chanMax[i % cols], sumAbs[i]);
    size_t outside = 0;
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(out[1][i], out[0][i]) << "every rank the same bits";
      double bound = 0;
      ASSERT_EQ(cclCodecErrorBound(&codec.compression, sumAbs[i], chanMax[i % cols], n, &bound), cclSuccess);
      outside += std::fabs(out[0][i] - exact[i]) > bound;
    }
    if (codec.channelScales)
      EXPECT_EQ(outside, 0u) << "every element within its channel's bound";
    else
      EXPECT_GT(outside, count / 6) << "blocks along a row mix channels: the small ones lose more";
  }
}

// --codec-error-every: sampled calls also run exactly and the log's codec_error records say
// what each block's codec changed: nothing without a codec, more at 2 bits than at 8.
TEST(SiteCompression, SampledCodecErrorsAreLogged) {
  double err[2] = {0, 0};
  for (int k = 0; k < 2; ++k) {
    TrainOptions o = small();
    o.grid = {1, 1, 2};
    o.codecErrorEvery = 2;
    o.logPath = harness::tempDir() + "errors" + std::to_string(k) + ".jsonl";
    set(o, k == 0 ? "tp.fwd=int8:layers=1-" : "tp.fwd=int2:layers=1-");
    runOn(2, o);
    std::ifstream in(o.logPath);
    int records = 0;
    for (std::string line; std::getline(in, line);) {
      if (line.find("\"codec_error\"") == std::string::npos) continue;
      ++records;
      EXPECT_NE(line.find("\"site\":\"tp.fwd\""), std::string::npos) << line;
      EXPECT_EQ(line.find("\"layer\":0"), std::string::npos) << "block 0 has no codec: " << line;
      const double rel = std::stod(line.substr(line.find("\"rel_l2\":") + 9));
      EXPECT_GT(rel, 0.0) << line;
      EXPECT_LT(rel, 1.0) << line;
      err[k] += rel;
    }
    EXPECT_EQ(records, 3) << "blocks 1-3";
  }
  EXPECT_GT(err[1], 4 * err[0]) << "int2 changes more than int8";
}

// On sampled steps the sender of powersgd with error feedback (lazy error propagation) logs
// ||memory|| / ||G|| and, with the receiver's ||G'||, the energy P Q^T captured, per boundary.
TEST(SiteCompression, SampledPowerSgdEnergyIsLogged) {
  TrainOptions o = small();
  o.grid = {1, 2, 1};
  o.accum = 2;
  o.codecErrorEvery = 1;
  o.logPath = harness::tempDir() + "energy.jsonl";
  set(o, "pp.bwd=powersgd:rank=2:feedback=ef");
  runOn(2, o);
  std::ifstream in(o.logPath);
  int records = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"codec_energy\"") == std::string::npos) continue;
    ++records;
    EXPECT_NE(line.find("\"site\":\"pp.bwd\",\"stage\":1"), std::string::npos) << "stage 1 sends back: " << line;
    const double energy = std::stod(line.substr(line.find("\"captured_energy\":") + 18));
    const double memory = std::stod(line.substr(line.find("\"memory_over_grad\":") + 19));
    EXPECT_GT(energy, 0.0) << line;
    EXPECT_LT(energy, 1.0) << "rank 2 of a 16 x 32 gradient loses some: " << line;
    EXPECT_GT(memory, 0.0) << line;
  }
  EXPECT_EQ(records, 1);
}

}  // namespace
}  // namespace gpt
