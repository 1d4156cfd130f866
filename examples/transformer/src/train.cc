// SPDX-License-Identifier: BSD-3-Clause
#include "train.h"

#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>
#include <set>
#include <stdexcept>

#include "checkpoint.h"
#include "data.h"
#include "data_parallel.h"
#include "elastic.h"
#include "model.h"
#include "params.h"
#include "pipeline.h"
#include "progress.h"
#include "shard.h"
#include "tensor_parallel.h"

namespace gpt {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

long peakRss() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss * 1024L;
}

// The whole model's values of a buffer laid out like this rank's (`local`, of which
// [begin, end) is valid), assembled at world rank 0: each element from the one rank that
// speaks for it, the others adding zeros.
std::vector<float> assembleWhole(const Model<float>& m, Comm& comm, const float* local,
                                 std::pair<size_t, size_t> range) {
  const size_t P = parameterCount(m.config);
  std::vector<float> mine(P, 0.0f), whole(P, 0.0f);
  insertShard(m.layout, m.shard, local, range.first, range.second, mine.data());
  comm.reduceToRoot(Site::kStat, mine.data(), whole.data(), P);
  return whole;
}

// With sequence parallelism every rank of a tensor-parallel group computed the gradient of
// its rows only for the tensors they all hold whole: summed over the group once per step.
void sumWholeTensorGradients(Model<float>& m, Comm& comm, std::vector<float>& pack) {
  if (!m.shard.sequenceParallel || m.shard.tp == 1) return;
  pack.clear();
  for (const TensorInfo& t : m.layout)
    if (t.split == Split::kWhole)
      pack.insert(pack.end(), m.grads.begin() + t.offset, m.grads.begin() + t.offset + t.size());
  comm.allReduce(Site::kTpGrad, 0, pack.data(), pack.size(), cclSum);
  size_t at = 0;
  for (const TensorInfo& t : m.layout)
    if (t.split == Split::kWhole) {
      std::copy(pack.begin() + at, pack.begin() + at + t.size(), m.grads.begin() + t.offset);
      at += t.size();
    }
}

// A local head's gradients: summed over a sequence-parallel group (each rank saw its rows),
// averaged over the data-parallel group.
void reduceLocalHeadGradients(LocalHead& head, const Shard& shard, Comm& comm) {
  if (shard.sequenceParallel && shard.tp > 1) comm.allReduce(Site::kTpGrad, 2, head.grads(), head.count(), cclSum);
  if (comm.size(Group::kDp) > 1) comm.allReduce(Site::kDpGrad, -2, head.grads(), head.count(), cclAvg);
}

// Sum of squares of the gradient elements this rank speaks for (each element of the whole
// model counted on one rank).
double gradientSquares(const Model<float>& m, std::pair<size_t, size_t> range) {
  double sq = 0;
  for (const TensorInfo& t : m.layout) {
    if (!speaksFor(t, m.shard)) continue;
    const size_t lo = std::max(range.first, t.offset), hi = std::min(range.second, t.offset + t.size());
    for (size_t i = lo; i < hi; ++i) sq += static_cast<double>(m.grads[i]) * m.grads[i];
  }
  return sq;
}

// Whether this rank's head output is part of the loss: sequence parallel ranks each hold
// some rows; without it the tensor-parallel ranks repeat rank 0's.
bool reportsLoss(const Shard& s) { return s.head() && (s.sequenceParallel || s.tpRank == 0); }

// Mean validation loss over o.valSequences windows, spread over the data-parallel groups.
double validate(Pipeline& pipe, const Model<float>& m, const Corpus& corpus, const TrainOptions& o, Comm& comm) {
  comm.setEvaluating(true);
  double sums[2] = {0, 0};  // loss sum, windows
  const int n = comm.size(Group::kDp);
  for (int first = comm.rank(Group::kDp) * o.batch; first < o.valSequences; first += n * o.batch) {
    Batch b;
    const int count = std::min(o.batch, o.valSequences - first);
    for (int i = 0; i < count; ++i)
      appendValSequence(corpus, static_cast<uint64_t>(first + i), static_cast<uint64_t>(o.valSequences), o.seq, b);
    const double loss = pipe.evaluate(b, count);
    if (reportsLoss(m.shard)) sums[0] += loss * count;
    if (m.shard.head() && m.shard.tpRank == 0) sums[1] += count;
  }
  comm.allReduceDoubles(Site::kStat, sums, 2, cclSum);
  comm.setEvaluating(false);
  return sums[0] / sums[1];
}

// Every rank's spans at world rank 0, written there as one Chrome trace; with more than one
// stage, the bubble of each traced step of the first pipeline.
std::vector<BubbleReport> writeTrace(const std::string& path, const Timeline& timeline, Comm& comm, const Grid& grid,
                                     const Pipeline& pipe) {
  const int ranks = comm.size(Group::kWorld);
  const bool root = comm.rank(Group::kWorld) == 0;
  double most = static_cast<double>(timeline.spans().size());
  comm.allReduceDoubles(Site::kStat, &most, 1, cclMax);
  const size_t width = static_cast<size_t>(most);
  std::vector<Span> mine(timeline.spans());
  const uint64_t count = mine.size();
  mine.resize(std::max<size_t>(width, 1));
  std::vector<uint64_t> counts(static_cast<size_t>(ranks));
  comm.gatherToRoot(Site::kStat, &count, counts.data(), sizeof(count));
  std::vector<Span> all(root ? mine.size() * static_cast<size_t>(ranks) : mine.size());
  comm.gatherToRoot(Site::kStat, mine.data(), all.data(), mine.size() * sizeof(Span));
  if (!root) return {};
  std::vector<std::vector<Span>> byRank;
  std::vector<RankPlace> places;
  for (int r = 0; r < ranks; ++r) {
    const auto first = all.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(r) * mine.size());
    byRank.emplace_back(first, first + static_cast<std::ptrdiff_t>(counts[static_cast<size_t>(r)]));
    const GridPlace at = placeOf(grid, r);
    places.push_back({r, at.d, at.p, at.t});
  }
  writeChromeTrace(path, byRank, places, [](int s) { return siteName(static_cast<Site>(s)); });
  std::vector<BubbleReport> bubbles;
  if (grid.pp == 1) return bubbles;
  std::vector<std::vector<Span>> stages;
  for (int p = 0; p < grid.pp; ++p) stages.push_back(byRank[static_cast<size_t>(rankOf(grid, {0, p, 0}))]);
  std::set<int> steps;  // the traced steps this run ran
  for (const Span& s : stages.front()) steps.insert(s.step);
  for (int step : steps) bubbles.push_back(pipelineBubble(stages, pipe.schedules(), step));
  return bubbles;
}

// The sites' codecs as --compress spells them, ", "-separated; "none" without any.
std::string compressionName(const TrainOptions& o) {
  std::string out;
  for (const SiteInfo& s : kSites) {
    const SiteCodec& c = o.codecs[static_cast<size_t>(s.site)];
    if (c.active()) out += (out.empty() ? "" : ", ") + describe(s.site, c);
  }
  if (o.autoencoderDim > 0)
    out += (out.empty() ? "" : ", ") + std::string("tp.fwd autoencoder dim ") + std::to_string(o.autoencoderDim);
  return out.empty() ? "none" : out;
}

std::string layoutName(const Grid& g, const TrainOptions& o) {
  std::string s = "dp" + std::to_string(g.dp) + " x pp" + std::to_string(g.pp) + " x tp" + std::to_string(g.tp);
  if (g.tp > 1 && o.sequenceParallel) s += " sp";
  if (g.pp > 1) s += std::string(" ") + scheduleName(o.pipeSchedule);
  if (o.zero && g.dp > 1) s += " zero1";
  return s + " m" + std::to_string(o.accum);
}

double opTotal(const Model<float>& m) { return std::accumulate(m.opSeconds.begin(), m.opSeconds.end(), 0.0); }

double commTotal(const Comm& comm) {
  double s = 0;
  for (const SiteInfo& site : kSites)
    if (site.site != Site::kEval) s += comm.stats(site.site).seconds;
  return s;
}

TrainResult trainOn(const TrainOptions& o, const Grid& grid, Comm& comm, ElasticState* elastic) {
  const bool lead = comm.rank(Group::kWorld) == 0;
  const GridPlace at = placeOf(grid, comm.rank(Group::kWorld));
  for (const SiteInfo& s : kSites) comm.setCodec(s.site, o.codecs[static_cast<size_t>(s.site)]);
  comm.setStage(at.p);
  const Corpus corpus = loadCorpus(o.data, static_cast<size_t>(o.seq) + 1);

  Shard shard;
  shard.tp = grid.tp;
  shard.tpRank = at.t;
  shard.sequenceParallel = o.sequenceParallel && grid.tp > 1;
  shard.pp = grid.pp;
  shard.stage = at.p;
  std::tie(shard.firstLayer, shard.endLayer) = stageLayers(o.model.layers, grid.pp, at.p);
  Model<float> model = makeModel<float>(o.model, shard, o.seed);
  std::unique_ptr<Autoencoder> autoencoder;
  if (o.autoencoderDim > 0)
    autoencoder =
        std::make_unique<Autoencoder>(o.model, o.autoencoderDim, std::max(o.autoencoderFirst, shard.firstLayer),
                                      std::min(o.autoencoderEnd, shard.endLayer), o.seed, o.adamw);
  TensorParallelComm tensorParallel(comm, shard.sequenceParallel, o.model.channels, autoencoder.get());
  model.tp = &tensorParallel;
  DataParallel dp(comm, o, model);
  AdamW opt = makeAdamW(o.adamw, model.layout, dp.begin(), dp.end());
  Timeline timeline(o.tracePath.empty() ? 0 : o.traceStep, o.tracePath.empty() ? 0 : o.traceSteps);
  comm.setTimeline(&timeline);
  // Local updates: the head of stage s's local loss, on the stage that computes it.
  std::unique_ptr<LocalHead> localHead;
  if (hostsLocalHead(o.pipeSchedule, shard)) {
    const int owner = o.pipeSchedule == PipeSchedule::kLocal ? shard.stage : shard.stage - 1;
    localHead = std::make_unique<LocalHead>(o.model, o.seed + 0x10c4ull * static_cast<uint64_t>(owner + 1), o.adamw);
  }
  // TeraPipe: token slices, uniform or planned from this machine's measured slice times (the
  // slowest rank's, so that every rank plans alike).
  std::vector<int> bounds;
  double predicted = 0;
  if (o.slices > 1 || o.planSlices) {
    SliceTimes times = measureSliceTimes(model, o.seq, o.sliceGranularity);
    comm.allReduceDoubles(Site::kStat, times.table.data(), times.table.size(), cclMax);
    if (o.planSlices) {
      const SlicePlan plan = planSlices(times, grid.pp, o.accum);
      bounds = plan.bounds;
      predicted = plan.predicted;
    } else {
      bounds = uniformSlices(times, o.slices);
      predicted = predictedTime(times, bounds, grid.pp, o.accum);
    }
  }
  Pipeline pipe(model, comm, o.pipeSchedule, o.accum, o.seq, &timeline, localHead.get(), bounds);
  if (dp.overlaps()) pipe.setBlockDone([&dp](int layer) { dp.blockReady(layer); });
  std::vector<int> stageOf;
  for (int r = 0; r < grid.size(); ++r) stageOf.push_back(placeOf(grid, r).p);

  int startStep = 0;
  uint64_t dataSeed = o.seed;
  const bool resumeElastic = elastic && elastic->resume >= 0;
  if (resumeElastic || !o.resumePath.empty()) {
    const Checkpoint ck =
        resumeElastic ? elastic->kept[static_cast<size_t>(elastic->resume)].ck : loadCheckpoint(o.resumePath);
    if (parameterCount(ck.config) != parameterCount(o.model) || ck.config.layers != o.model.layers ||
        ck.config.channels != o.model.channels || ck.config.heads != o.model.heads ||
        ck.config.maxSeq != o.model.maxSeq)
      throw std::runtime_error("checkpoint " + o.resumePath + " holds another model shape than the flags ask for");
    extractShard(model.layout, shard, ck.params.data(), model.params.data());
    std::vector<float> local(shardCount(model.layout));
    for (auto [whole, moment] : {std::pair{&ck.m, &opt.m}, std::pair{&ck.v, &opt.v}}) {
      extractShard(model.layout, shard, whole->data(), local.data());
      std::copy(local.begin() + static_cast<std::ptrdiff_t>(dp.begin()),
                local.begin() + static_cast<std::ptrdiff_t>(dp.end()), moment->begin());
    }
    opt.steps = ck.optimizerSteps;
    startStep = static_cast<int>(ck.step);
    dataSeed = ck.seed;
  }

  const long long tokensPerStep = static_cast<long long>(grid.dp) * o.accum * o.batch * o.seq;
  JsonLog log(lead ? o.logPath : "", elastic && elastic->restarted);
  Progress progress(lead && o.progress, o.steps);
  TrainResult result;
  result.layout = layoutName(grid, o);
  result.sliceBounds = bounds.empty() ? std::vector<int>{0, o.seq} : bounds;
  result.predictedSliceSeconds = predicted;
  result.compression = compressionName(o);
  result.unigramEntropy = unigramEntropy(corpus.val);
  auto wholeState = [&](const std::vector<float>& moment) {
    std::vector<float> local(shardCount(model.layout), 0.0f);
    std::copy(moment.begin(), moment.end(), local.begin() + static_cast<std::ptrdiff_t>(dp.begin()));
    return assembleWhole(model, comm, local.data(), dp.spokenRange(true));
  };
  auto saveAt = [&](int nextStep) {
    if (o.checkpointPath.empty()) return;
    Checkpoint ck;
    ck.config = o.model;
    ck.step = static_cast<uint64_t>(nextStep);
    ck.optimizerSteps = opt.steps;
    ck.seed = dataSeed;
    ck.params = assembleWhole(model, comm, model.params.data(), dp.spokenRange(false));
    ck.m = wholeState(opt.m);
    ck.v = wholeState(opt.v);
    if (lead) saveCheckpoint(o.checkpointPath, ck);
  };

  const auto runStart = Clock::now();
  double computeTotal = 0, commSeconds = 0;
  std::vector<float> pack;
  std::vector<Batch> batches(static_cast<size_t>(o.accum));
  int ran = 0;
  for (int step = startStep; step < o.steps; ++step) {
    timeline.beginStep(step);
    comm.setStep(step);
    const auto t0 = Clock::now();
    const double ops0 = opTotal(model), comm0 = commTotal(comm);
    zeroGrads(model);
    if (autoencoder) autoencoder->zeroGrads();
    if (localHead) localHead->zeroGrads();
    for (int a = 0; a < o.accum; ++a) {
      Batch& b = batches[static_cast<size_t>(a)];
      b = Batch{};
      const uint64_t first = (static_cast<uint64_t>(at.d) * o.accum + a) * o.batch;
      for (int i = 0; i < o.batch; ++i) appendTrainSequence(corpus, dataSeed, step, first + i, o.seq, b);
    }
    comm.setErrorSampling(o.codecErrorEvery > 0 && step % o.codecErrorEvery == 0);
    const double headLoss = pipe.step(batches, 1.0f / static_cast<float>(o.accum));
    comm.setErrorSampling(false);
    if (!o.dumpGradsPath.empty() && step == o.dumpGradsStep) {
      const std::string path = o.dumpGradsPath + "." + std::to_string(comm.rank(Group::kWorld));
      std::FILE* f = std::fopen(path.c_str(), "wb");
      const bool ok = f && std::fwrite(model.grads.data(), sizeof(float), model.grads.size(), f) == model.grads.size();
      if (f) std::fclose(f);
      if (!ok) throw std::runtime_error("cannot write the gradients to " + path);
    }
    sumWholeTensorGradients(model, comm, pack);
    tensorParallel.reduceAutoencoderGradients();
    if (localHead) reduceLocalHeadGradients(*localHead, shard, comm);
    if (dp.zero()) {
      dp.syncEmbedding();
      dp.reduceGradients();
    } else {
      // After the data-parallel sum, so that both stages' copies of wte get the same bits.
      dp.reduceGradients();
      dp.syncEmbedding();
    }
    double stats[2] = {gradientSquares(model, dp.spokenRange(true)), reportsLoss(shard) ? headLoss / o.accum : 0.0};
    comm.allReduceDoubles(Site::kStat, stats, 2, cclSum);
    const double norm = std::sqrt(stats[0]), loss = stats[1] / grid.dp;
    if (!std::isfinite(norm) || !std::isfinite(loss))
      throw std::runtime_error("training diverged at step " + std::to_string(step) + " (loss or gradient not finite)");
    const float lr = learningRate(o.schedule, step, o.steps);
    const double u0 = Timeline::now();
    adamwStep(opt, model.params.data(), model.grads.data(), lr, clipScale(norm, o.clip));
    if (autoencoder) autoencoder->update(lr);
    if (localHead) localHead->update(lr);
    const double u1 = Timeline::now();
    timeline.add({u0, u1, SpanKind::kUpdate});
    dp.shareParameters();
    // The step is complete here: what the survivors go on from if a rank is lost later.
    if (elastic) keepStep(*elastic, comm, dp, model, opt, step, dataSeed);
    const auto t1 = Clock::now();
    const double compute = opTotal(model) - ops0 + (u1 - u0), communication = commTotal(comm) - comm0;
    computeTotal += compute;
    commSeconds += communication;
    ++ran;
    const double tokS = static_cast<double>(tokensPerStep) / seconds(t0, t1);
    result.finalTrainLoss = loss;
    result.losses.push_back(loss);
    if (!o.logPath.empty()) log.step(step, loss, lr, norm, tokS, compute, communication, gatherCounters(comm, stageOf));
    progress.step(step, loss, tokS);
    const bool last = step + 1 == o.steps;
    if ((o.valEvery > 0 && (step + 1) % o.valEvery == 0) || last) {
      result.finalValLoss = validate(pipe, model, corpus, o, comm);
      log.validation(step, result.finalValLoss, seconds(runStart, Clock::now()));
      progress.note("step " + std::to_string(step + 1) + ": validation loss " + std::to_string(result.finalValLoss));
    }
    const bool stop = o.stopAfter > 0 && ran >= o.stopAfter;
    if (last || stop || (o.saveEvery > 0 && (step + 1) % o.saveEvery == 0)) saveAt(step + 1);
    if (stop) break;
  }
  progress.finish();
  const double elapsed = seconds(runStart, Clock::now());
  result.stepsRun = ran;
  result.tokensPerSecond = ran > 0 ? static_cast<double>(tokensPerStep) * ran / elapsed : 0;
  result.gradRawBytes = comm.stats(Site::kDpGrad).rawBytes;
  result.gradWireBytes = comm.stats(Site::kDpGrad).wireBytes;
  result.peakRssBytes = peakRss();
  result.params = assembleWhole(model, comm, model.params.data(), dp.spokenRange(false));
  if (!lead) result.params.clear();
  for (size_t k = 0; k < model.opSeconds.size(); ++k)
    result.opSeconds.emplace_back(opKindName(static_cast<OpKind>(k)), model.opSeconds[k]);
  if (!o.tracePath.empty()) result.bubbles = writeTrace(o.tracePath, timeline, comm, grid, pipe);
  result.counters = gatherCounters(comm, stageOf);
  if (o.codecErrorEvery > 0) {
    std::vector<double>& errors = comm.codecErrors();
    comm.allReduceDoubles(Site::kStat, errors.data(), errors.size(), cclSum);
    log.codecErrors(errors, comm.layers());
  }
  if (lead) result.sites = siteTotals(result.counters, nullptr);
  log.summary(result, result.layout, computeTotal, commSeconds, elapsed, result.counters);
  return result;
}

}  // namespace

TrainResult train(const TrainOptions& o, cclComm_t world) {
  omp_set_num_threads(std::max(1, o.threads));
  if (o.seq > o.model.maxSeq)
    throw std::invalid_argument("--seq " + std::to_string(o.seq) + " exceeds the model's --max-seq " +
                                std::to_string(o.model.maxSeq));
  if (o.batch < 1 || o.accum < 1 || o.steps < 1)
    throw std::invalid_argument("--batch, --accum and --steps must be >= 1");
  const std::string shape = configProblem(o.model);
  if (!shape.empty()) throw std::invalid_argument(shape);
  int worldSize = 1;
  if (cclCommCount(world, &worldSize) != cclSuccess) throw std::runtime_error(cclGetLastError(world));
  Grid grid = o.grid;
  const std::string problem = resolveGrid(grid, worldSize, o.model, o.seq, o.sequenceParallel);
  if (!problem.empty()) throw std::invalid_argument(problem);
  if (o.overlapDp && (o.zero || o.fuseEmbeddingSync || grid.tp > 1 || localUpdates(o.pipeSchedule) ||
                      o.codecs[static_cast<size_t>(Site::kDpGrad)].compression.codec == cclCodecPowerSgd))
    throw std::invalid_argument(
        "--overlap-dp all-reduces each block's gradient during the step's last backward: not with --zero, "
        "--fuse-emb-sync, --tp > 1, a local-update schedule or dp.grad=powersgd");
  if (o.fuseEmbeddingSync && o.zero)
    throw std::invalid_argument(
        "--fuse-emb-sync sums wte's gradient in place of the data-parallel all-reduce: not "
        "with --zero");
  if (o.zero && o.codecs[static_cast<size_t>(Site::kDpGrad)].compression.codec == cclCodecPowerSgd)
    throw std::invalid_argument("dp.grad=powersgd compresses an all-reduce: not with --zero (a reduce-scatter)");
  if ((o.slices > 1 || o.planSlices) &&
      (o.pipeSchedule != PipeSchedule::kGPipe || o.batch != 1 || o.sequenceParallel || o.sliceGranularity < 1))
    throw std::invalid_argument(
        "token slices (--slices) cut one sequence per micro-batch through a GPipe schedule: "
        "--schedule gpipe --batch 1, no --sp, --slice-granularity >= 1");
  if (localUpdates(o.pipeSchedule) && grid.pp == 1)
    throw std::invalid_argument(std::string("--schedule ") + scheduleName(o.pipeSchedule) +
                                " trains pipeline stages on local losses: it needs --pp > 1");
  if (o.autoencoderDim > 0 && (grid.tp == 1 || o.sequenceParallel))
    throw std::invalid_argument(
        "--autoencoder encodes the all-reduce after each row-parallel layer: it needs --tp > 1 "
        "and no --sp");
  if (o.autoencoderDim > 0 && o.codecs[static_cast<size_t>(Site::kTpFwd)].active())
    throw std::invalid_argument("--autoencoder and a tp.fwd codec both compress the same sums: choose one");
  if (o.sequenceParallel && grid.tp > 1)
    for (Site s : {Site::kTpFwd, Site::kTpBwd})
      if (o.codecs[static_cast<size_t>(s)].compression.codec == cclCodecPowerSgd)
        throw std::invalid_argument(std::string(siteName(s)) +
                                    "=powersgd compresses all-reduces: not with --sp (reduce-scatter, all-gather)");
  if (o.elastic && o.zero && (grid.tp != 1 || grid.pp != 1))
    throw std::invalid_argument("--elastic with --zero keeps ZeRO-1's shards on ring neighbours: --tp 1 --pp 1");
  if (o.elastic && (o.autoencoderDim > 0 || localUpdates(o.pipeSchedule)))
    throw std::invalid_argument(
        "--elastic goes on from the model's and AdamW's state: not with --autoencoder or a local-update schedule "
        "(their own state is not kept)");
  if (!o.elastic) {
    Comm comm(splitGroups(world, grid, o.fuseEmbeddingSync), o.model.layers);
    try {
      return trainOn(o, grid, comm, nullptr);
    } catch (...) {
      comm.abort();  // peers blocked in this rank's groups fail instead of waiting
      throw;
    }
  }
  ElasticState state;
  std::vector<cclComm_t> shrunk;  // the worlds made here, destroyed on the way out
  struct Owned {
    std::vector<cclComm_t>& comms;
    ~Owned() {
      for (auto it = comms.rbegin(); it != comms.rend(); ++it) cclCommDestroy(*it);
    }
  } owned{shrunk};
  for (cclComm_t current = world;;) {
    Comm comm(splitGroups(current, grid, o.fuseEmbeddingSync), o.model.layers);
    try {
      return trainOn(o, grid, comm, &state);
    } catch (const CommError& e) {
      comm.abort();
      std::fprintf(stderr, "gpt_train: %s\n", e.what());
      current = goOnWithoutLost(current, o.model, grid, state);
      if (!current) {  // this rank's replica lost a rank: the others go on without it
        TrainResult left;
        left.left = true;
        return left;
      }
      shrunk.push_back(current);
      state.restarted = true;
    } catch (...) {
      comm.abort();
      throw;
    }
  }
}

}  // namespace gpt
