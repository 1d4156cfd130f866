// SPDX-License-Identifier: BSD-3-Clause
#include "train.h"

#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "checkpoint.h"
#include "data.h"
#include "model.h"
#include "params.h"
#include "progress.h"

namespace gpt {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// The data-parallel part of a step: gradients averaged (all-reduce in buckets, or ZeRO-1's
// reduce-scatter), the global norm, the AdamW update of this rank's range, and with ZeRO-1
// the all-gather of the updated parameters.
class DataParallel {
 public:
  DataParallel(Comm& comm, const TrainOptions& o, Model<float>& m)
      : comm_(comm), zero_(o.zero && comm.size() > 1), model_(m) {
    const size_t P = parameterCount(m.config), n = static_cast<size_t>(comm.size());
    // ZeRO-1 pads the flat buffers to a multiple of the rank count: shards need no tensor
    // to divide evenly.
    padded_ = zero_ ? (P + n - 1) / n * n : P;
    shard_ = padded_ / n;
    begin_ = zero_ ? shard_ * static_cast<size_t>(comm.rank()) : 0;
    end_ = zero_ ? std::min(begin_ + shard_, P) : P;
    m.params.resize(padded_, 0.0f);
    m.grads.resize(padded_, 0.0f);
    m.p = bindParams(m.config, m.params.data());
    m.g = bindParams(m.config, m.grads.data());
    bucket_ = std::max<size_t>(1, o.bucketBytes / sizeof(float));
  }

  size_t begin() const { return begin_; }
  size_t end() const { return end_; }
  bool zero() const { return zero_; }

  // Averages the gradients over the ranks; returns the global gradient norm.
  double reduceGradients() {
    float* g = model_.grads.data();
    const size_t P = parameterCount(model_.config);
    if (comm_.size() > 1 && zero_) {
      comm_.reduceScatter(Site::kDpGrad, 0, g, g + begin_, shard_, cclAvg);
    } else if (comm_.size() > 1) {
      for (size_t off = 0, k = 0; off < P; off += bucket_, ++k)
        comm_.allReduce(Site::kDpGrad, static_cast<int>(k), g + off, std::min(bucket_, P - off), cclAvg);
    }
    double sq = 0;
    for (size_t i = begin_; i < end_; ++i) sq += static_cast<double>(g[i]) * g[i];
    if (zero_) comm_.allReduceDoubles(Site::kDpStat, &sq, 1, cclSum);
    return std::sqrt(sq);
  }

  // After this rank's update: every rank gets every shard.
  void shareParameters() {
    if (!zero_) return;
    float* p = model_.params.data();
    comm_.allGather(Site::kDpParam, 0, p + begin_, p, shard_);
  }

  // The full optimiser state (every rank's shard), for a checkpoint.
  void gatherState(const AdamW& opt, std::vector<float>& m, std::vector<float>& v) {
    const size_t P = parameterCount(model_.config);
    m.assign(padded_, 0.0f);
    v.assign(padded_, 0.0f);
    std::copy(opt.m.begin(), opt.m.end(), m.begin() + static_cast<std::ptrdiff_t>(begin_));
    std::copy(opt.v.begin(), opt.v.end(), v.begin() + static_cast<std::ptrdiff_t>(begin_));
    if (zero_) {
      comm_.allGather(Site::kDpParam, 1, m.data() + begin_, m.data(), shard_);
      comm_.allGather(Site::kDpParam, 2, v.data() + begin_, v.data(), shard_);
    }
    m.resize(P);
    v.resize(P);
  }

 private:
  Comm& comm_;
  bool zero_;
  Model<float>& model_;
  size_t padded_ = 0, shard_ = 0, begin_ = 0, end_ = 0, bucket_ = 0;
};

long peakRss() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss * 1024L;
}

// Mean validation loss over o.valSequences windows, spread over the ranks.
double validate(Model<float>& m, const Corpus& corpus, const TrainOptions& o, Comm& comm) {
  double sums[2] = {0, 0};  // loss sum, windows
  const int n = comm.size();
  for (int first = comm.rank() * o.batch; first < o.valSequences; first += n * o.batch) {
    Batch b;
    const int count = std::min(o.batch, o.valSequences - first);
    for (int i = 0; i < count; ++i)
      appendValSequence(corpus, static_cast<uint64_t>(first + i), static_cast<uint64_t>(o.valSequences), o.seq, b);
    sums[0] += static_cast<double>(forward(m, b.tokens.data(), b.targets.data(), count, o.seq)) * count;
    sums[1] += count;
  }
  comm.allReduceDoubles(Site::kDpStat, sums, 2, cclSum);
  return sums[0] / sums[1];
}

}  // namespace

TrainResult train(const TrainOptions& o, cclComm_t cclComm) {
  omp_set_num_threads(std::max(1, o.threads));
  if (o.seq > o.model.maxSeq)
    throw std::invalid_argument("--seq " + std::to_string(o.seq) + " exceeds the model's --max-seq " +
                                std::to_string(o.model.maxSeq));
  if (o.batch < 1 || o.accum < 1 || o.steps < 1)
    throw std::invalid_argument("--batch, --accum and --steps must be >= 1");
  Comm comm(cclComm);
  comm.setCodec(Site::kDpGrad, o.gradCodec);
  const bool lead = comm.rank() == 0;
  const Corpus corpus = loadCorpus(o.data, static_cast<size_t>(o.seq) + 1);

  Model<float> model = makeModel<float>(o.model, o.seed);
  DataParallel dp(comm, o, model);
  AdamW opt = makeAdamW(o.adamw, parameterLayout(o.model), dp.begin(), dp.end());
  int startStep = 0;
  uint64_t dataSeed = o.seed;
  if (!o.resumePath.empty()) {
    const Checkpoint ck = loadCheckpoint(o.resumePath);
    if (parameterCount(ck.config) != parameterCount(o.model) || ck.config.layers != o.model.layers ||
        ck.config.channels != o.model.channels || ck.config.heads != o.model.heads ||
        ck.config.maxSeq != o.model.maxSeq)
      throw std::runtime_error("checkpoint " + o.resumePath + " holds another model shape than the flags ask for");
    std::copy(ck.params.begin(), ck.params.end(), model.params.begin());
    std::copy(ck.m.begin() + static_cast<std::ptrdiff_t>(dp.begin()),
              ck.m.begin() + static_cast<std::ptrdiff_t>(dp.end()), opt.m.begin());
    std::copy(ck.v.begin() + static_cast<std::ptrdiff_t>(dp.begin()),
              ck.v.begin() + static_cast<std::ptrdiff_t>(dp.end()), opt.v.begin());
    opt.steps = ck.optimizerSteps;
    startStep = static_cast<int>(ck.step);
    dataSeed = ck.seed;
  }

  const int n = comm.size();
  const long long tokensPerStep = static_cast<long long>(n) * o.accum * o.batch * o.seq;
  JsonLog log(lead ? o.logPath : "");
  Progress progress(lead && o.progress, o.steps);
  TrainResult result;
  result.unigramEntropy = unigramEntropy(corpus.val);
  auto saveAt = [&](int nextStep) {
    if (o.checkpointPath.empty()) return;
    Checkpoint ck;
    ck.config = o.model;
    ck.step = static_cast<uint64_t>(nextStep);
    ck.optimizerSteps = opt.steps;
    ck.seed = dataSeed;
    ck.params.assign(model.params.begin(), model.params.begin() + static_cast<std::ptrdiff_t>(parameterCount(o.model)));
    dp.gatherState(opt, ck.m, ck.v);
    if (lead) saveCheckpoint(o.checkpointPath, ck);
  };

  const auto runStart = Clock::now();
  double computeTotal = 0, commTotal = 0;
  int ran = 0;
  for (int step = startStep; step < o.steps; ++step) {
    const auto t0 = Clock::now();
    zeroGrads(model);
    double lossSum = 0;
    for (int a = 0; a < o.accum; ++a) {
      Batch b;
      const uint64_t first = (static_cast<uint64_t>(comm.rank()) * o.accum + a) * o.batch;
      for (int i = 0; i < o.batch; ++i) appendTrainSequence(corpus, dataSeed, step, first + i, o.seq, b);
      lossSum += forward(model, b.tokens.data(), b.targets.data(), o.batch, o.seq);
      backward(model, b.tokens.data(), b.targets.data(), 1.0f / static_cast<float>(o.accum));
    }
    const auto t1 = Clock::now();
    const double norm = dp.reduceGradients();
    const auto t2 = Clock::now();
    if (!std::isfinite(norm) || !std::isfinite(lossSum))
      throw std::runtime_error("training diverged at step " + std::to_string(step) + " (loss or gradient not finite)");
    const float lr = learningRate(o.schedule, step, o.steps);
    adamwStep(opt, model.params.data(), model.grads.data(), lr, clipScale(norm, o.clip));
    const auto t3 = Clock::now();
    dp.shareParameters();
    double loss = lossSum / o.accum;
    comm.allReduceDoubles(Site::kDpStat, &loss, 1, cclAvg);
    const auto t4 = Clock::now();
    const double compute = seconds(t0, t1) + seconds(t2, t3), communication = seconds(t1, t2) + seconds(t3, t4);
    computeTotal += compute;
    commTotal += communication;
    ++ran;
    const double tokS = static_cast<double>(tokensPerStep) / seconds(t0, t4);
    result.finalTrainLoss = loss;
    log.step(step, loss, lr, norm, tokS, compute, communication, comm);
    progress.step(step, loss, tokS);
    const bool last = step + 1 == o.steps;
    if ((o.valEvery > 0 && (step + 1) % o.valEvery == 0) || last) {
      result.finalValLoss = validate(model, corpus, o, comm);
      log.validation(step, result.finalValLoss);
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
  result.params.assign(model.params.begin(),
                       model.params.begin() + static_cast<std::ptrdiff_t>(parameterCount(o.model)));
  for (size_t k = 0; k < model.opSeconds.size(); ++k)
    result.opSeconds.emplace_back(opKindName(static_cast<OpKind>(k)), model.opSeconds[k]);
  log.summary(result, computeTotal, commTotal, elapsed, comm);
  return result;
}

}  // namespace gpt
