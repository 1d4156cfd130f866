// SPDX-License-Identifier: BSD-3-Clause
#include "collectives/plan/cost.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <queue>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "codecs/codec.h"
#include "collectives/plan/plan_graph.h"
#include "common/dtype.h"
#include "common/error.h"

namespace ccl::coll {
namespace {

double over(double bytes, double perSecond) { return perSecond > 0 ? bytes / perSecond : 0.0; }

// Bytes a stream of `count` elements puts on a link: a quantizer's fixed length, a
// sparsifier's bound (its kept elements), or every codec's bound on a link that sends at it.
double streamBytes(const codec::Params& p, size_t count, bool atBound) {
  return static_cast<double>(codec::maxEncodedBytes(atBound ? p : codec::fixLength(p), count));
}

// The codec of the stream in each length slot: its encode's, else the plan's (a stream
// received and forwarded).
std::vector<const codec::Params*> slotCodecs(const Plan& p) {
  std::vector<const codec::Params*> out(p.lengthSlots, &p.codec);
  for (const Step& s : p.steps)
    if (encodesStream(s.kind) && s.slot != kNoSlot) out[s.slot] = &p.codecOf(s);
  return out;
}

// Shifts under which the plans are the same and the links too: a rotation of the ranks keeps
// which messages stay inside a node only when the nodes are consecutive blocks of one size
// and it moves whole blocks (or when there is one level); so does an XOR (r to r ^ k, k a
// multiple of the node size), when that size is a power of two.
Shifts linkShifts(const Shifts& s, const Topology* topo) {
  if (!topo || s.blocks == 1 || s.topo || topo->nodes() == 1 || topo->largestNode() == 1) return s;
  const int n = topo->nranks(), l = topo->nodeSize(0);
  bool consecutive = topo->uniform() && s.size == 1 && (!s.xorBlocks || (l & (l - 1)) == 0);
  for (int r = 0; consecutive && r < n; ++r) consecutive = topo->nodeOf[static_cast<size_t>(r)] == r / l;
  if (!consecutive) return Shifts::none(n);
  Shifts whole{n / l, l, nullptr};
  whole.xorBlocks = s.xorBlocks;
  return whole;
}

}  // namespace

bool ComputeCost::timed(const codec::Params& p) const {
  if (p.codec == cclCodecNone) return copy > 0;
  if (codec::isLowRank(p.codec)) return codecStage > 0;
  return encode[static_cast<size_t>(p.codec)] > 0;
}

double ComputeCost::seconds(const Plan& plan, const Step& s) const {
  const double es = static_cast<double>(dataTypeSize(plan.dtype));
  const double n = static_cast<double>(s.count);
  const int codec = plan.codecOf(s).codec;
  switch (s.kind) {
    case StepKind::kSend:
    case StepKind::kRecv:
      return 0;
    case StepKind::kCopy:
      return over(static_cast<double>(s.bytes), copy);
    case StepKind::kWiden:
    case StepKind::kNarrow:
      return over(n * es, copy);
    case StepKind::kReduce:
    case StepKind::kDivide:
      return over(n * es, reduce);
    case StepKind::kRecvReduce:
      return over(n * es, reduceFrom > 0 ? reduceFrom : reduce);
    case StepKind::kDivideFloat:
      return over(n * sizeof(float), reduce);
    case StepKind::kEncode:
      return over(n * sizeof(float), encode[static_cast<size_t>(codec)]);
    case StepKind::kDecode:
      return over(n * sizeof(float), decode[static_cast<size_t>(codec)]);
    case StepKind::kDecodeAdd:
      return over(n * sizeof(float), decodeAdd[static_cast<size_t>(codec)]);
    case StepKind::kDecodeAddEncode: {
      const auto k = static_cast<size_t>(codec);
      const double bytes = n * sizeof(float);
      return fused[k] > 0 ? over(bytes, fused[k]) : over(bytes, decodeAdd[k]) + over(bytes, encode[k]);
    }
    case StepKind::kCodecStage:
      return over(n * sizeof(float), codecStage);
  }
  return 0;
}

Prediction simulate(const std::function<Plan(int)>& planOf, const Shifts& shifts, int rank, const Topology* topo,
                    const CostModel& m) {
  const PlanGraph g = PlanGraph::build(planOf, linkShifts(shifts, topo), rank);
  const size_t total = g.total();
  std::vector<std::vector<const codec::Params*>> codecs;
  for (const Plan& p : g.plans) codecs.push_back(slotCodecs(p));
  // Per plan of the block: its compute lane, and its ports by level (0 inside, 1 across).
  const size_t ranks = g.plans.size();
  std::vector<double> lane(ranks, 0), sendPort(2 * ranks, 0), recvPort(2 * ranks, 0), sendBusy(ranks, 0);
  std::vector<double> readyAt(total, 0), finish(total, 0);
  std::vector<uint32_t> waiting = g.indeg;
  // Steps ready at the same time go in plan order, every rank's step i before any rank's
  // step i + 1, and among ranks by local rank first: so the copies of one step on ranks that
  // are shifts of each other go one after another, in the order one block of plans stands for.
  using Event = std::tuple<double, size_t, int, size_t>;  // ready, index in its plan, local rank, node
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> ready;
  auto push = [&](double at, size_t k) {
    const size_t o = static_cast<size_t>(g.planIndex(k));
    const int local = topo ? topo->localRank[static_cast<size_t>(g.rankOf(k))] : 0;
    ready.push({at, k - g.first[o], local, k});
  };
  for (size_t k = 0; k < total; ++k)
    if (g.rep[k] == k && waiting[k] == 0) push(0.0, k);
  Prediction out;
  size_t done = 0;
  while (!ready.empty()) {
    const auto [at, index, local, u] = ready.top();
    ready.pop();
    ++done;
    const Step& s = g.step(u);
    const size_t o = static_cast<size_t>(g.planIndex(u));
    double end = at;
    if (s.kind == StepKind::kSend) {
      const size_t q = static_cast<size_t>(g.planIndex(g.partner[u]));
      const int from = g.rankOf(u);
      const size_t level =
          topo && topo->nodeOf[static_cast<size_t>(from)] == topo->nodeOf[static_cast<size_t>(s.peer)] ? 0 : 1;
      const LinkCost& link = level == 0 ? m.inside : m.across;
      const double bytes =
          s.slot == kNoSlot ? static_cast<double>(s.bytes) : streamBytes(*codecs[o][s.slot], s.count, m.streamsAtBound);
      // The sender's port sends its messages one after another; the receiver's port takes
      // what arrives one after another (an incast queues there, not at its senders).
      const double busy = link.overhead + over(bytes, link.beta);
      const double start = std::max(at, sendPort[2 * o + level]);
      sendPort[2 * o + level] = start + busy;
      const double taken = std::max(start, recvPort[2 * q + level]) + busy;
      recvPort[2 * q + level] = taken;
      sendBusy[o] += busy;
      end = taken + link.alpha;
      ++out.messages;
    } else {
      const double start = std::max(at, lane[o]);
      end = start + m.compute.seconds(g.plans[o], s);
      lane[o] = end;
    }
    finish[u] = end;
    out.seconds = std::max(out.seconds, end);
    for (size_t v : g.succ[u]) {
      readyAt[v] = std::max(readyAt[v], end);
      if (--waiting[v] == 0) push(readyAt[v], v);
    }
  }
  CCL_CHECK(done == g.nodes, cclInternalError, "simulate: the plans wait on each other in a cycle");
  out.linkSeconds = *std::max_element(sendBusy.begin(), sendBusy.end());
  return out;
}

Prediction predict(Coll c, const CollArgs& a, const CostModel& m) {
  auto planOf = [&](int r) {
    CollArgs x = a;
    x.rank = r;
    return planCollective(c, x);
  };
  return simulate(planOf, planShifts(c, a), a.rank, a.topo, m);
}

Choice cheapestAlgorithm(Coll c, const CollArgs& a, const CostModel& m) {
  Choice best;
  CollArgs x = a;
  // Priced from rank 0's block on every rank: a rank's own pieces may differ by an element,
  // and its prediction with them, which near a tie could part the ranks' choices.
  x.rank = 0;
  const bool onStreams = a.codec.codec != cclCodecNone;
  if (onStreams && !(collInfo(c).compressible && compressible(x))) return best;
  best.codec = a.codec;
  auto price = [&](const AlgoEntry& e) {
    x.algo = e.algo;  // naming a row that applies runs it
    const double t = predict(c, x, m).seconds;
    if (best.seconds == 0 || t < best.seconds) best.algo = e.algo, best.seconds = t;
  };
  if (a.algo != Algo::kAuto) {  // the user's algorithm, or what runs in its place
    price(chooseAlgorithm(c, x));
    return best;
  }
  for (const AlgoEntry& e : algorithmTable())
    if (e.coll == c && e.compressed == onStreams && (!e.applies || e.applies(x))) price(e);
  return best;
}

bool modelChooses(const CollArgs& a, const CostModel* m) {
  return m && a.algo == Algo::kAuto && m->compute.timed(a.codec);
}

Choice chooseAlgo(Coll c, const CollArgs& a, const CostModel* m) {
  if (modelChooses(a, m)) {
    const Choice made = cheapestAlgorithm(c, a, *m);
    if (made.seconds > 0) return made;
  }
  return Choice{a.codec, chooseAlgorithm(c, a).algo, 0, 0};
}

Choice chooseCheapest(Coll c, const CollArgs& a, std::span<const codec::Params> allowed, const CostModel& m,
                      double margin) {
  CollArgs x = a;
  x.codec = codec::Params{};
  const Choice plain = cheapestAlgorithm(c, x, m);
  Choice best = plain;
  for (const codec::Params& p : allowed) {
    x.codec = p;
    const Choice lossy = cheapestAlgorithm(c, x, m);
    if (lossy.seconds > 0 && lossy.seconds < (1 - margin) * plain.seconds && lossy.seconds < best.seconds) best = lossy;
  }
  best.uncompressed = plain.seconds;
  return best;
}

void parseLinkModel(const std::string& text, CostModel* m) {
  auto bad = [&](const std::string& why) {
    return Error(cclInvalidArgument, "CCL_LINK_MODEL='" + text + "': " + why +
                                         " (ALPHA_US:GBYTES_PER_S[:OVERHEAD_US], or across=...,inside=...)");
  };
  auto link = [&](const std::string& v) {
    std::vector<double> f;
    for (size_t at = 0; at <= v.size();) {
      const size_t end = std::min(v.find(':', at), v.size());
      const std::string field = v.substr(at, end - at);
      char* stop = nullptr;
      const double x = std::strtod(field.c_str(), &stop);
      if (field.empty() || *stop || !(x >= 0)) throw bad("'" + field + "' is not a number");
      f.push_back(x);
      at = end + 1;
    }
    if (f.size() < 2 || f.size() > 3) throw bad("'" + v + "' is not alpha:bandwidth[:overhead]");
    if (!(f[1] > 0)) throw bad("the bandwidth must be positive");
    return LinkCost{f[0] * 1e-6, f[1] * 1e9, f.size() == 3 ? f[2] * 1e-6 : 0.0};
  };
  bool across = false, inside = false;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t end = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, end - at);
    const size_t eq = item.find('=');
    const std::string level = eq == std::string::npos ? "" : item.substr(0, eq);
    const LinkCost l = link(eq == std::string::npos ? item : item.substr(eq + 1));
    if (level.empty() || level == "across") m->across = l, across = true;
    if (level.empty() || level == "inside") m->inside = l, inside = true;
    if (!level.empty() && level != "across" && level != "inside")
      throw bad("level '" + level + "' is not across or inside");
    at = end + 1;
  }
  if (!across && !inside) throw bad("no link");
  if (!inside) m->inside = m->across;
  if (!across) m->across = m->inside;
}

CostModel slowestOf(std::span<const CostModel> models) {
  CCL_CHECK(!models.empty(), cclInternalError, "slowestOf: no model");
  CostModel out = models[0];
  auto slowestLink = [](LinkCost& a, const LinkCost& b) {
    a.alpha = std::max(a.alpha, b.alpha);
    a.overhead = std::max(a.overhead, b.overhead);
    a.beta = std::min(a.beta, b.beta);
  };
  // A throughput of 0 is "free": the slowest of a measured one and a free one is the measured.
  auto slowest = [](double& a, double b) { a = a == 0 ? b : b == 0 ? a : std::min(a, b); };
  for (const CostModel& m : models.subspan(1)) {
    slowestLink(out.inside, m.inside);
    slowestLink(out.across, m.across);
    slowest(out.compute.copy, m.compute.copy);
    slowest(out.compute.reduce, m.compute.reduce);
    slowest(out.compute.reduceFrom, m.compute.reduceFrom);
    slowest(out.compute.codecStage, m.compute.codecStage);
    for (size_t k = 0; k < out.compute.encode.size(); ++k) {
      slowest(out.compute.encode[k], m.compute.encode[k]);
      slowest(out.compute.decode[k], m.compute.decode[k]);
      slowest(out.compute.decodeAdd[k], m.compute.decodeAdd[k]);
      slowest(out.compute.fused[k], m.compute.fused[k]);
    }
    out.streamsAtBound = out.streamsAtBound || m.streamsAtBound;
  }
  return out;
}

ComputeCost measuredDeviceCompute() {
  ComputeCost c;
  c.copy = 2123.6e9;  // read + written 4,247 GB/s
  c.reduce = c.copy * 2 / 3;
  auto set = [&](cclCodec_t k, double enc, double dec, double add, double hop) {
    c.encode[k] = enc * 1e9;
    c.decode[k] = dec * 1e9;
    c.decodeAdd[k] = add * 1e9;
    c.fused[k] = hop * 1e9;
  };
  set(cclCodecInt8, 2539.2, 2558.5, 1647.9, 1233.7);
  set(cclCodecInt4, 2518.4, 2744.1, 1713.5, 1226.1);
  set(cclCodecInt2, 2576.2, 2652.1, 1753.5, 1272.5);
  set(cclCodecFp8E4m3, 2122.4, 2573.5, 1646.6, 1042.2);
  set(cclCodecFp8E5m2, 2114.3, 2567.0, 1647.9, 1042.6);
  set(cclCodecMxfp8E4m3, 2232.9, 2543.9, 1624.5, 1123.2);
  set(cclCodecMxfp4, 1828.7, 2670.3, 1687.2, 1027.0);
  set(cclCodecNvfp4, 1356.1, 2425.0, 1607.7, 0);
  set(cclCodecInt2Midrise, 2595.9, 2822.9, 1753.6, 1262.2);
  return c;
}

}  // namespace ccl::coll
