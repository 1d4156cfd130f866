// SPDX-License-Identifier: BSD-3-Clause
// Steps of several ranks beyond single calls: a new default codec, split (and finalize),
// abort, inits of their own, calls mismatched across ranks, and checked health calls.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api_fuzz.h"

namespace apifuzz {

void setCompressionStep(World& w, Rng& g) {
  const uint64_t k = g.below(4);
  std::string why;
  cclCompression_t c = k == 0   ? invalidCompression(g, &why)
                       : k == 1 ? randomCompression(g)
                                : cclCompression_t(CCL_COMPRESSION_INITIALIZER);
  const bool null = k == 3;
  std::vector<cclResult_t> rcs(w.size());
  w.run([&](int r) {
    rcs[r] = call("cclCommSetCompression", [&] { return cclCommSetCompression(w.comm[r], null ? nullptr : &c); });
  });
  const bool allOk = std::all_of(rcs.begin(), rcs.end(), [](cclResult_t rc) { return rc == cclSuccess; });
  const bool allFail = std::none_of(rcs.begin(), rcs.end(), [](cclResult_t rc) { return rc == cclSuccess; });
  if (k == 0 && !allFail) problem("cclCommSetCompression accepted invalid parameters (" + why + ")");
  if (k >= 2 && !allOk) problem("cclCommSetCompression refused codec none or NULL");
  if (!allOk && !allFail) w.tainted = true;  // ranks now differ in their default codec
  if (allOk) w.lossyDefault = !null && c.codec != cclCodecNone;
}

namespace {

// The communicator a split should give rank r (its rank and size), from every rank's color
// and key; {-1, 0} for CCL_SPLIT_NOCOLOR.
std::pair<int, int> splitPlace(const std::vector<int>& colors, const std::vector<int>& keys, int r) {
  if (colors[r] == CCL_SPLIT_NOCOLOR) return {-1, 0};
  std::vector<int> mine;
  for (size_t q = 0; q < colors.size(); ++q)
    if (colors[q] == colors[r]) mine.push_back(static_cast<int>(q));
  std::stable_sort(mine.begin(), mine.end(), [&](int a, int b) { return keys[a] < keys[b]; });
  const int at = static_cast<int>(std::find(mine.begin(), mine.end(), r) - mine.begin());
  return {at, static_cast<int>(mine.size())};
}

// Arguments every rank refuses alike (`bad`, 0 to 3): a negative color other than NOCOLOR,
// no output, a group, a configuration that is invalid or names another host identity than
// the parent's (a split keeps every rank's identity).
void refusedSplit(World& w, Rng& g, uint64_t bad) {
  const int color = g.chance(0.5) ? -2 : INT_MIN;
  const uint64_t configFault = g.below(3);
  w.run([&](int r) {
    cclComm_t child = reinterpret_cast<cclComm_t>(0x5);
    cclResult_t rc;
    if (bad == 0) {
      rc = call("cclCommSplit", [&] { return cclCommSplit(w.comm[r], color, 0, &child, nullptr); });
    } else if (bad == 1) {
      rc = call("cclCommSplit", [&] { return cclCommSplit(w.comm[r], 0, 0, nullptr, nullptr); });
    } else if (bad == 2) {
      cclConfig_t c = CCL_CONFIG_INITIALIZER;
      if (configFault == 0) c.magic = 0;
      if (configFault == 1) c.timeoutMs = -1;
      if (configFault == 2) c.hostId = "not-the-parent's-host";
      rc = call("cclCommSplit", [&] { return cclCommSplit(w.comm[r], 0, 0, &child, &c); });
    } else {
      call("cclGroupStart", [] { return cclGroupStart(); });
      rc = call("cclCommSplit", [&] { return cclCommSplit(w.comm[r], 0, 0, &child, nullptr); });
      call("cclGroupEnd", [] { return cclGroupEnd(); });
    }
    expectRefused("cclCommSplit(invalid)", rc);
    if (bad != 1 && child != nullptr) problem("cclCommSplit failed but left *newcomm non-NULL");  // 1: no output
  });
}

// One rank's part of a split: `child` should be rank `rank` of `size` (rank -1: none). Its
// place, a checked allreduce, then finalize (calls refused after it) if asked; what was
// wrong, or "".
std::string checkSplitChild(cclComm_t child, int rank, int size, uint64_t salt, bool finalize) {
  if (rank < 0) return child ? "a rank with CCL_SPLIT_NOCOLOR got a communicator" : "";
  int cr = -1, cn = -1;
  call("cclCommUserRank", [&] { return cclCommUserRank(child, &cr); });
  call("cclCommCount", [&] { return cclCommCount(child, &cn); });
  if (cr != rank || cn != size)
    return "split gave rank " + std::to_string(cr) + " of " + std::to_string(cn) + ", expected " +
           std::to_string(rank) + " of " + std::to_string(size);
  const size_t count = 1 + mix(salt) % 300;
  std::vector<int64_t> in(count), out(count, -1);
  for (size_t i = 0; i < count; ++i) in[i] = static_cast<int64_t>(mix(salt, i) % 1000) + rank;
  if (call("cclAllReduce",
           [&] { return cclAllReduce(in.data(), out.data(), count, cclInt64, cclMax, child, nullptr); }) != cclSuccess)
    return "allreduce on a split communicator failed: " + lastError();
  for (size_t i = 0; i < count; ++i)
    if (out[i] != static_cast<int64_t>(mix(salt, i) % 1000) + size - 1)
      return "allreduce max on a split communicator gave a wrong value";
  if (finalize) {
    call("cclCommFinalize", [&] { return cclCommFinalize(child); });
    expectRefused("cclAllReduce after cclCommFinalize", call("cclAllReduce", [&] {
                    return cclAllReduce(in.data(), out.data(), count, cclInt64, cclMax, child, nullptr);
                  }));
    expectRefused("cclCommFinalize twice", call("cclCommFinalize", [&] { return cclCommFinalize(child); }));
    int node = -1;
    call("cclCommTopology", [&] { return cclCommTopology(child, &node, nullptr, nullptr, nullptr); });
  }
  return "";
}

}  // namespace

void splitStep(World& w, Rng& g) {
  const int n = w.size();
  const uint64_t bad = g.below(10);
  if (bad < 4) {
    refusedSplit(w, g, bad);
    return;
  }
  std::vector<int> colors(n), keys(n);
  // Mostly two colors, so that new communicators have several ranks; now and then no color
  // or a large one.
  static const int palette[] = {0, 1, CCL_SPLIT_NOCOLOR, 7, INT_MAX};
  for (int r = 0; r < n; ++r) {
    colors[r] = palette[g.below(g.chance(0.7) ? 2 : 5)];
    keys[r] = g.chance(0.5) ? static_cast<int>(g.below(3)) : randomInt(g);
  }
  const bool finalize = g.chance(0.4);
  const bool withConfig = g.chance(0.3);  // else the parent's configuration
  const uint64_t salt = g.next();
  std::vector<cclComm_t> child(n, nullptr);
  std::vector<cclResult_t> rcs(n);
  w.run([&](int r) {
    cclConfig_t c = CCL_CONFIG_INITIALIZER;
    c.commName = "split";
    c.timeoutMs = 1000 * fuzz::cclTimeoutSeconds();
    rcs[r] = call("cclCommSplit",
                  [&] { return cclCommSplit(w.comm[r], colors[r], keys[r], &child[r], withConfig ? &c : nullptr); });
  });
  for (int r = 0; r < n; ++r) {
    if (rcs[r] != cclSuccess) {
      problem("cclCommSplit failed on rank " + std::to_string(r) + " with valid arguments");
      w.tainted = true;
    }
  }
  if (w.tainted) {
    w.run([&](int r) {
      if (child[r]) call("cclCommDestroy", [&] { return cclCommDestroy(child[r]); });
    });
    return;
  }
  // Each new communicator: its place, a checked allreduce, then finalize (calls refused
  // after it) or destroy.
  std::vector<std::string> bad2(n);
  w.run([&](int r) {
    const auto [rank, size] = splitPlace(colors, keys, r);
    bad2[r] = checkSplitChild(child[r], rank, size, salt, finalize);
  });
  w.run([&](int r) {
    if (child[r]) call("cclCommDestroy", [&] { return cclCommDestroy(child[r]); });
  });
  for (int r = 0; r < n; ++r)
    if (!bad2[r].empty()) problem("rank " + std::to_string(r) + ": " + bad2[r]);
}

void abortStep(World& w, Rng& g) {
  const int n = w.size();
  const int victim = static_cast<int>(g.below(n));
  const bool viaStream = g.chance(0.5);
  std::vector<cclComm_t> child(n, nullptr);
  std::vector<cclResult_t> rcs(n, cclSuccess);
  w.run(
      [&](int r) { rcs[r] = call("cclCommSplit", [&] { return cclCommSplit(w.comm[r], 0, 0, &child[r], nullptr); }); });
  if (std::any_of(rcs.begin(), rcs.end(), [](cclResult_t rc) { return rc != cclSuccess; })) {
    problem("cclCommSplit of the whole communicator failed");
    w.tainted = true;
    w.run([&](int r) {
      if (child[r]) call("cclCommDestroy", [&] { return cclCommDestroy(child[r]); });
    });
    return;
  }
  w.run([&](int r) {
    std::vector<float> in(1000, 1.f), out(1000, 0.f);
    if (r == victim) {
      if (viaStream) {
        // Enqueued, then aborted from this thread: the queued operation fails promptly
        // (its peers never join it).
        cclStream_t s = nullptr;
        call("cclHostStreamCreate", [&] { return cclHostStreamCreate(&s); });
        call("cclAllReduce",
             [&] { return cclAllReduce(in.data(), out.data(), in.size(), cclFloat32, cclSum, child[r], s); });
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        call("cclCommAbort", [&] { return cclCommAbort(child[r]); });
        const cclResult_t rc = call("cclHostStreamSynchronize", [&] { return cclHostStreamSynchronize(s); });
        if (rc == cclSuccess) problem("an allreduce queued on an aborted communicator succeeded");
        call("cclHostStreamDestroy", [&] { return cclHostStreamDestroy(s); });
      } else {
        call("cclCommAbort", [&] { return cclCommAbort(child[r]); });
      }
      return;
    }
    if (!viaStream) {
      const cclResult_t rc = call("cclAllReduce", [&] {
        return cclAllReduce(in.data(), out.data(), in.size(), cclFloat32, cclSum, child[r], nullptr);
      });
      if (rc == cclSuccess) problem("an allreduce succeeded although rank " + std::to_string(victim) + " aborted");
    }
    call("cclCommDestroy", [&] { return cclCommDestroy(child[r]); });
  });
}

void initStep(World& w, Rng& g) {
  const int n = w.size();
  const uint64_t k = g.below(10);
  if (k < 5) {
    const uint64_t seed = g.next();
    w.run([&](int r) {
      Rng cg(mix(seed, r));
      ConfigHolder h;
      randomValidConfig(cg, 0, cg.chance(0.5) ? 1 : 0, &h);
      std::string why;
      cclCompression_t cmp = cg.chance(0.5) ? randomCompression(cg) : invalidCompression(cg, &why);
      if (cg.chance(0.3)) h.config.compression = &cmp;
      if (cg.chance(0.2)) h.config.intraCompression = &cmp;
      if (cg.chance(0.2)) h.config.blocking = 0;
      const bool used = h.config.compression == &cmp || h.config.intraCompression == &cmp;
      cclUniqueId id;
      if (call("cclGetUniqueId", [&] { return cclGetUniqueId(&id); }) != cclSuccess) return;
      cclComm_t c = nullptr;
      const cclResult_t rc = call(
          "cclCommInitRankConfig", [&] { return cclCommInitRankConfig(&c, 1, id, 0, &h.config); }, true);
      if (rc == cclSuccess && used && !why.empty() && h.config.size == sizeof(cclConfig_t))
        problem("cclCommInitRankConfig accepted invalid codec parameters (" + why + ")");
      if (rc != cclSuccess) return;
      int32_t v = 5, out = 0;
      if (call("cclAllReduce", [&] { return cclAllReduce(&v, &out, 1, cclInt32, cclSum, c, nullptr); }) != cclSuccess ||
          out != 5)
        problem("a one-rank communicator with a random config failed an allreduce");
      call("cclCommDestroy", [&] { return cclCommDestroy(c); });
    });
    return;
  }
  if (k < 8) {
    // cclCommInitAll from one thread, driven in one group from that thread.
    const int ndev = static_cast<int>(g.range(1, 4));
    const uint64_t salt = g.next();
    w.run([&](int r) {
      if (r != 0) return;
      cclComm_t comms[kMaxRanks] = {};
      if (call("cclCommInitAll", [&] { return cclCommInitAll(comms, ndev, nullptr); }) != cclSuccess) {
        problem("cclCommInitAll(" + std::to_string(ndev) + ") failed: " + lastError());
        return;
      }
      const size_t count = 1 + mix(salt) % 500;
      std::vector<std::vector<int32_t>> in(ndev, std::vector<int32_t>(count)), out(ndev, std::vector<int32_t>(count));
      for (int d = 0; d < ndev; ++d)
        for (size_t i = 0; i < count; ++i) in[d][i] = static_cast<int32_t>(mix(salt, i) % 100) + d;
      call("cclGroupStart", [] { return cclGroupStart(); });
      for (int d = 0; d < ndev; ++d)
        call("cclAllReduce",
             [&] { return cclAllReduce(in[d].data(), out[d].data(), count, cclInt32, cclSum, comms[d], nullptr); });
      if (call("cclGroupEnd", [] { return cclGroupEnd(); }) != cclSuccess) {
        problem("a group of allreduces over cclCommInitAll's communicators failed: " + lastError());
      } else {
        for (int d = 0; d < ndev; ++d)
          for (size_t i = 0; i < count; ++i)
            if (out[d][i] != ndev * static_cast<int32_t>(mix(salt, i) % 100) + ndev * (ndev - 1) / 2) {
              problem("wrong allreduce over cclCommInitAll's communicators");
              d = ndev;
              break;
            }
      }
      for (int d = 0; d < ndev; ++d) call("cclCommDestroy", [&] { return cclCommDestroy(comms[d]); });
    });
    return;
  }
  // Ranks that disagree at init: one claims another nranks, or two claim one rank.
  cclUniqueId id;
  fuzz::bindSlot(kMainSlot);
  if (call("cclGetUniqueId", [&] { return cclGetUniqueId(&id); }) != cclSuccess) return;
  const int odd = static_cast<int>(g.below(n));
  const bool dupRank = k == 9 && n > 1;
  std::vector<cclResult_t> rcs(n);
  w.run([&](int r) {
    cclComm_t c = reinterpret_cast<cclComm_t>(0x6);
    const int nr = !dupRank && r == odd ? n + 1 : n;
    const int rank = dupRank && r == odd ? (r + 1) % n : r;
    rcs[r] = call("cclCommInitRank", [&] { return cclCommInitRank(&c, nr, id, rank); });
    if (rcs[r] == cclSuccess)
      call("cclCommDestroy", [&] { return cclCommDestroy(c); });
    else if (c != nullptr)
      problem("cclCommInitRank failed but left *comm non-NULL");
  });
  for (int r = 0; r < n; ++r)
    if (rcs[r] == cclSuccess)
      problem(std::string("rank ") + std::to_string(r) + " joined a communicator whose ranks " +
              (dupRank ? "claim one rank twice" : "disagree on nranks"));
}

void mismatchStep(World& w, Rng& g) {
  const int n = w.size();
  Step base;
  base.main = randomSpec(g, n, false);
  Spec& s = base.main;
  s.count = 1 + g.below(g.chance(0.5) ? 64 : 20000);
  s.layout = Layout::kSeparate;
  s.stream = StreamKind::kNone;
  s.misalignSend = s.misalignRecv = 0;
  base.depth = fnInfo(s.fn).base == Base::kSendRecv ? 1 : 0;
  const int victim = static_cast<int>(g.below(n));
  Step odd = base;
  const uint64_t how = g.below(6);
  std::string what;
  switch (how) {
    case 0:
      odd.main.count = g.chance(0.5) ? s.count * 2 + 1 : std::max<size_t>(1, s.count / 2);
      what = "a different count";
      break;
    case 1:
      odd.main.dtype = (s.dtype + 1 + static_cast<int>(g.below(cclNumTypes - 1))) % cclNumTypes;
      what = "a different datatype";
      break;
    case 2:
      odd.main.op = (s.op + 1) % cclNumOps;
      odd.main.root = (s.root + 1) % n;
      odd.main.shift = (s.shift + 1) % n;
      what = "a different op/root/peer";
      break;
    case 3:
      odd.main.fn = static_cast<Fn>(g.below(static_cast<uint64_t>(Fn::kNum)));
      odd.depth = fnInfo(odd.main.fn).base == Base::kSendRecv ? 1 : 0;
      what = std::string("a different call (") + fnInfo(odd.main.fn).name + ")";
      break;
    case 4:
      odd.main.codecKind = CodecKind::kRandom;
      odd.main.codec = randomCompression(g);
      odd.main.fn = Fn::kAllReduceEx;
      base.main.fn = Fn::kAllReduceEx;
      base.main.dtype = odd.main.dtype = cclFloat32;
      what = "a different codec";
      break;
    default:
      what = "no call at all";
      break;
  }
  std::vector<RankOutcome> outcomes(n);
  const uint64_t seed = g.next();
  const auto start = fuzz::Clock::now();
  w.run([&](int r) {
    if (r == victim && how == 5) return;
    runRank(r == victim ? odd : base, w, r, mix(seed, r), outcomes[r]);
  });
  const double took = std::chrono::duration<double>(fuzz::Clock::now() - start).count();
  std::fprintf(stderr, "step %llu: mismatch (%s on rank %d of %d: %s) returned in %.2f s\n",
               static_cast<unsigned long long>(stepNo.load()), what.c_str(), victim, n, describe(s).c_str(), took);
  w.tainted = true;  // whatever happened, the ranks may be out of step: a new communicator
  w.keepAlive.push_back(std::make_shared<std::vector<RankOutcome>>(std::move(outcomes)));
}

void healthStep(World& w, Rng& g) {
  static const Fn fns[] = {Fn::kAllReduce, Fn::kBroadcast, Fn::kAllGather};
  Step st;
  st.main.fn = fns[g.below(3)];
  st.main.count = 1 + g.below(3000);
  st.main.dtype = g.chance(0.5) ? cclInt32 : cclFloat64;
  st.main.op = static_cast<int>(g.below(cclNumOps));
  st.main.root = static_cast<int>(g.below(w.size()));
  st.main.salt = g.next();
  runStep(w, st, g);
}

}  // namespace apifuzz
