// SPDX-License-Identifier: BSD-3-Clause
#include "elastic.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "params.h"

namespace gpt {

void keepStep(ElasticState& state, Comm& comm, const DataParallel& dp, const Model<float>& model, const AdamW& opt,
              int step, uint64_t dataSeed) {
  // A whole model keeps one step; a part of one overwrites the older (or an empty) one of two.
  const bool sharded = dp.zero();
  ElasticState::Kept *a = &state.kept[0], *b = &state.kept[1];
  const bool whole = model.shard.whole() && !sharded;
  ElasticState::Kept& k = whole || !a->held ? *a : !b->held || b->ck.step < a->ck.step ? *b : *a;
  k.held = false;  // until the exchange below is through
  const size_t P = shardCount(model.layout);
  Checkpoint& ck = k.ck;
  ck.config = model.config;
  ck.step = static_cast<uint64_t>(step + 1);
  ck.optimizerSteps = opt.steps;
  ck.seed = dataSeed;
  ck.params.assign(model.params.begin(), model.params.begin() + static_cast<std::ptrdiff_t>(P));
  ck.m = opt.m;
  ck.v = opt.v;
  k.shard = model.shard;
  k.replica = comm.rank(Group::kDp);
  k.replicas = comm.size(Group::kDp);
  k.zero = sharded;
  if (sharded) {
    const size_t length = zeroShard(P, static_cast<size_t>(k.replicas), 0).length;
    std::vector<float> mine(2 * length, 0.0f), next(2 * length);
    std::copy(opt.m.begin(), opt.m.end(), mine.begin());
    std::copy(opt.v.begin(), opt.v.end(), mine.begin() + static_cast<std::ptrdiff_t>(length));
    comm.passDown(Site::kDpParam, mine.data(), next.data(), mine.size());
    k.nextM.assign(next.begin(), next.begin() + static_cast<std::ptrdiff_t>(length));
    k.nextV.assign(next.begin() + static_cast<std::ptrdiff_t>(length), next.end());
  }
  k.held = true;
}

namespace {

void check(cclResult_t r, const char* what, cclComm_t c) {
  if (r != cclSuccess)
    throw std::runtime_error(std::string("--elastic: ") + what + " failed: " + cclGetErrorString(r) + ": " +
                             cclGetLastError(c));
}

int64_t latestStep(const ElasticState& state, bool wholeOnly) {
  int64_t latest = -1;
  for (const ElasticState::Kept& k : state.kept)
    if (k.held && (!wholeOnly || k.whole())) latest = std::max(latest, static_cast<int64_t>(k.ck.step));
  return latest;
}

ElasticState::Kept* keptAt(ElasticState& state, int64_t step, bool whole) {
  for (ElasticState::Kept& k : state.kept)
    if (k.held && static_cast<int64_t>(k.ck.step) == step && k.whole() == whole) return &k;
  return nullptr;
}

// The whole state of step `step` from the lowest survivor holding it whole (into `into`).
void shareWhole(cclComm_t next, const ModelConfig& model, ElasticState& state, int64_t step, Checkpoint& into) {
  int rank = 0, size = 0;
  cclCommUserRank(next, &rank);
  cclCommCount(next, &size);
  ElasticState::Kept* mine = keptAt(state, step, true);
  int32_t holder = mine ? rank : size, root = 0;
  check(cclAllReduce(&holder, &root, 1, cclInt32, cclMin, next, nullptr), "agreeing on the holder", next);
  if (mine) into = mine->ck;
  uint64_t counters[3] = {into.step, into.optimizerSteps, into.seed};
  check(cclBroadcast(counters, counters, 3, cclUint64, root, next, nullptr), "sharing the step", next);
  const size_t n = parameterCount(model);
  into.config = model;
  const cclCompression_t exact = CCL_COMPRESSION_INITIALIZER;
  for (std::vector<float>* v : {&into.params, &into.m, &into.v}) {
    v->resize(n);
    check(cclBroadcastEx(v->data(), v->data(), n, cclFloat32, root, next, nullptr, &exact), "sharing the state", next);
  }
  into.step = counters[0];
  into.optimizerSteps = counters[1];
  into.seed = counters[2];
}

// The state of step `step` assembled whole from the survivors' parts (elastic.h). `alive`:
// which data-parallel replicas of the world that lost ranks survive (ZeRO-1's shards).
void assembleParts(cclComm_t next, const ModelConfig& model, ElasticState& state, int64_t step,
                   const std::vector<char>& alive, Checkpoint& into) {
  const ElasticState::Kept* mine = keptAt(state, step, false);
  // Every survivor holds the step (elastic.h); one that does not fails them all alike.
  int32_t missing = mine ? 0 : 1, anyMissing = 0;
  check(cclAllReduce(&missing, &anyMissing, 1, cclInt32, cclMax, next, nullptr), "agreeing on the parts", next);
  if (anyMissing)
    throw std::runtime_error("--elastic: a survivor does not hold its part of step " + std::to_string(step));
  // The lowest replica speaks for the parameters (and, without ZeRO-1, the moments).
  int32_t replica = mine->replica, speaker = 0;
  check(cclAllReduce(&replica, &speaker, 1, cclInt32, cclMin, next, nullptr), "agreeing on the replica", next);
  const int replicas = mine->replicas;
  if (mine->zero)  // the same verdict on every survivor: they read the same list
    for (int r = 0; r < replicas; ++r) {
      const int previous = (r + replicas - 1) % replicas;
      if (!alive[static_cast<size_t>(r)] && !alive[static_cast<size_t>(previous)])
        throw std::runtime_error("--elastic: ranks " + std::to_string(previous) + " and " + std::to_string(r) + " of " +
                                 std::to_string(replicas) +
                                 " were both lost: ZeRO-1 keeps a rank's AdamW shard on the previous rank only, so "
                                 "rank " +
                                 std::to_string(r) + "'s is gone (go on from a checkpoint: --resume)");
    }
  const size_t P = parameterCount(model);
  into = mine->ck;
  std::vector<float> params(P, 0.0f), m(P, 0.0f), v(P, 0.0f);
  const std::vector<TensorInfo> layout = shardLayout(model, mine->shard);
  const size_t local = shardCount(layout);
  const bool speaks = mine->replica == speaker;
  if (speaks) insertShard(layout, mine->shard, mine->ck.params.data(), 0, local, params.data());
  if (!mine->zero && speaks) {
    insertShard(layout, mine->shard, mine->ck.m.data(), 0, local, m.data());
    insertShard(layout, mine->shard, mine->ck.v.data(), 0, local, v.data());
  } else if (mine->zero) {
    // ZeRO-1 runs on the whole model: the shards' indices are the model's.
    auto place = [&](int owner, const std::vector<float>& fromM, const std::vector<float>& fromV) {
      const ZeroShard z = zeroShard(P, static_cast<size_t>(replicas), static_cast<size_t>(owner));
      const auto len = static_cast<std::ptrdiff_t>(z.end - z.begin);
      std::copy(fromM.begin(), fromM.begin() + len, m.begin() + static_cast<std::ptrdiff_t>(z.begin));
      std::copy(fromV.begin(), fromV.begin() + len, v.begin() + static_cast<std::ptrdiff_t>(z.begin));
    };
    place(mine->replica, mine->ck.m, mine->ck.v);
    const int following = (mine->replica + 1) % replicas;
    if (!alive[static_cast<size_t>(following)]) place(following, mine->nextM, mine->nextV);
  }
  const cclCompression_t exact = CCL_COMPRESSION_INITIALIZER;
  for (std::vector<float>* x : {&params, &m, &v})
    check(cclAllReduceEx(x->data(), x->data(), P, cclFloat32, cclSum, next, nullptr, &exact, nullptr),
          "assembling the state", next);
  into.params = std::move(params);
  into.m = std::move(m);
  into.v = std::move(v);
}

std::string rankList(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

}  // namespace

cclComm_t goOnWithoutLost(cclComm_t world, const ModelConfig& model, Grid& grid, ElasticState& state) {
  int oldRank = 0, oldSize = 0;
  cclCommUserRank(world, &oldRank);
  cclCommCount(world, &oldSize);
  cclComm_t alive = nullptr;
  check(cclCommShrink(world, nullptr, 0, &alive, nullptr, CCL_SHRINK_ALIVE | CCL_SHRINK_ABORT), "cclCommShrink", world);
  int aliveCount = 0;
  cclCommCount(alive, &aliveCount);
  std::vector<int32_t> survivors(static_cast<size_t>(aliveCount));
  const int32_t me = oldRank;
  check(cclAllGather(&me, survivors.data(), 1, cclInt32, alive, nullptr), "naming the survivors", alive);
  std::vector<char> isAlive(static_cast<size_t>(oldSize), 0);
  for (int32_t r : survivors) isAlive[static_cast<size_t>(r)] = 1;
  std::vector<int> lost;
  for (int r = 0; r < oldSize; ++r)
    if (!isAlive[static_cast<size_t>(r)]) lost.push_back(r);
  // A replica goes on only whole; every survivor reads the same list, so all decide alike.
  std::vector<char> whole(static_cast<size_t>(grid.dp), 1);
  for (int r : lost) whole[static_cast<size_t>(placeOf(grid, r).d)] = 0;
  const int replicasLeft = static_cast<int>(std::count(whole.begin(), whole.end(), 1));
  if (replicasLeft == 0) {
    cclCommDestroy(alive);
    throw std::runtime_error("--elastic: every data-parallel replica lost a rank (lost: " + rankList(lost) +
                             "): nothing whole is left to go on from (go on from a checkpoint: --resume)");
  }
  std::vector<int> leaving;  // ranks of `alive` whose replica lost a rank
  for (int i = 0; i < aliveCount; ++i)
    if (!whole[static_cast<size_t>(placeOf(grid, survivors[static_cast<size_t>(i)]).d)]) leaving.push_back(i);
  cclComm_t next = alive;
  if (!leaving.empty()) {
    if (!whole[static_cast<size_t>(placeOf(grid, oldRank).d)]) {
      std::fprintf(stderr, "gpt_train: elastic: rank %d leaves the run: its data-parallel replica lost rank(s) %s\n",
                   oldRank, rankList(lost).c_str());
      cclCommDestroy(alive);
      state = ElasticState{};
      return nullptr;
    }
    check(cclCommShrink(alive, leaving.data(), static_cast<int>(leaving.size()), &next, nullptr, 0),
          "cclCommShrink of the whole replicas", alive);
    cclCommDestroy(alive);
  }
  grid.dp = replicasLeft;
  int rank = 0, size = 0;
  cclCommUserRank(next, &rank);
  cclCommCount(next, &size);
  // A whole copy at the latest step any survivor holds one, or else the parts at the latest
  // step every survivor completed.
  int64_t wholeStep = latestStep(state, true), any = latestStep(state, false), wholeMax = -1, anyMin = -1;
  check(cclAllReduce(&wholeStep, &wholeMax, 1, cclInt64, cclMax, next, nullptr), "agreeing on the step", next);
  check(cclAllReduce(&any, &anyMin, 1, cclInt64, cclMin, next, nullptr), "agreeing on the step", next);
  Checkpoint ck;
  int64_t from = -1;
  if (wholeMax >= anyMin) {
    from = wholeMax;
    if (from >= 0) shareWhole(next, model, state, from, ck);
  } else {
    from = anyMin;
    // ZeRO-1's replicas are the world's ranks (it runs without tp and pp).
    assembleParts(next, model, state, from, isAlive, ck);
  }
  // What this rank holds now is the whole state of `from` only: parts of the old layout go.
  state.kept = {};
  state.resume = -1;
  if (from >= 0) {
    state.kept[0].held = true;
    state.kept[0].ck = std::move(ck);
    state.kept[0].shard = wholeModel(model);
    state.resume = 0;
  }
  std::fprintf(stderr, "gpt_train: elastic: going on with %d ranks from step %lld (rank %d now)\n", size,
               static_cast<long long>(std::max<int64_t>(from, 0)), rank);
  return next;
}

}  // namespace gpt
