// SPDX-License-Identifier: BSD-3-Clause
// gpt_train: trains the reference GPT on a text file over a grid of data-, pipeline- and
// tensor-parallel ranks on ccl, or generates text from a checkpoint. `gpt_train --help`
// lists every flag.
#include <omp.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "checkpoint.h"
#include "launch.h"
#include "model.h"
#include "params.h"
#include "sample.h"
#include "shard.h"
#include "train.h"

namespace {

struct Cli {
  gpt::TrainOptions train;
  int ranks = 0;  // 0: tp x pp x dp
  std::string schedule = "1f1b";
  std::string rendezvous;
  std::string codec = "none";
  std::string feedback = "none";
  int codecBlock = 0;
  double bucketMb = 8;
  int sampleBytes = 0;
  std::string prompt = "In the beginning";
  float temperature = 0.8f;
  int topK = 40;
  std::string generateFrom;           // sample from this checkpoint and exit
  std::vector<std::string> compress;  // --compress SITE=CODEC[:key=value]...
  std::string autoencoderLayers;
  std::string slices = "1";
};

void addFlags(CLI::App& app, Cli& c) {
  // A flag given twice takes its last value, so a command line can override an earlier one.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  gpt::TrainOptions& t = c.train;
  app.add_option("--data", t.data, "UTF-8 text file to train on (its byte-token file is made beside it)");
  app.add_option("--layers", t.model.layers, "Transformer blocks")->capture_default_str();
  app.add_option("--channels", t.model.channels, "Model width d_model")->capture_default_str();
  app.add_option("--heads", t.model.heads, "Attention heads (must divide --channels)")->capture_default_str();
  app.add_option("--max-seq", t.model.maxSeq, "Longest sequence the model takes (position embeddings)")
      ->capture_default_str();
  app.add_option("--seq", t.seq, "Training sequence length (<= --max-seq)")->capture_default_str();
  app.add_option("--batch", t.batch, "Micro-batch: sequences per forward/backward and rank")->capture_default_str();
  app.add_option("--accum,--microbatches", t.accum,
                 "Micro-batches per step and data-parallel rank (gradient accumulation; a pipeline's micro-batches)")
      ->capture_default_str();
  app.add_option("--steps", t.steps, "Optimiser steps")->capture_default_str();
  app.add_option("--lr", t.schedule.lr, "Peak learning rate")->capture_default_str();
  app.add_option("--min-lr-ratio", t.schedule.minLrRatio, "Cosine decay ends at lr times this")->capture_default_str();
  app.add_option("--warmup", t.schedule.warmup, "Linear warm-up steps")->capture_default_str();
  app.add_option("--weight-decay", t.adamw.weightDecay, "AdamW weight decay (2-D weights only)")->capture_default_str();
  app.add_option("--clip", t.clip, "Global gradient-norm clipping (0: off)")->capture_default_str();
  app.add_option("--seed", t.seed, "Seed of initialisation and data order")->capture_default_str();
  app.add_option("--codec-error-every", t.codecErrorEvery,
                 "Every this many steps, each compressed allreduce also runs uncompressed on a copy; the log's "
                 "codec_error records give the relative error per site and block (0: never)")
      ->capture_default_str();
  app.add_option("--val-every", t.valEvery, "Validation every this many steps (0: at the end only)")
      ->capture_default_str();
  app.add_option("--val-seqs", t.valSequences, "Validation windows")->capture_default_str();
  app.add_option("--ranks", c.ranks, "Ranks as threads of this process (0: tp x pp x dp; under mpirun: 1)")
      ->capture_default_str();
  app.add_option("--tp", t.grid.tp, "Tensor-parallel ranks (must divide --heads)")->capture_default_str();
  app.add_option("--pp", t.grid.pp, "Pipeline stages (at most --layers)")->capture_default_str();
  app.add_option("--dp", t.grid.dp, "Data-parallel ranks (0: the ranks that tp x pp leaves, else 1)")
      ->capture_default_str();
  app.add_flag("--sp", t.sequenceParallel, "Sequence parallelism with --tp > 1 (--tp must divide --seq)");
  app.add_option("--schedule", c.schedule,
                 "Pipeline schedule: 1f1b, gpipe, or local updates: local (chunked: a local head per stage but the "
                 "last, no gradient between stages) or local-overlap (a stage's head after the next stage's first "
                 "block)")
      ->capture_default_str();
  app.add_option("--trace", t.tracePath, "Chrome trace (JSON) of every rank's spans of the traced steps");
  app.add_option("--trace-step", t.traceStep, "First traced step (0-based)")->capture_default_str();
  app.add_option("--trace-steps", t.traceSteps, "Traced steps")->capture_default_str();
  app.add_option("--dump-grads", t.dumpGradsPath,
                 "Write each rank's gradients of --dump-grads-step, before any reduction, to FILE.<rank> (raw fp32)");
  app.add_option("--dump-grads-step", t.dumpGradsStep, "The step --dump-grads writes (0-based)")->capture_default_str();
  app.add_option("--rendezvous", c.rendezvous,
                 "One rank per process started with RANK and WORLD_SIZE set: the unique id goes through this file "
                 "(a new path per launch)");
  app.add_option("--threads", t.threads, "OpenMP/BLAS threads per rank")->capture_default_str();
  app.add_flag("--zero", t.zero, "ZeRO-1: shard the optimiser state, reduce-scatter gradients, all-gather parameters");
  app.add_flag("--elastic", t.elastic,
               "When a rank is lost, the others shrink the world to themselves (with --tp or --pp, the "
               "data-parallel replicas that lost a rank leave), rebuild the state of a step they completed (ZeRO-1: "
               "a lost rank's optimizer shard from the replica its previous rank keeps), and go on with fewer "
               "replicas (a smaller global batch)");
  app.add_option("--bucket-mb", c.bucketMb, "Gradient all-reduce bucket size in MiB")->capture_default_str();
  app.add_flag("--overlap-dp", t.overlapDp,
               "All-reduce each block's gradient on a host stream as soon as the step's last backward has passed "
               "it, overlapping dp.grad with the rest of the backward");
  app.add_option("--autoencoder", t.autoencoderDim,
                 "Bian et al.'s learned linear autoencoder on tp.fwd: every rank encodes its partial output into this "
                 "many channels, the group sums the codes, every rank decodes (needs --tp > 1, no --sp); 0: off")
      ->capture_default_str();
  app.add_option("--autoencoder-layers", c.autoencoderLayers, "Blocks A-B (inclusive) the autoencoder covers");
  app.add_option("--slices", c.slices,
                 "TeraPipe's token slices per micro-batch: N equal ones, or plan (chosen from slice times measured at "
                 "the start); needs --schedule gpipe --batch 1")
      ->capture_default_str();
  app.add_option("--slice-granularity", t.sliceGranularity, "Tokens of the planner's grid")->capture_default_str();
  app.add_flag("--fuse-emb-sync", t.fuseEmbeddingSync,
               "Sum wte's gradient over the first and last stage and every data-parallel rank in one collective "
               "(Optimus-CC), in place of the pair's all-reduce and its share of the data-parallel one");
  app.add_option("--codec", c.codec, "Codec of the gradient traffic (dp.grad): none or a ccl codec name")
      ->capture_default_str();
  app.add_option("--feedback", c.feedback, "Error feedback of dp.grad: none, ef or loco")->capture_default_str();
  app.add_option("--codec-block", c.codecBlock, "Quantiser block size (0: the codec's default)")->capture_default_str();
  app.add_option("--compress", c.compress,
                 "SITE=CODEC[:key=value]...: what a site carries (repeatable; sites tp.fwd, tp.bwd, pp.fwd, pp.bwd, "
                 "dp.grad, emb.sync; keys block, bits, scale-bits, keep, threshold, stochastic[=0|1], seed, "
                 "feedback=none|ef|loco, beta, reset, layers=A-B, stages=A-B, phases=warmup+steady+cooldown, "
                 "warmup=STEPS); later flags win over --codec for dp.grad")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--log", t.logPath,
                 "JSONL log: one record per step, validation records, a summary (appended to with --resume)");
  app.add_option("--checkpoint", t.checkpointPath, "Checkpoint written every --save-every steps and at the end");
  app.add_option("--save-every", t.saveEvery, "Checkpoint interval in steps (0: at the end only)")
      ->capture_default_str();
  app.add_option("--resume", t.resumePath, "Continue from this checkpoint");
  app.add_option("--stop-after", t.stopAfter,
                 "Stop after this many steps of this run, counted from the step it started from (across --elastic's "
                 "restarts), after checkpointing")
      ->capture_default_str();
  app.add_flag("!--no-progress", t.progress, "No progress line");
  app.add_option("--sample", c.sampleBytes, "Bytes of text to generate after training")->capture_default_str();
  app.add_option("--prompt", c.prompt, "Prompt of --sample and --generate-from")->capture_default_str();
  app.add_option("--temperature", c.temperature, "Sampling temperature")->capture_default_str();
  app.add_option("--top-k", c.topK, "Sample among the k most likely bytes (0: all)")->capture_default_str();
  app.add_option("--generate-from", c.generateFrom, "Generate --sample bytes from this checkpoint, no training");
}

// --codec, --feedback and --codec-block: the gradient site's codec, as --compress reads it.
gpt::SiteCodec gradientCodec(const Cli& c) {
  std::string spec = "dp.grad=" + c.codec + ":feedback=" + c.feedback;
  if (c.codecBlock) spec += ":block=" + std::to_string(c.codecBlock);
  return gpt::parseSiteCodec(spec).second;
}

int generateOnly(const Cli& c) {
  const gpt::Checkpoint ck = gpt::loadCheckpoint(c.generateFrom);
  gpt::Model<float> m = gpt::makeModel<float>(ck.config, 0);
  m.params = ck.params;
  m.p = gpt::bindParams(m.config, m.params.data());
  omp_set_num_threads(c.train.threads);
  std::printf(
      "%s%s\n", c.prompt.c_str(),
      gpt::generate(m, c.prompt, c.sampleBytes > 0 ? c.sampleBytes : 400, c.temperature, c.topK, c.train.seed).c_str());
  return 0;
}

void report(const Cli& c, const gpt::TrainResult& r, int ranks) {
  const gpt::TrainOptions& t = c.train;
  std::printf("layout: %s over %d rank(s); compression: %s\n", r.layout.c_str(), ranks, r.compression.c_str());
  const size_t P = gpt::parameterCount(t.model);
  std::printf(
      "final: train loss %.4f, validation loss %.4f (unigram entropy of the validation text %.4f nats, "
      "ratio %.3f)\n",
      r.finalTrainLoss, r.finalValLoss, r.unigramEntropy, r.finalValLoss / r.unigramEntropy);
  // Under --elastic the throughput is that of the ranks left, over the steps since they went
  // on without the lost ones: said so, with the run's steps in all.
  if (r.stepsInAll != r.stepsRun)
    std::printf(
        "throughput: %.0f tokens/s over the %d steps since going on without the lost rank(s) (%d steps in all), %d "
        "rank(s) x %d thread(s)\n",
        r.tokensPerSecond, r.stepsRun, r.stepsInAll, ranks, t.threads);
  else
    std::printf("throughput: %.0f tokens/s over %d steps, %d rank(s) x %d thread(s)\n", r.tokensPerSecond, r.stepsRun,
                ranks, t.threads);
  std::printf("gradients (dp.grad, rank 0): %.1f MB raw, %.1f MB on the wire (%.3f)\n", r.gradRawBytes / 1e6,
              r.gradWireBytes / 1e6, r.gradRawBytes ? double(r.gradWireBytes) / double(r.gradRawBytes) : 1.0);
  std::printf("sent per site, all ranks (MB raw / wire):");
  for (const gpt::SiteInfo& s : gpt::kSites) {
    const gpt::SiteStats& st = r.sites[static_cast<size_t>(s.site)];
    if (st.calls > 0) std::printf(" %s %.2f/%.2f", s.name, st.rawBytes / 1e6, st.wireBytes / 1e6);
  }
  std::printf("\n");
  if (r.sliceBounds.size() > 2) {
    std::printf("token slices:");
    for (size_t i = 0; i + 1 < r.sliceBounds.size(); ++i)
      std::printf(" [%d, %d)", r.sliceBounds[i], r.sliceBounds[i + 1]);
    std::printf("; predicted %.1f ms per step for the pipeline's computation\n", r.predictedSliceSeconds * 1e3);
  }
  for (const gpt::BubbleReport& b : r.bubbles)
    std::printf(
        "pipeline bubble, step %d (%d stages, %d micro-batches): %.3f in theory, %.3f replaying the measured "
        "computations with free transfers, %.3f measured over %.1f ms\n",
        b.step, b.stages, b.microbatches, b.theory, b.replayed, b.measured, b.sectionSeconds * 1e3);
  double opTotal = 0;
  for (const auto& [name, sec] : r.opSeconds) opTotal += sec;
  std::printf("time shares of forward+backward (rank 0):");
  for (const auto& [name, sec] : r.opSeconds)
    std::printf(" %s %.1f%%", name.c_str(), opTotal > 0 ? 100 * sec / opTotal : 0.0);
  std::printf("\n");
  if (t.grid.tp == 1 && t.grid.pp == 1) {
    const double theory = static_cast<double>(P) * 4 * 2 +                         // parameters and gradients
                          static_cast<double>(P) * 4 * 2 / (t.zero ? ranks : 1) +  // AdamW moments (sharded by ZeRO-1)
                          static_cast<double>(gpt::activationBytes(t.model, t.batch, t.seq));
    std::printf(
        "memory: peak resident %.1f MB for the process; a rank needs %.1f MB in theory (%zu parameters, "
        "their gradients and AdamW state, activations of one micro-batch)\n",
        r.peakRssBytes / 1e6, theory / 1e6, P);
    return;
  }
  size_t most = 0;  // parameters of the largest shard
  for (int stage = 0; stage < t.grid.pp; ++stage) {
    gpt::Shard s;
    s.tp = t.grid.tp, s.pp = t.grid.pp, s.stage = stage;
    std::tie(s.firstLayer, s.endLayer) = gpt::stageLayers(t.model.layers, s.pp, stage);
    most = std::max(most, gpt::shardCount(gpt::shardLayout(t.model, s)));
  }
  std::printf("memory: peak resident %.1f MB for the process; the largest rank holds %zu of the %zu parameters\n",
              r.peakRssBytes / 1e6, most, P);
}

// Ranks this process starts as threads: --ranks, else the grid's product (one under a
// launcher that starts a process per rank).
int threadRanks(const Cli& c) {
  if (c.ranks > 0) return c.ranks;
  if (gpt::launchedByMpi()) return 1;
  const gpt::Grid& g = c.train.grid;
  return g.tp * g.pp * std::max(g.dp, 1);
}

}  // namespace

int main(int argc, char** argv) {
  Cli c;
  CLI::App app{"gpt_train: a GPT (llm.c's GPT-2, byte vocabulary) trained on ccl's collectives"};
  addFlags(app, c);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (!c.generateFrom.empty()) return generateOnly(c);
    if (c.train.data.empty()) throw std::invalid_argument("--data is required (a text file to train on)");
    const std::string problem = gpt::configProblem(c.train.model);
    if (!problem.empty()) throw std::invalid_argument(problem);
    if (c.ranks < 0 || c.train.threads < 1) throw std::invalid_argument("--ranks must be >= 0, --threads >= 1");
    // Before the grid's product counts the ranks to start (0 of them would fail in ccl).
    for (const auto& [flag, value] : {std::pair{"--tp", c.train.grid.tp}, std::pair{"--pp", c.train.grid.pp}})
      if (value < 1) throw std::invalid_argument(std::string(flag) + " must be at least 1");
    if (c.train.grid.dp < 0) throw std::invalid_argument("--dp must be at least 0 (0: the ranks that tp x pp leaves)");
    if (!gpt::scheduleFromName(c.schedule, &c.train.pipeSchedule))
      throw std::invalid_argument("--schedule " + c.schedule + " is not 1f1b, gpipe, local or local-overlap");
    const int threads = threadRanks(c);
    if (threads > 4096) throw std::invalid_argument("--ranks must be at most 4096");
    c.train.codecs[static_cast<size_t>(gpt::Site::kDpGrad)] = gradientCodec(c);
    for (const std::string& spec : c.compress) {
      const auto [site, codec] = gpt::parseSiteCodec(spec);
      c.train.codecs[static_cast<size_t>(site)] = codec;
    }
    if (c.slices == "plan") {
      c.train.planSlices = true;
    } else {
      char* end = nullptr;
      c.train.slices = static_cast<int>(std::strtol(c.slices.c_str(), &end, 10));
      if (*end != '\0' || c.train.slices < 1)
        throw std::invalid_argument("--slices " + c.slices + " is not N >= 1 or plan");
    }
    if (!c.autoencoderLayers.empty()) {
      // The same range syntax as --compress's layers=.
      const gpt::SiteCodec r = gpt::parseSiteCodec("tp.fwd=none:layers=" + c.autoencoderLayers).second;
      c.train.autoencoderFirst = r.firstLayer;
      c.train.autoencoderEnd = r.endLayer;
    }
    // A site with a codec compresses its calls whatever their size, unless the user sets
    // the library's threshold.
    setenv("CCL_CODEC_MIN_BYTES", "0", 0);
    c.train.bucketBytes = static_cast<size_t>(c.bucketMb * (1 << 20));
    std::mutex mu;
    gpt::TrainResult lead;
    int ranks = threads;
    auto runRank = [&](cclComm_t comm, int) {
      // The communicator's own default codec stays off: every site says what it carries.
      if (cclCommSetCompression(comm, nullptr) != cclSuccess) throw std::runtime_error(cclGetLastError(comm));
      // train() shows the progress line on world rank 0 only (after an --elastic shrink, the
      // new one).
      gpt::TrainResult r = gpt::train(c.train, comm);
      // The report and the sample come from rank 0 of the world as it ended, over its ranks:
      // under --elastic the launch's rank 0 may have been lost or left.
      if (r.left || r.rank != 0) return;
      std::lock_guard<std::mutex> g(mu);
      lead = std::move(r);
      ranks = lead.ranks;
      report(c, lead, ranks);
      if (c.sampleBytes > 0) {
        gpt::Model<float> m = gpt::makeModel<float>(c.train.model, 0);
        m.params = lead.params;
        m.p = gpt::bindParams(m.config, m.params.data());
        std::printf("sample:\n%s%s\n", c.prompt.c_str(),
                    gpt::generate(m, c.prompt, c.sampleBytes, c.temperature, c.topK, c.train.seed).c_str());
      }
    };
    if (!c.rendezvous.empty())
      gpt::runEnvironmentRank(c.rendezvous, runRank);
    else
      gpt::runRanks(&argc, &argv, threads, runRank);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpt_train: %s\n", e.what());
    return 1;
  }
  return 0;
}
