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

// One rank's training run, in llm.c's manner: the state every verb below shares, made by
// setUpRank and setUpPipeline in this order (the timeline is attached to the communicator
// before the slice times are measured; model.tp is set before anything runs the model).
struct Run {
  Run(const TrainOptions& o, const Grid& grid, Comm& comm, ElasticState* elastic)
      : o(o),
        grid(grid),
        comm(comm),
        elastic(elastic),
        lead(comm.rank(Group::kWorld) == 0),
        at(placeOf(grid, comm.rank(Group::kWorld))),
        timeline(o.tracePath.empty() ? 0 : o.traceStep, o.tracePath.empty() ? 0 : o.traceSteps),
        dataSeed(o.seed),
        tokensPerStep(static_cast<long long>(grid.dp) * o.accum * o.batch * o.seq),
        batches(static_cast<size_t>(o.accum)) {}
  Run(const Run&) = delete;  // the pipeline and the communicator keep pointers into it
  Run& operator=(const Run&) = delete;

  const TrainOptions& o;
  const Grid& grid;
  Comm& comm;
  ElasticState* elastic;
  const bool lead;
  const GridPlace at;
  Corpus corpus;
  Shard shard;
  Model<float> model;
  std::unique_ptr<Autoencoder> autoencoder;
  std::unique_ptr<TensorParallelComm> tensorParallel;
  std::unique_ptr<DataParallel> dp;
  AdamW opt;
  Timeline timeline;
  std::unique_ptr<LocalHead> localHead;  // local updates: the head of a stage's local loss
  std::vector<int> bounds;               // TeraPipe's token slices (empty: none)
  double predicted = 0;                  // their planned time
  std::unique_ptr<Pipeline> pipe;
  std::vector<int> stageOf;  // every world rank's pipeline stage
  int startStep = 0;
  uint64_t dataSeed;
  const long long tokensPerStep;
  std::unique_ptr<JsonLog> log;
  std::unique_ptr<Progress> progress;
  TrainResult result;
  Clock::time_point start;
  double computeTotal = 0, commSeconds = 0;
  int ran = 0;  // steps run by this call
  std::vector<float> pack;
  std::vector<Batch> batches;
};

// The communicator's codecs and stage, the corpus, this rank's shard of the model, its
// tensor- and data-parallel communication and its optimizer.
void setUpRank(Run& r) {
  const TrainOptions& o = r.o;
  for (const SiteInfo& s : kSites) r.comm.setCodec(s.site, o.codecs[static_cast<size_t>(s.site)]);
  r.comm.setStage(r.at.p);
  r.corpus = loadCorpus(o.data, static_cast<size_t>(o.seq) + 1);
  Shard& shard = r.shard;
  shard.tp = r.grid.tp;
  shard.tpRank = r.at.t;
  shard.sequenceParallel = o.sequenceParallel && r.grid.tp > 1;
  shard.pp = r.grid.pp;
  shard.stage = r.at.p;
  std::tie(shard.firstLayer, shard.endLayer) = stageLayers(o.model.layers, r.grid.pp, r.at.p);
  r.model = makeModel<float>(o.model, shard, o.seed);
  if (o.autoencoderDim > 0)
    r.autoencoder =
        std::make_unique<Autoencoder>(o.model, o.autoencoderDim, std::max(o.autoencoderFirst, shard.firstLayer),
                                      std::min(o.autoencoderEnd, shard.endLayer), o.seed, o.adamw);
  r.tensorParallel =
      std::make_unique<TensorParallelComm>(r.comm, shard.sequenceParallel, o.model.channels, r.autoencoder.get());
  r.model.tp = r.tensorParallel.get();
  r.dp = std::make_unique<DataParallel>(r.comm, o, r.model);
  r.opt = makeAdamW(o.adamw, r.model.layout, r.dp->begin(), r.dp->end());
  r.comm.setTimeline(&r.timeline);
  if (hostsLocalHead(o.pipeSchedule, shard)) {
    const int owner = o.pipeSchedule == PipeSchedule::kLocal ? shard.stage : shard.stage - 1;
    r.localHead = std::make_unique<LocalHead>(o.model, o.seed + 0x10c4ull * static_cast<uint64_t>(owner + 1), o.adamw);
  }
}

// TeraPipe's token slices, uniform or planned from this machine's measured slice times (the
// slowest rank's, so that every rank plans alike); then the pipeline that runs the steps.
void setUpPipeline(Run& r) {
  const TrainOptions& o = r.o;
  if (o.slices > 1 || o.planSlices) {
    SliceTimes times = measureSliceTimes(r.model, o.seq, o.sliceGranularity);
    r.comm.allReduceDoubles(Site::kStat, times.table.data(), times.table.size(), cclMax);
    if (o.planSlices) {
      const SlicePlan plan = planSlices(times, r.grid.pp, o.accum);
      r.bounds = plan.bounds;
      r.predicted = plan.predicted;
    } else {
      r.bounds = uniformSlices(times, o.slices);
      r.predicted = predictedTime(times, r.bounds, r.grid.pp, o.accum);
    }
  }
  r.pipe = std::make_unique<Pipeline>(r.model, r.comm, o.pipeSchedule, o.accum, o.seq, &r.timeline, r.localHead.get(),
                                      r.bounds);
  if (r.dp->overlaps()) r.pipe->setBlockDone([dp = r.dp.get()](int layer) { dp->blockReady(layer); });
  for (int q = 0; q < r.grid.size(); ++q) r.stageOf.push_back(placeOf(r.grid, q).p);
}

// From --resume's checkpoint, or after a shrink from the step the survivors agreed on.
void resume(Run& r) {
  const TrainOptions& o = r.o;
  const bool resumeElastic = r.elastic && r.elastic->resume >= 0;
  if (!resumeElastic && o.resumePath.empty()) return;
  const Checkpoint ck =
      resumeElastic ? r.elastic->kept[static_cast<size_t>(r.elastic->resume)].ck : loadCheckpoint(o.resumePath);
  if (parameterCount(ck.config) != parameterCount(o.model) || ck.config.layers != o.model.layers ||
      ck.config.channels != o.model.channels || ck.config.heads != o.model.heads || ck.config.maxSeq != o.model.maxSeq)
    throw std::runtime_error("checkpoint " + o.resumePath + " holds another model shape than the flags ask for");
  Model<float>& model = r.model;
  extractShard(model.layout, r.shard, ck.params.data(), model.params.data());
  std::vector<float> local(shardCount(model.layout));
  for (auto [whole, moment] : {std::pair{&ck.m, &r.opt.m}, std::pair{&ck.v, &r.opt.v}}) {
    extractShard(model.layout, r.shard, whole->data(), local.data());
    std::copy(local.begin() + static_cast<std::ptrdiff_t>(r.dp->begin()),
              local.begin() + static_cast<std::ptrdiff_t>(r.dp->end()), moment->begin());
  }
  r.opt.steps = ck.optimizerSteps;
  r.startStep = static_cast<int>(ck.step);
  r.dataSeed = ck.seed;
}

// The log, the progress line and the result's description of the run.
void startLog(Run& r) {
  const TrainOptions& o = r.o;
  r.log = std::make_unique<JsonLog>(r.lead ? o.logPath : "", r.elastic && r.elastic->restarted);
  r.progress = std::make_unique<Progress>(r.lead && o.progress, o.steps);
  r.result.layout = layoutName(r.grid, o);
  r.result.sliceBounds = r.bounds.empty() ? std::vector<int>{0, o.seq} : r.bounds;
  r.result.predictedSliceSeconds = r.predicted;
  r.result.compression = compressionName(o);
  r.result.unigramEntropy = unigramEntropy(r.corpus.val);
  r.start = Clock::now();
}

// An optimizer moment (this rank's slice of its shard) whole, at world rank 0.
std::vector<float> wholeState(Run& r, const std::vector<float>& moment) {
  std::vector<float> local(shardCount(r.model.layout), 0.0f);
  std::copy(moment.begin(), moment.end(), local.begin() + static_cast<std::ptrdiff_t>(r.dp->begin()));
  return assembleWhole(r.model, r.comm, local.data(), r.dp->spokenRange(true));
}

// The whole state before step `nextStep`, in --checkpoint's file (written by world rank 0).
void saveAt(Run& r, int nextStep) {
  if (r.o.checkpointPath.empty()) return;
  Checkpoint ck;
  ck.config = r.o.model;
  ck.step = static_cast<uint64_t>(nextStep);
  ck.optimizerSteps = r.opt.steps;
  ck.seed = r.dataSeed;
  ck.params = assembleWhole(r.model, r.comm, r.model.params.data(), r.dp->spokenRange(false));
  ck.m = wholeState(r, r.opt.m);
  ck.v = wholeState(r, r.opt.v);
  if (r.lead) saveCheckpoint(r.o.checkpointPath, ck);
}

// The step's micro-batches of this data-parallel replica.
void loadBatches(Run& r, int step) {
  const TrainOptions& o = r.o;
  for (int a = 0; a < o.accum; ++a) {
    Batch& b = r.batches[static_cast<size_t>(a)];
    b = Batch{};
    const uint64_t first = (static_cast<uint64_t>(r.at.d) * o.accum + a) * o.batch;
    for (int i = 0; i < o.batch; ++i) appendTrainSequence(r.corpus, r.dataSeed, step, first + i, o.seq, b);
  }
}

// Forward and backward through the pipeline; the head's loss (summed over micro-batches).
double forwardBackward(Run& r, int step) {
  const TrainOptions& o = r.o;
  zeroGrads(r.model);
  if (r.autoencoder) r.autoencoder->zeroGrads();
  if (r.localHead) r.localHead->zeroGrads();
  loadBatches(r, step);
  r.comm.setErrorSampling(o.codecErrorEvery > 0 && step % o.codecErrorEvery == 0);
  const double headLoss = r.pipe->step(r.batches, 1.0f / static_cast<float>(o.accum));
  r.comm.setErrorSampling(false);
  if (!o.dumpGradsPath.empty() && step == o.dumpGradsStep) {
    const std::string path = o.dumpGradsPath + "." + std::to_string(r.comm.rank(Group::kWorld));
    std::FILE* f = std::fopen(path.c_str(), "wb");
    const bool ok =
        f && std::fwrite(r.model.grads.data(), sizeof(float), r.model.grads.size(), f) == r.model.grads.size();
    if (f) std::fclose(f);
    if (!ok) throw std::runtime_error("cannot write the gradients to " + path);
  }
  return headLoss;
}

// Every gradient summed where it must be: whole tensors over a sequence-parallel group, the
// autoencoder's and a local head's, the data-parallel average, the shared embedding's.
void reduceGradients(Run& r) {
  sumWholeTensorGradients(r.model, r.comm, r.pack);
  r.tensorParallel->reduceAutoencoderGradients();
  if (r.localHead) reduceLocalHeadGradients(*r.localHead, r.shard, r.comm);
  if (r.dp->zero()) {
    r.dp->syncEmbedding();
    r.dp->reduceGradients();
  } else {
    // After the data-parallel sum, so that both stages' copies of wte get the same bits.
    r.dp->reduceGradients();
    r.dp->syncEmbedding();
  }
}

// The gradient's norm and the step's loss, agreed by every rank.
std::pair<double, double> normAndLoss(Run& r, double headLoss, int step) {
  double stats[2] = {gradientSquares(r.model, r.dp->spokenRange(true)),
                     reportsLoss(r.shard) ? headLoss / r.o.accum : 0.0};
  r.comm.allReduceDoubles(Site::kStat, stats, 2, cclSum);
  const double norm = std::sqrt(stats[0]), loss = stats[1] / r.grid.dp;
  if (!std::isfinite(norm) || !std::isfinite(loss))
    throw std::runtime_error("training diverged at step " + std::to_string(step) + " (loss or gradient not finite)");
  return {norm, loss};
}

// AdamW (and the autoencoder's and local head's own updates) at the schedule's rate;
// returns the seconds it took. The new parameters then reach every rank that holds them.
double update(Run& r, float lr, double norm) {
  const double u0 = Timeline::now();
  adamwStep(r.opt, r.model.params.data(), r.model.grads.data(), lr, clipScale(norm, r.o.clip));
  if (r.autoencoder) r.autoencoder->update(lr);
  if (r.localHead) r.localHead->update(lr);
  const double u1 = Timeline::now();
  r.timeline.add({u0, u1, SpanKind::kUpdate});
  r.dp->shareParameters();
  return u1 - u0;
}

// One training step, logged.
void trainStep(Run& r, int step) {
  r.timeline.beginStep(step);
  r.comm.setStep(step);
  const auto t0 = Clock::now();
  const double ops0 = opTotal(r.model), comm0 = commTotal(r.comm);
  const double headLoss = forwardBackward(r, step);
  reduceGradients(r);
  const auto [norm, loss] = normAndLoss(r, headLoss, step);
  const float lr = learningRate(r.o.schedule, step, r.o.steps);
  const double updateSeconds = update(r, lr, norm);
  // The step is complete here: what the survivors go on from if a rank is lost later.
  if (r.elastic) keepStep(*r.elastic, r.comm, *r.dp, r.model, r.opt, step, r.dataSeed);
  const double compute = opTotal(r.model) - ops0 + updateSeconds, communication = commTotal(r.comm) - comm0;
  r.computeTotal += compute;
  r.commSeconds += communication;
  ++r.ran;
  const double tokS = static_cast<double>(r.tokensPerStep) / seconds(t0, Clock::now());
  r.result.finalTrainLoss = loss;
  r.result.losses.push_back(loss);
  if (!r.o.logPath.empty())
    r.log->step(step, loss, lr, norm, tokS, compute, communication, gatherCounters(r.comm, r.stageOf));
  r.progress->step(step, loss, tokS);
}

// The validation loss every --val-every steps and after the last.
void validateIfDue(Run& r, int step) {
  const bool last = step + 1 == r.o.steps;
  if (!(r.o.valEvery > 0 && (step + 1) % r.o.valEvery == 0) && !last) return;
  r.result.finalValLoss = validate(*r.pipe, r.model, r.corpus, r.o, r.comm);
  r.log->validation(step, r.result.finalValLoss, seconds(r.start, Clock::now()));
  r.progress->note("step " + std::to_string(step + 1) + ": validation loss " + std::to_string(r.result.finalValLoss));
}

// The checkpoint every --save-every steps, after the last and where --stop-after stops;
// whether the run stops here.
bool checkpointIfDue(Run& r, int step) {
  const bool last = step + 1 == r.o.steps, stop = r.o.stopAfter > 0 && r.ran >= r.o.stopAfter;
  if (last || stop || (r.o.saveEvery > 0 && (step + 1) % r.o.saveEvery == 0)) saveAt(r, step + 1);
  return stop;
}

// The result: throughput, bytes, the final parameters at world rank 0, the trace, counters.
TrainResult finish(Run& r) {
  r.progress->finish();
  TrainResult& result = r.result;
  const double elapsed = seconds(r.start, Clock::now());
  result.stepsRun = r.ran;
  result.tokensPerSecond = r.ran > 0 ? static_cast<double>(r.tokensPerStep) * r.ran / elapsed : 0;
  result.gradRawBytes = r.comm.stats(Site::kDpGrad).rawBytes;
  result.gradWireBytes = r.comm.stats(Site::kDpGrad).wireBytes;
  result.peakRssBytes = peakRss();
  result.params = assembleWhole(r.model, r.comm, r.model.params.data(), r.dp->spokenRange(false));
  if (!r.lead) result.params.clear();
  for (size_t k = 0; k < r.model.opSeconds.size(); ++k)
    result.opSeconds.emplace_back(opKindName(static_cast<OpKind>(k)), r.model.opSeconds[k]);
  if (!r.o.tracePath.empty()) result.bubbles = writeTrace(r.o.tracePath, r.timeline, r.comm, r.grid, *r.pipe);
  result.counters = gatherCounters(r.comm, r.stageOf);
  if (r.o.codecErrorEvery > 0) {
    std::vector<double>& errors = r.comm.codecErrors();
    r.comm.allReduceDoubles(Site::kStat, errors.data(), errors.size(), cclSum);
    r.log->codecErrors(errors, r.comm.layers());
  }
  if (r.lead) result.sites = siteTotals(result.counters, nullptr);
  r.log->summary(result, result.layout, r.computeTotal, r.commSeconds, elapsed, result.counters);
  return std::move(result);
}

TrainResult trainOn(const TrainOptions& o, const Grid& grid, Comm& comm, ElasticState* elastic) {
  Run r(o, grid, comm, elastic);
  setUpRank(r);
  setUpPipeline(r);
  resume(r);
  startLog(r);
  for (int step = r.startStep; step < o.steps; ++step) {
    trainStep(r, step);
    validateIfDue(r, step);
    if (checkpointIfDue(r, step)) break;
  }
  return finish(r);
}

// Options that each work alone but not together on this grid: std::invalid_argument saying
// which and why.
void checkCombinations(const TrainOptions& o, const Grid& grid) {
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
}

// --elastic: after a failed call the survivors shrink the world to the live ranks and train
// on from the model's and AdamW's state (on the grid shrunk with them); a rank whose replica
// lost a rank leaves.
TrainResult trainElastic(const TrainOptions& o, Grid grid, cclComm_t world) {
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
  checkCombinations(o, grid);
  if (o.elastic) return trainElastic(o, grid, world);
  Comm comm(splitGroups(world, grid, o.fuseEmbeddingSync), o.model.layers);
  try {
    return trainOn(o, grid, comm, nullptr);
  } catch (...) {
    comm.abort();  // peers blocked in this rank's groups fail instead of waiting
    throw;
  }
}

}  // namespace gpt
