// SPDX-License-Identifier: BSD-3-Clause
#include "train.h"

#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iterator>
#include <memory>
#include <numeric>
#include <set>
#include <stdexcept>

#include "checkpoint.h"
#include "data.h"
#include "data_parallel.h"
#include "elastic.h"
#include "local_head.h"
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

// Runs `write` (files only, no collective) on world rank 0 and tells every rank how it went:
// when it threw, every rank throws a std::runtime_error with its message. So a checkpoint or
// trace that cannot be written fails every rank alike, where rank 0 failing alone would look
// like a lost rank to the others (--elastic would shrink the world without it).
void writeOnLead(Comm& comm, const std::function<void()>& write) {
  std::string failure;
  if (comm.rank(Group::kWorld) == 0) {
    try {
      write();
    } catch (const std::exception& e) {
      failure = *e.what() ? e.what() : "writing failed";
    }
  }
  double length = static_cast<double>(failure.size());
  comm.allReduceDoubles(Site::kStat, &length, 1, cclMax);
  if (length == 0) return;
  // Rank 0's message, one character per double (the others add zeros: exact).
  std::vector<double> text(static_cast<size_t>(length), 0.0);
  for (size_t i = 0; i < failure.size(); ++i) text[i] = static_cast<unsigned char>(failure[i]);
  comm.allReduceDoubles(Site::kStat, text.data(), text.size(), cclSum);
  std::string message;
  for (double c : text) message += static_cast<char>(static_cast<int>(c));
  throw std::runtime_error(message);
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
  std::vector<BubbleReport> bubbles;
  writeOnLead(comm, [&] {
    std::vector<std::vector<Span>> byRank;
    std::vector<RankPlace> places;
    for (int r = 0; r < ranks; ++r) {
      const auto first = all.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(r) * mine.size());
      byRank.emplace_back(first, first + static_cast<std::ptrdiff_t>(counts[static_cast<size_t>(r)]));
      const GridPlace at = placeOf(grid, r);
      places.push_back({r, at.d, at.p, at.t});
    }
    writeChromeTrace(path, byRank, places, [](int s) { return siteName(static_cast<Site>(s)); });
    if (grid.pp == 1) return;
    std::vector<std::vector<Span>> stages;
    for (int p = 0; p < grid.pp; ++p) stages.push_back(byRank[static_cast<size_t>(rankOf(grid, {0, p, 0}))]);
    std::set<int> steps;  // the traced steps this run ran
    for (const Span& s : stages.front()) steps.insert(s.step);
    for (int step : steps) bubbles.push_back(pipelineBubble(stages, pipe.schedules(), step));
  });
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
  int localHeadOwner = -1;               // the stage whose loss it gives (its slot in checkpoints)
  std::vector<int> bounds;               // TeraPipe's token slices (empty: none)
  double predicted = 0;                  // their planned time
  std::unique_ptr<Pipeline> pipe;
  std::vector<int> stageOf;  // every world rank's pipeline stage
  int startStep = 0;
  int firstStep = 0;  // the step this process started from (--stop-after counts from it)
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
    r.localHeadOwner = owner;
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
  if (!localUpdates(o.pipeSchedule)) return;
  // The local heads of as many stages as this run has; else (a checkpoint without local
  // updates, or of another pipeline depth, whose heads fit other stages) they start afresh.
  const size_t n = LocalHead::countFor(o.model);
  if (ck.localHeads != static_cast<uint64_t>(r.grid.pp - 1) || ck.localHeadSize != n) {
    if (r.lead)
      std::fprintf(stderr, "gpt_train: checkpoint %s holds no local heads of %d stages: they start afresh\n",
                   o.resumePath.c_str(), r.grid.pp);
    return;
  }
  if (!r.localHead) return;
  AdamW& opt = r.localHead->optimizer();
  const auto slot = ck.heads.begin() + static_cast<std::ptrdiff_t>(3 * n * static_cast<size_t>(r.localHeadOwner));
  const auto size = static_cast<std::ptrdiff_t>(n);
  std::copy(slot, slot + size, r.localHead->params());
  std::copy(slot + size, slot + 2 * size, opt.m.begin());
  std::copy(slot + 2 * size, slot + 3 * size, opt.v.begin());
  opt.steps = ck.localHeadSteps;
}

// The log, the progress line and the result's description of the run.
void startLog(Run& r) {
  const TrainOptions& o = r.o;
  if (r.elastic && r.elastic->restarted) {
    // A new rank 0 may open the log now (appending): every rank learns whether it could, as
    // for a checkpoint (train() checked the path at the first start).
    r.log = std::make_unique<JsonLog>("");
    writeOnLead(r.comm, [&] { r.log = std::make_unique<JsonLog>(o.logPath, true); });
  } else {
    // --resume goes on with the run it continues: the log keeps that run's records and
    // appends (as llm.c's logger does when it resumes).
    r.log = std::make_unique<JsonLog>(r.lead ? o.logPath : "", !o.resumePath.empty());
  }
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

// The local heads (local updates) whole at world rank 0, in Checkpoint::heads: each from
// the rank of tensor-parallel rank 0 and data-parallel replica 0 of the stage that hosts it
// (the others hold the same bits), the other ranks adding zeros.
void assembleLocalHeads(Run& r, Checkpoint& ck) {
  if (!localUpdates(r.o.pipeSchedule)) return;
  const size_t n = LocalHead::countFor(r.o.model), heads = static_cast<size_t>(r.grid.pp - 1);
  std::vector<float> mine(3 * n * heads, 0.0f);
  double steps = 0;
  if (r.localHead && r.at.t == 0 && r.at.d == 0) {
    AdamW& opt = r.localHead->optimizer();
    float* slot = mine.data() + 3 * n * static_cast<size_t>(r.localHeadOwner);
    std::copy(r.localHead->params(), r.localHead->params() + n, slot);
    std::copy(opt.m.begin(), opt.m.end(), slot + n);
    std::copy(opt.v.begin(), opt.v.end(), slot + 2 * n);
    steps = static_cast<double>(opt.steps);
  }
  ck.heads.assign(mine.size(), 0.0f);
  r.comm.reduceToRoot(Site::kStat, mine.data(), ck.heads.data(), mine.size());
  r.comm.allReduceDoubles(Site::kStat, &steps, 1, cclMax);
  ck.localHeads = heads;
  ck.localHeadSize = n;
  ck.localHeadSteps = static_cast<uint64_t>(steps);
}

// The whole state before step `nextStep`, in --checkpoint's file (written by world rank 0;
// every rank fails alike when it cannot be).
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
  assembleLocalHeads(r, ck);
  writeOnLead(r.comm, [&] { saveCheckpoint(r.o.checkpointPath, ck); });
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
// whether the run stops here. --stop-after counts the steps from where this process started,
// the same on every rank across --elastic's restarts (which may go back a step).
bool checkpointIfDue(Run& r, int step) {
  const bool last = step + 1 == r.o.steps, stop = r.o.stopAfter > 0 && step + 1 - r.firstStep >= r.o.stopAfter;
  if (last || stop || (r.o.saveEvery > 0 && (step + 1) % r.o.saveEvery == 0)) saveAt(r, step + 1);
  return stop;
}

// The result: throughput, bytes, the final parameters at world rank 0, the trace, counters.
TrainResult finish(Run& r) {
  r.progress->finish();
  TrainResult& result = r.result;
  const double elapsed = seconds(r.start, Clock::now());
  result.stepsRun = r.ran;
  result.stepsInAll = r.startStep + r.ran - r.firstStep;
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
  result.rank = r.comm.rank(Group::kWorld);
  result.ranks = r.comm.size(Group::kWorld);
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
  r.firstStep = r.startStep;
  if (elastic) {  // the step of the first start, kept across restarts
    if (elastic->firstStep < 0) elastic->firstStep = r.startStep;
    r.firstStep = elastic->firstStep;
  }
  startLog(r);
  for (int step = r.startStep; step < o.steps; ++step) {
    trainStep(r, step);
    // Saved before the validation, so that a validation that fails loses no step.
    const bool stop = checkpointIfDue(r, step);
    validateIfDue(r, step);
    if (stop) break;
  }
  return finish(r);
}

// scale=channel on a tensor-parallel site: its allreduces travel transposed, in blocks of
// their row count, which must be a multiple of 8 (at most 65536). The rows are a
// micro-batch's tokens (--batch x --seq) in training, or with token slices a slice's, and in
// validation the windows of each call: --batch of them, and --val-seqs mod --batch in the
// last. Refused here, before the first step, rather than at the first call of the wrong size
// (the last validation's, or the first compressed step's).
void checkChannelScales(const TrainOptions& o, const Grid& grid) {
  if (grid.tp == 1) return;
  for (Site s : {Site::kTpFwd, Site::kTpBwd}) {
    const SiteCodec& c = o.codecs[static_cast<size_t>(s)];
    if (!c.active() || !c.channelScales) continue;
    const std::string site = std::string(siteName(s)) + " scale=channel";
    if (o.sequenceParallel)
      throw std::invalid_argument(site + " transposes allreduces: not with --sp (reduce-scatter, all-gather)");
    auto check = [&](long long sequences, const std::string& what) {
      const long long rows = sequences * o.seq;
      if (rows % 8 != 0 || rows > 65536)
        throw std::invalid_argument(site + " needs a multiple of 8 rows, at most 65536, in every allreduce: " + what +
                                    " gives " + std::to_string(sequences) + " x --seq " + std::to_string(o.seq) +
                                    " = " + std::to_string(rows));
    };
    check(o.batch, "--batch");
    if (o.valSequences % o.batch != 0)
      check(o.valSequences % o.batch, "the last validation call (--val-seqs " + std::to_string(o.valSequences) +
                                          " mod --batch " + std::to_string(o.batch) + ")");
    if (o.slices == 1 && !o.planSlices) continue;
    // Token slices (one sequence per micro-batch): a training call's rows are a slice's
    // tokens. Every slice of the planner's grid is timed before the first step (compressed,
    // unless the codec waits for a warm-up) and the planner may choose any of them: every
    // grid position must then be a multiple of 8 (--seq is, as checked above). Else only the
    // uniform slices themselves are compressed.
    const std::string granularity = "--slice-granularity " + std::to_string(o.sliceGranularity);
    if (o.planSlices || c.warmupSteps == 0) {
      if (o.sliceGranularity % 8 != 0)
        throw std::invalid_argument(site +
                                    " needs a multiple of 8 rows in every allreduce: token slices are cut on the " +
                                    granularity + " grid, " +
                                    (o.planSlices ? "any of whose slices the planner may choose"
                                                  : "every slice of which is timed before the first step") +
                                    " (make it a multiple of 8)");
      continue;
    }
    const std::vector<int> bounds = uniformSlices(SliceTimes{o.seq, o.sliceGranularity, {}}, o.slices);
    for (size_t i = 0; i + 1 < bounds.size(); ++i)
      if ((bounds[i + 1] - bounds[i]) % 8 != 0)
        throw std::invalid_argument(site + " needs a multiple of 8 rows in every allreduce: --slices " +
                                    std::to_string(o.slices) + " on the grid of " + granularity + " cuts --seq " +
                                    std::to_string(o.seq) + " into a slice [" + std::to_string(bounds[i]) + ", " +
                                    std::to_string(bounds[i + 1]) + ") of " +
                                    std::to_string(bounds[i + 1] - bounds[i]) + " tokens");
  }
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
  checkChannelScales(o, grid);
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

// errno of creating `path` (or of appending to it, when it exists; what this made is
// removed again), 0 when it can be; EISDIR for a folder.
int creationError(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return EISDIR;
  const bool existed = std::filesystem::exists(path, ec);
  errno = 0;
  std::FILE* f = std::fopen(path.c_str(), "ab");
  if (!f) return errno != 0 ? errno : EIO;
  std::fclose(f);
  if (!existed) std::remove(path.c_str());
  return 0;
}

// The files the run writes, checked before it trains by the rank that writes each (world
// rank 0: the checkpoint's temporary file and the checkpoint's own path, the log, the trace;
// every rank: its --dump-grads file), and the outcome shared over the world: a bad path fails
// every rank alike, with the same message, before the first step, not rank 0 alone at the end
// (which --elastic would take for a lost rank).
void checkOutputPaths(const TrainOptions& o, cclComm_t world) {
  int rank = 0;
  if (cclCommUserRank(world, &rank) != cclSuccess) throw std::runtime_error(cclGetLastError(world));
  struct Output {
    const char* flag;
    const std::string& path;
    std::string file;  // what is written
    bool everyRank;
    bool renamedOnto;  // only a rename writes it: it must not be a folder
  };
  const Output outputs[] = {
      {"--checkpoint", o.checkpointPath, o.checkpointPath + ".tmp", false, false},
      {"--checkpoint", o.checkpointPath, o.checkpointPath, false, true},
      {"--log", o.logPath, o.logPath, false, false},
      {"--trace", o.tracePath, o.tracePath, false, false},
      {"--dump-grads", o.dumpGradsPath, o.dumpGradsPath + "." + std::to_string(rank), true, false},
  };
  constexpr size_t kOutputs = std::size(outputs);
  int32_t errors[kOutputs] = {}, worst[kOutputs] = {};
  for (size_t i = 0; i < kOutputs; ++i) {
    const Output& out = outputs[i];
    if (out.path.empty() || (!out.everyRank && rank != 0)) continue;
    std::error_code ec;
    if (out.renamedOnto)
      errors[i] = std::filesystem::is_directory(out.file, ec) ? EISDIR : 0;
    else
      errors[i] = creationError(out.file);
  }
  if (cclAllReduce(errors, worst, kOutputs, cclInt32, cclMax, world, nullptr) != cclSuccess)
    throw std::runtime_error(std::string("checking the output paths: cclAllReduce failed: ") + cclGetLastError(world));
  for (size_t i = 0; i < kOutputs; ++i)
    if (worst[i] != 0) {
      const Output& out = outputs[i];
      const std::string file = out.everyRank ? out.path + ".<rank>" : out.file;
      throw std::runtime_error(std::string(out.flag) + " " + out.path + ": cannot write " + file + " (" +
                               std::strerror(worst[i]) + ")");
    }
}

}  // namespace

TrainResult train(const TrainOptions& o, cclComm_t world) {
  omp_set_num_threads(std::max(1, o.threads));
  if (o.seq < 1) throw std::invalid_argument("--seq must be at least 1");
  if (o.valSequences < 1) throw std::invalid_argument("--val-seqs must be at least 1 (validation windows)");
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
  checkOutputPaths(o, world);
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
