// SPDX-License-Identifier: BSD-3-Clause
// The cost model a communicator prices its calls on: the links probed (or taken from the
// process's cache, or from CCL_LINK_MODEL), the kernels timed, every rank's agreed; and the
// drift watch that sends the links of a model whose predictions stray back to be measured.
#include "api/tuning.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "api/comm.h"
#include "api/group.h"
#include "collectives/algorithms/algorithms.h"
#include "collectives/exec/compute_cost.h"
#include "collectives/exec/executor.h"
#include "collectives/exec/scratch_pool.h"
#include "common/config.h"
#include "common/log.h"
#include "common/tags.h"

namespace ccl::api {

namespace {

// Links an earlier communicator of this process measured (LinkKey): the slowest pair's
// figures of the probe that measured them. A communicator whose every probing rank finds its
// pair here takes the slowest of theirs instead of probing again (tens of milliseconds per
// level); noteCallTime removes links whose calls stray from their predictions.
std::mutex linkCacheMutex;
std::map<LinkKey, coll::LinkCost> linkCache;

// Runs `plan` as one call of its own on this rank (the next collective sequence number, as
// every rank does at the same point of init) through the executor: the tuner builds its
// probes as plans and never re-enters the public API, whose calls would count in the
// communicator's statistics and pass through its groups and policy.
void runProbePlan(cclComm& comm, const coll::Plan& plan, const void* send, void* recv) {
  coll::ScratchLease scratch(comm.links.scratch, plan.scratchBytes);
  coll::Job job;
  job.plan = &plan;
  job.buffers = {send, recv, scratch.get(), nullptr};
  job.transport = comm.links.transport.get();
  job.tagBase = tags::collectiveBase(comm.seq.collectives++);
  job.aborted = &comm.life.aborted;
  job.callSeed = job.tagBase;
  try {
    coll::execute(std::span<const coll::Job>(&job, 1), optionsFor(&comm));
  } catch (const Error& e) {
    throw Error(e.code(), std::string("the cost model's probe of the links failed: ") + e.what());
  }
}

// The cost model's links when CCL_LINK_MODEL gives none (CCL_CODEC=auto, or
// CCL_LINK_MODEL=probe), one level at a time, unless linkCache knows them: every rank with a
// partner at that level (inside: the next rank of its node, pairs 0-1, 2-3, ...; across: the
// rank of the same local index on the paired node, nodes 0-1, 2-3, ...) exchanges with it,
// all pairs at once, as the plans' messages share the links. A message's time is
// alpha + bytes / beta: alpha from 8 bytes (median of 15: a median of 3 right after init took
// in the scheduling of ranks still timing their kernels, 80 us for a 5 us exchange), beta
// from the growth to a larger exchange (median of 3, from 64 KiB up by 4x until it takes 2 ms
// or reaches 1 MiB: enough bytes to weigh more than the latency on a fast link, tens of
// milliseconds on a slow one). Every rank decides on the slowest pair's times, so all make
// the same calls. One allreduce fitted to both levels (before) priced a node's shared memory
// and its network link alike: on two nodes of two ranks it chose flat plans 1.3-2x slower
// than the hierarchical one (perf/README). Returns false when no rank has a partner there.
bool probeLevel(cclComm& comm, bool across, coll::LinkCost* link) {
  const coll::Topology& t = *comm.placement.topology;
  const int node = t.nodeOf[static_cast<size_t>(comm.rank)];
  const int local = t.localRank[static_cast<size_t>(comm.rank)];
  int partner = -1;
  if (!across && (local ^ 1) < t.nodeSize(node)) partner = t.rankOf(node, local ^ 1);
  if (across && (node ^ 1) < t.nodes() && local < t.nodeSize(node ^ 1)) partner = t.rankOf(node ^ 1, local);
  auto agree = [&](double* v, size_t n) {
    coll::CollArgs a;
    a.rank = comm.rank;
    a.nranks = comm.nranks;
    a.count = n;
    a.dtype = cclFloat64;
    a.op = cclMax;
    a.inPlace = true;
    a.readInPlace = true;
    a.topo = comm.placement.topology.get();
    runProbePlan(comm, coll::planAllReduce(a), v, v);
  };
  // Every rank says whether it has a partner and whether its pair's links are known; all
  // then probe, or all take the slowest known figures (max alpha, min beta).
  const uint64_t peerHost = partner >= 0 ? comm.placement.hostIds[static_cast<size_t>(partner)] : 0;
  const LinkKey key{comm.links.transport->name(), across, std::min(comm.placement.hostId, peerHost),
                    std::max(comm.placement.hostId, peerHost)};
  double known[4] = {partner >= 0 ? 1.0 : 0.0, 0.0, 0.0, -std::numeric_limits<double>::max()};
  if (partner >= 0) {
    std::lock_guard<std::mutex> lock(linkCacheMutex);
    const auto it = linkCache.find(key);
    known[1] = it == linkCache.end() ? 1.0 : 0.0;
    if (it != linkCache.end()) {
      known[2] = it->second.alpha, known[3] = -it->second.beta;
      comm.tuning.pricedLinks.emplace_back(key, it->second);
    }
  }
  agree(known, 4);
  if (known[0] == 0) return false;
  if (known[1] == 0) {
    *link = coll::LinkCost{known[2], -known[3], 0.0};
    if (comm.rank == 0)
      CCL_INFO("comm %p: the links %s nodes known from an earlier communicator of this process",
               static_cast<void*>(&comm), across ? "between" : "inside");
    return true;
  }
  std::vector<char> out(size_t{1} << 20), in(out.size());
  // One message each way with the partner; a rank without one runs an empty plan, so that
  // every rank takes the same sequence numbers.
  auto exchange = [&](size_t bytes) {
    const uint32_t tag = static_cast<uint32_t>(tags::stepTag(0, comm.nranks, 0, 0));
    const coll::Plan plan =
        partner < 0 ? coll::Plan{}
                    : coll::mergePlans(coll::planSend(partner, tag, bytes), coll::planRecv(partner, tag, bytes));
    runProbePlan(comm, plan, out.data(), in.data());
  };
  // `samples` timed exchanges after one warm-up; the `pick`-th fastest, the slowest rank's.
  auto time = [&](size_t bytes, int samples, int pick) {
    std::vector<double> ts(static_cast<size_t>(samples) + 1, 0.0);
    for (double& x : ts) {
      const auto t0 = std::chrono::steady_clock::now();
      exchange(bytes);
      x = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    std::sort(ts.begin() + 1, ts.end());
    double mine = ts[static_cast<size_t>(pick)];
    agree(&mine, 1);
    return mine;
  };
  const double small = time(8, 15, 8);
  size_t bytes = size_t{1} << 16;
  double large = time(bytes, 3, 2);
  while (large < 2e-3 && bytes < out.size()) {
    bytes *= 4;
    large = time(bytes, 3, 2);
  }
  link->alpha = small;
  link->overhead = 0;
  // A larger exchange no slower than the small one (timer noise on a fast link): the
  // bandwidth its bytes alone allow.
  link->beta = static_cast<double>(bytes - 8) / std::max(large - small, large * 1e-3);
  if (partner >= 0) {
    std::lock_guard<std::mutex> lock(linkCacheMutex);
    linkCache[key] = *link;
    std::erase_if(comm.tuning.pricedLinks, [&](const auto& p) { return p.first == key; });
    comm.tuning.pricedLinks.emplace_back(key, *link);
  }
  return true;
}

// Both levels; a level no rank can probe (one node; nodes of one rank) takes the other's.
void probeLinks(cclComm& comm, coll::CostModel* m) {
  const bool inside = probeLevel(comm, false, &m->inside);
  const bool across = probeLevel(comm, true, &m->across);
  if (!inside) m->inside = m->across;
  if (!across) m->across = m->inside;
}

}  // namespace

std::shared_ptr<const coll::CostModel> agreeCostModel(cclComm& comm) {
  struct Mine {
    coll::CostModel model;
    int ok;
    int given;  // CCL_LINK_MODEL set
  };
  static_assert(std::is_trivially_copyable_v<Mine>);
  std::vector<Mine> all(static_cast<size_t>(comm.nranks), Mine{{}, 0, 0});
  Mine& mine = all[static_cast<size_t>(comm.rank)];
  std::string why;
  try {
    const std::string links = config::linkModel();
    mine.given = links.empty() || links == "probe" ? 0 : 1;
    if (mine.given) coll::parseLinkModel(links, &mine.model);
    std::vector<codec::Params> timed = comm.compression.policy.allowed;
    timed.push_back(comm.compression.policy.codec);
    mine.model.compute = coll::measureComputeCost(timed);
    mine.ok = 1;
  } catch (const Error& e) {
    why = e.what();
  }
  comm.links.bootstrap->allGather(all.data(), sizeof(Mine));
  CCL_CHECK(why.empty(), cclInvalidArgument, why);
  std::vector<coll::CostModel> models;
  for (int r = 0; r < comm.nranks; ++r) {
    const Mine& m = all[static_cast<size_t>(r)];
    CCL_CHECK(m.ok, cclInvalidArgument, "the cost model: rank " + std::to_string(r) + " has no valid CCL_LINK_MODEL");
    CCL_CHECK(
        m.given == mine.given, cclInvalidArgument,
        "the cost model: CCL_LINK_MODEL gives links on some ranks and not on others (rank " + std::to_string(r) + ")");
    models.push_back(m.model);
  }
  coll::CostModel agreed = coll::slowestOf(models);
  if (!mine.given && comm.nranks > 1) probeLinks(comm, &agreed);
  auto m = std::make_shared<const coll::CostModel>(agreed);
  if (comm.rank == 0)
    CCL_INFO(
        "comm %p: the cost model prices calls on links (%s) across %.3g us + %.3g GB/s, inside %.3g us + "
        "%.3g GB/s; kernels (the ranks' slowest) copy %.3g GB/s, reduce %.3g GB/s",
        static_cast<void*>(&comm), mine.given ? "CCL_LINK_MODEL" : "probed", m->across.alpha * 1e6,
        m->across.beta / 1e9, m->inside.alpha * 1e6, m->inside.beta / 1e9, m->compute.copy / 1e9,
        m->compute.reduce / 1e9);
  return m;
}

void noteCallTime(cclComm& comm, double observed, double predicted) {
  {
    std::lock_guard<std::mutex> lock(comm.counters.mutex);
    ++comm.tuning.timedCalls;
    const bool off = observed > predicted * kDriftRatio || observed * kDriftRatio < predicted;
    comm.tuning.driftRun = off ? comm.tuning.driftRun + 1 : 0;
    if (comm.tuning.driftRun < kDriftCalls || comm.tuning.driftMarked) return;
    comm.tuning.driftMarked = true;
  }
  int forgotten = 0;
  {
    std::lock_guard<std::mutex> lock(linkCacheMutex);
    for (const auto& [key, figures] : comm.tuning.pricedLinks) {
      const auto it = linkCache.find(key);
      // Only the figures this communicator took: a later probe's stay.
      if (it != linkCache.end() && it->second.alpha == figures.alpha && it->second.beta == figures.beta) {
        linkCache.erase(it);
        ++forgotten;
      }
    }
  }
  CCL_INFO(
      "comm %p: %d calls in a row took more than %gx or less than 1/%gx the cost model's prediction (the last "
      "%.3g us against %.3g us); %s",
      static_cast<void*>(&comm), kDriftCalls, kDriftRatio, kDriftRatio, observed * 1e6, predicted * 1e6,
      forgotten ? "the next communicator of this process measures its links again"
                : "its links were given (CCL_LINK_MODEL) or measured again already");
}

}  // namespace ccl::api
