// SPDX-License-Identifier: BSD-3-Clause
#include "elastic.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "params.h"
#include "shard.h"

namespace gpt {

void keepStep(ElasticState& state, Comm& comm, const DataParallel& dp, const Model<float>& model, const AdamW& opt,
              int step, uint64_t dataSeed) {
  // ZeRO-1 overwrites the older (or an empty) one of its two steps; plain data parallel keeps one.
  const bool sharded = dp.zero();
  ElasticState::Kept *a = &state.kept[0], *b = &state.kept[1];
  ElasticState::Kept& k = !sharded || !a->held ? *a : !b->held || b->ck.step < a->ck.step ? *b : *a;
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
  k.ranks = sharded ? comm.size(Group::kDp) : 1;
  k.rank = sharded ? comm.rank(Group::kDp) : 0;
  if (sharded) {
    const size_t length = zeroShard(P, static_cast<size_t>(k.ranks), 0).length;
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
    if (k.held && (!wholeOnly || k.ranks == 1)) latest = std::max(latest, static_cast<int64_t>(k.ck.step));
  return latest;
}

ElasticState::Kept* keptAt(ElasticState& state, int64_t step, bool whole) {
  for (ElasticState::Kept& k : state.kept)
    if (k.held && static_cast<int64_t>(k.ck.step) == step && (k.ranks == 1) == whole) return &k;
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

// ZeRO-1: the moments of step `step` assembled whole from every survivor's own shard and, for
// each lost rank, its previous rank's replica (each element from one rank, the others adding
// zeros: exact). `oldRank` of `oldSize` is this rank in the world that lost ranks.
void assembleShards(cclComm_t next, const ModelConfig& model, ElasticState& state, int64_t step, int oldRank,
                    int oldSize, Checkpoint& into) {
  int size = 0;
  cclCommCount(next, &size);
  const ElasticState::Kept* mine = keptAt(state, step, false);
  // Every survivor holds the step (see elastic.h); one that does not fails them all alike.
  int32_t missing = mine && mine->ranks == oldSize && mine->rank == oldRank ? 0 : 1, anyMissing = 0;
  check(cclAllReduce(&missing, &anyMissing, 1, cclInt32, cclMax, next, nullptr), "agreeing on the shards", next);
  if (anyMissing)
    throw std::runtime_error("--elastic: a survivor does not hold ZeRO-1's shards of step " + std::to_string(step));
  std::vector<int32_t> survivors(static_cast<size_t>(size));
  const int32_t me = oldRank;
  check(cclAllGather(&me, survivors.data(), 1, cclInt32, next, nullptr), "naming the survivors", next);
  std::vector<char> alive(static_cast<size_t>(oldSize), 0);
  for (int32_t r : survivors) alive[static_cast<size_t>(r)] = 1;
  // Every survivor reads the same list: the same verdict everywhere.
  for (int r = 0; r < oldSize; ++r) {
    const int previous = (r + oldSize - 1) % oldSize;
    if (!alive[static_cast<size_t>(r)] && !alive[static_cast<size_t>(previous)])
      throw std::runtime_error(
          "--elastic: ranks " + std::to_string(previous) + " and " + std::to_string(r) + " of " +
          std::to_string(oldSize) +
          " were both lost: ZeRO-1 keeps a rank's AdamW shard on the previous rank only, so rank " + std::to_string(r) +
          "'s is gone (go on from a checkpoint: --resume)");
  }
  const size_t P = parameterCount(model);
  into = mine->ck;
  std::vector<float> m(P, 0.0f), v(P, 0.0f);
  auto place = [&](int owner, const std::vector<float>& fromM, const std::vector<float>& fromV) {
    const ZeroShard z = zeroShard(P, static_cast<size_t>(oldSize), static_cast<size_t>(owner));
    const auto len = static_cast<std::ptrdiff_t>(z.end - z.begin);
    std::copy(fromM.begin(), fromM.begin() + len, m.begin() + static_cast<std::ptrdiff_t>(z.begin));
    std::copy(fromV.begin(), fromV.begin() + len, v.begin() + static_cast<std::ptrdiff_t>(z.begin));
  };
  place(oldRank, mine->ck.m, mine->ck.v);
  const int following = (oldRank + 1) % oldSize;
  if (!alive[static_cast<size_t>(following)]) place(following, mine->nextM, mine->nextV);
  const cclCompression_t exact = CCL_COMPRESSION_INITIALIZER;
  for (std::vector<float>* x : {&m, &v})
    check(cclAllReduceEx(x->data(), x->data(), P, cclFloat32, cclSum, next, nullptr, &exact, nullptr),
          "assembling the optimizer state", next);
  into.m = std::move(m);
  into.v = std::move(v);
}

}  // namespace

cclComm_t goOnWithoutLost(cclComm_t world, const ModelConfig& model, ElasticState& state) {
  int oldRank = 0, oldSize = 0;
  cclCommUserRank(world, &oldRank);
  cclCommCount(world, &oldSize);
  cclComm_t next = nullptr;
  check(cclCommShrink(world, nullptr, 0, &next, nullptr, CCL_SHRINK_ALIVE | CCL_SHRINK_ABORT), "cclCommShrink", world);
  int rank = 0, size = 0;
  cclCommUserRank(next, &rank);
  cclCommCount(next, &size);
  // A whole copy at the latest step any survivor holds one, or else ZeRO-1's shards at the
  // latest step every survivor completed.
  int64_t whole = latestStep(state, true), any = latestStep(state, false), wholeMax = -1, anyMin = -1;
  check(cclAllReduce(&whole, &wholeMax, 1, cclInt64, cclMax, next, nullptr), "agreeing on the step", next);
  check(cclAllReduce(&any, &anyMin, 1, cclInt64, cclMin, next, nullptr), "agreeing on the step", next);
  Checkpoint ck;
  int64_t from = -1;
  if (wholeMax >= anyMin) {
    from = wholeMax;
    if (from >= 0) shareWhole(next, model, state, from, ck);
  } else {
    from = anyMin;
    assembleShards(next, model, state, from, oldRank, oldSize, ck);
  }
  // What this rank holds now is the whole state of `from` only: shards of the old layout go.
  state.kept = {};
  state.resume = -1;
  if (from >= 0) {
    state.kept[0].held = true;
    state.kept[0].ck = std::move(ck);
    state.resume = 0;
  }
  std::fprintf(stderr, "gpt_train: elastic: going on with %d ranks from step %lld (rank %d now)\n", size,
               static_cast<long long>(std::max<int64_t>(from, 0)), rank);
  return next;
}

}  // namespace gpt
