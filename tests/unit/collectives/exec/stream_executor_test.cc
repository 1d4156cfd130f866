// SPDX-License-Identifier: BSD-3-Clause
// The stream executor on host streams against the host executor: every collective, codec
// and algorithm, 1..8 ranks, gives the same bytes (results and error-feedback state), with
// lengths known on the host, with every encoded stream sent at its bound as a device link
// sends it, and staged through separate host memory as the staged transport moves device
// buffers. Also: the wave schedule pairs every message at the same wave on both
// ends, a call returns before it has run, and failures reach the caller's stream.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <numeric>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "codecs/codec_table.h"
#include "collectives/algorithms/algorithms.h"
#include "collectives/exec/links/transport_link.h"
#include "collectives/exec/stream_executor.h"
#include "common/activity.h"
#include "plan_runner.h"
#include "shard.h"

namespace ccl::coll {
namespace {

using Bytes = std::vector<std::byte>;

struct Case {
  Coll coll;
  cclCodec_t codec;
  Algo algo;
  int nranks;
  cclDataType_t dtype = cclFloat32;
  cclRedOp_t op = cclSum;
  bool feedback = false;
  size_t count = 1000;
  bool fixedLength = false;     // codec::fixLength: what a link that sees no lengths encodes with
  std::vector<int> nodes = {};  // node sizes (consecutive ranks); empty: no topology
  cclCodec_t intraCodec = cclCodecNone;
  int nanRank = -1;  // a rank whose fp32 input holds a NaN (element 5)
};

// The topology of `nodes`, kept for the process's life (CollArgs points to it).
const Topology* topologyOf(const std::vector<int>& nodes) {
  if (nodes.empty()) return nullptr;
  static std::map<std::vector<int>, Topology> made;
  auto it = made.find(nodes);
  if (it == made.end()) it = made.emplace(nodes, Topology::blocks(nodes)).first;
  return &it->second;
}

std::string name(const Case& c) {
  return std::string(collInfo(c.coll).name) + "/" + codec::kCodecTable.rows[c.codec].name + "/" + algoName(c.algo) +
         "/n" + std::to_string(c.nranks) + "/dtype" + std::to_string(c.dtype) + "/op" + std::to_string(c.op) +
         (c.feedback ? "/feedback" : "") + (c.fixedLength ? "/fixed" : "") +
         (c.nodes.empty() ? "" : "/nodes" + Topology::blocks(c.nodes).describe()) +
         (c.intraCodec == cclCodecNone ? "" : std::string("/intra ") + cclCodecName(c.intraCodec));
}

CollArgs argsOf(const Case& c, int r) {
  CollArgs a;
  a.rank = r;
  a.nranks = c.nranks;
  a.count = c.count;
  a.dtype = c.dtype;
  a.op = c.op;
  a.root = c.nranks > 1 ? 1 : 0;
  a.chunkBytes = 1024;  // several chunks per piece, so waves hold pipelined chunks
  a.algo = c.algo;
  a.codec = codec::defaultParams(c.codec);
  a.codec.seed = 7;
  if (c.fixedLength) a.codec = codec::fixLength(a.codec);
  a.feedback = c.feedback;
  a.topo = topologyOf(c.nodes);
  a.intraCodec = codec::defaultParams(c.intraCodec);
  a.intraCodec.seed = 11;
  return a;
}

// Inputs, outputs and residuals of every rank.
struct World {
  std::vector<Bytes> send, recv;
  std::vector<std::vector<float>> feedback;
};

World makeWorld(const Case& c, size_t feedbackFloats) {
  World w;
  const size_t esize = c.dtype == cclFloat32 || c.dtype == cclInt32 ? 4 : 2;
  for (int r = 0; r < c.nranks; ++r) {
    const BufferCounts n = bufferCounts(c.coll, c.count, static_cast<size_t>(c.nranks), r == 1 % c.nranks);
    Bytes s(std::max<size_t>(n.send, 1) * esize), d(std::max<size_t>(n.recv, 1) * esize, std::byte{0x5a});
    std::mt19937 rng(1234 + r);
    std::uniform_int_distribution<int> small(-40, 40);
    for (size_t i = 0; i * esize < s.size(); ++i) {
      if (c.dtype == cclFloat32) {
        const float v = static_cast<float>(small(rng)) * 0.37f;
        std::memcpy(&s[i * 4], &v, 4);
      } else if (c.dtype == cclInt32) {
        const int32_t v = small(rng);
        std::memcpy(&s[i * 4], &v, 4);
      } else {  // fp16/bf16: any small exact pattern
        const uint16_t v = static_cast<uint16_t>(0x3c00 + (small(rng) & 0xff));
        std::memcpy(&s[i * 2], &v, 2);
      }
    }
    if (r == c.nanRank && c.dtype == cclFloat32) {
      const float nan = std::nanf("");
      std::memcpy(&s[5 * 4], &nan, 4);
    }
    w.send.push_back(std::move(s));
    w.recv.push_back(std::move(d));
    std::vector<float> fb(feedbackFloats);
    for (auto& f : fb) f = static_cast<float>(small(rng)) * 1e-3f;
    w.feedback.push_back(std::move(fb));
  }
  return w;
}

Buffers buffersOf(World& w, int r, void* scratch) {
  return Buffers{w.send[r].data(), w.recv[r].data(), scratch, w.feedback[r].empty() ? nullptr : w.feedback[r].data()};
}

// Runs the case with the host executor: the reference.
World runHost(const Case& c, size_t fb, uint64_t callSeed) {
  World w = makeWorld(c, fb);
  testing::runPlans(
      c.nranks, [&](int r) { return planCollective(c.coll, argsOf(c, r)); },
      [&](int r) {
        return testing::RankBuffers{w.send[r].data(), w.recv[r].data(),
                                    w.feedback[r].empty() ? nullptr : w.feedback[r].data()};
      },
      callSeed);
  return w;
}

// Runs the case with the stream executor on host streams; returns each rank's wire bytes.
// Host memory standing in for pinned staging memory.
StagingMemory hostStaging() {
  return StagingMemory{[](size_t n) { return std::malloc(n); }, [](void* p) { std::free(p); },
                       [](size_t n, Stream&) { return std::malloc(n); },
                       [](void* p, Stream* s) {
                         if (s)
                           s->enqueue([p] { std::free(p); });
                         else
                           std::free(p);
                       }};
}

World runStreams(const Case& c, size_t fb, uint64_t callSeed, bool exact, std::vector<ExecStats>* stats = nullptr,
                 bool staged = false) {
  World w = makeWorld(c, fb);
  const auto fabric = transport::makeFabric(c.nranks);
  if (stats) stats->assign(c.nranks, ExecStats{});
  ccltest::expectNoneThrew(ccltest::runRanks(c.nranks, [&](int r) {
    auto plan = std::make_shared<const Plan>(planCollective(c.coll, argsOf(c, r)));
    auto sched = std::make_shared<const Schedule>(
        scheduleWaves([&](int q) { return planCollective(c.coll, argsOf(c, q)); }, c.nranks, r));
    std::vector<std::byte> scratch(plan->scratchBytes);
    const auto t = transport::createLocalTransport(fabric, r);
    TransportLink link(*t, exact, std::chrono::seconds(20), nullptr,
                       staged ? std::optional<StagingMemory>(hostStaging()) : std::nullopt);
    HostKernels kernels;
    HostStream caller, comm;
    StreamJob job{plan, sched, buffersOf(w, r, scratch.data()), 0, callSeed, stats ? &(*stats)[r] : nullptr, {}};
    executeOnStream(job, link, kernels, caller, comm);
    caller.synchronize();
    std::string message;
    const cclResult_t e = caller.takeError(&message);
    ASSERT_EQ(e, cclSuccess) << message;
    comm.synchronize();  // the transport outlives the last wave's bookkeeping step
  }));
  return w;
}

bool plans(const Case& c) {
  try {
    for (int r = 0; r < c.nranks; ++r) (void)planCollective(c.coll, argsOf(c, r));
    return true;
  } catch (const Error&) {
    return false;  // a combination the library refuses (e.g. a sparse algorithm for a quantiser)
  }
}

size_t feedbackFor(const Case& c) { return c.feedback ? feedbackFloats(c.coll, argsOf(c, 0)) : 0; }

void expectSame(const World& a, const World& b, const Case& c, const char* what) {
  for (int r = 0; r < c.nranks; ++r) {
    EXPECT_EQ(a.recv[r], b.recv[r]) << name(c) << " " << what << ": rank " << r << "'s result";
    EXPECT_EQ(a.feedback[r], b.feedback[r]) << name(c) << " " << what << ": rank " << r << "'s residual";
  }
}

std::vector<Case> matrix() {
  std::vector<Case> cases;
  for (int c = 0; c < kNumColls; ++c) {
    const Coll coll = static_cast<Coll>(c);
    const CollInfo& info = collInfo(coll);
    if (info.pointToPoint) continue;
    for (int n : {1, 2, 3, 4, 8}) {
      cases.push_back({coll, cclCodecNone, Algo::kAuto, n});
      if (info.reduction) {
        cases.push_back({coll, cclCodecNone, Algo::kAuto, n, cclBfloat16, cclSum});
        cases.push_back({coll, cclCodecNone, Algo::kAuto, n, cclInt32, cclMax});
        // Its inputs scaled by 1/n first (scaled_average.h).
        cases.push_back({coll, cclCodecNone, Algo::kAuto, n, cclFloat16, cclAvg});
      }
      if (coll == Coll::kAllReduce)
        for (Algo a : {Algo::kRing, Algo::kTree, Algo::kDirect}) cases.push_back({coll, cclCodecNone, a, n});
      if (!info.compressible) continue;
      for (int k = 1; k < cclNumCodecs; ++k) {
        const auto codec = static_cast<cclCodec_t>(k);
        // A low-rank codec compresses allreduce (PowerSGD's plan) and send and receive (below).
        if (codec::isLowRank(codec)) {
          if (coll != Coll::kAllReduce) continue;
          cases.push_back({coll, codec, Algo::kAuto, n});
          cases.push_back({coll, codec, Algo::kAuto, n, cclFloat32, cclAvg, true});
          continue;
        }
        cases.push_back({coll, codec, Algo::kAuto, n});
        if (info.feedback) cases.push_back({coll, codec, Algo::kAuto, n, cclFloat32, cclSum, true});
        if (codec::isQuantizer(codec) && (n == 2 || n == 4))
          cases.push_back({coll, codec, Algo::kAuto, n, cclFloat32, cclSum, info.feedback, 1000, true});
        if (coll == Coll::kAllReduce)
          for (Algo a : {Algo::kRing, Algo::kTwoShot, Algo::kSparse}) cases.push_back({coll, codec, a, n});
      }
    }
  }
  // Hierarchical allreduce over nodes of equal and unequal sizes, uncompressed and with every
  // codec across nodes.
  for (const std::vector<int>& nodes : std::vector<std::vector<int>>{{2, 2}, {3, 1}, {1, 2, 2}, {2, 3}, {4, 4}}) {
    const int n = std::accumulate(nodes.begin(), nodes.end(), 0);
    Case c{Coll::kAllReduce, cclCodecNone, Algo::kHier, n};
    c.nodes = nodes;
    cases.push_back(c);
    c.dtype = cclBfloat16;
    cases.push_back(c);
    c.dtype = cclFloat32;
    c.op = cclAvg;
    cases.push_back(c);
    c.dtype = cclFloat16;
    cases.push_back(c);
    c.dtype = cclFloat32;
    c.op = cclSum;
    for (int k = 1; k < cclNumCodecs; ++k) {
      if (codec::isLowRank(k)) continue;
      c.codec = static_cast<cclCodec_t>(k);
      c.feedback = false;
      cases.push_back(c);
      c.feedback = true;
      cases.push_back(c);
    }
    // Compressed inside the nodes too, with and without a codec across them.
    for (cclCodec_t across : {cclCodecNone, cclCodecInt4}) {
      c.codec = across;
      c.feedback = false;
      c.intraCodec = cclCodecInt8;
      cases.push_back(c);
    }
    c.intraCodec = cclCodecNone;
    // Broadcast, reduce, allgather, reduce-scatter and all-to-all across nodes and inside them.
    for (Coll rooted : {Coll::kBroadcast, Coll::kReduce, Coll::kAllGather, Coll::kReduceScatter, Coll::kAlltoAll}) {
      Case r{rooted, cclCodecNone, Algo::kHier, n};
      r.nodes = nodes;
      cases.push_back(r);
      if (rooted == Coll::kReduce) continue;
      r.codec = cclCodecInt8;
      cases.push_back(r);
      r.feedback = rooted == Coll::kAllGather || rooted == Coll::kReduceScatter;
      cases.push_back(r);
      r.feedback = false;
      r.intraCodec = cclCodecInt4;
      cases.push_back(r);
    }
  }
  return cases;
}

TEST(StreamExecutor, SameBytesAsTheHostExecutorForEveryCollectiveCodecAndAlgorithm) {
  int ran = 0;
  ccltest::Shard shard = ccltest::Shard::fromEnv();
  for (const Case& c : matrix()) {
    if (!plans(c) || !shard.next()) continue;
    SCOPED_TRACE(name(c));
    const size_t fb = feedbackFor(c);
    const uint64_t seed = 3 + static_cast<uint64_t>(ran);
    const World want = runHost(c, fb, seed);
    expectSame(runStreams(c, fb, seed, true), want, c, "exact lengths");
    expectSame(runStreams(c, fb, seed, false), want, c, "streams sent at their bound");
    expectSame(runStreams(c, fb, seed, false, nullptr, true), want, c, "staged through host memory");
    ++ran;
    if (::testing::Test::HasFailure()) break;  // one case's report, not hundreds
  }
  EXPECT_GT(ran, 300 / static_cast<int>(shard.count()));
  std::printf("%d cases\n", ran);
}

// Random-k's values ring with a NaN in one rank's input: the news of it travels in the ring
// as one more fp32 and sets every rank's stream's non-finite flag (codec stages on the
// stream executor as on the host executor), so every rank gets NaN everywhere, the same
// bytes on both executors.
TEST(StreamExecutor, RandKRingCarriesANonFiniteInputAsTheHostExecutorDoes) {
  for (int n : {2, 3, 4})
    for (int bad = 0; bad < n; ++bad) {
      Case c{Coll::kAllReduce, cclCodecRandK, Algo::kRing, n};
      c.count = 5000;
      c.op = bad % 2 ? cclAvg : cclSum;
      c.nanRank = bad;
      SCOPED_TRACE(name(c) + " NaN on rank " + std::to_string(bad));
      const World want = runHost(c, 0, 5);
      for (int r = 0; r < n; ++r) {
        ASSERT_EQ(want.recv[r].size(), c.count * sizeof(float));
        for (size_t i = 0; i < c.count; ++i) {
          float v;
          std::memcpy(&v, &want.recv[r][i * 4], 4);
          ASSERT_TRUE(std::isnan(v)) << "rank " << r << " element " << i;
        }
      }
      expectSame(runStreams(c, 0, 5, true), want, c, "exact lengths");
      expectSame(runStreams(c, 0, 5, false), want, c, "streams sent at their bound");
    }
}

// Point to point: rank 0 sends to rank 1, with every codec (PowerSGD's P and Q included).
TEST(StreamExecutor, SendAndReceiveWithEveryCodec) {
  for (int k = 0; k < cclNumCodecs; ++k) {
    Case c{Coll::kAllReduce, static_cast<cclCodec_t>(k), Algo::kAuto, 2};
    c.count = 4096;  // a 64 x 64 matrix for the low-rank codec
    SCOPED_TRACE(name(c));
    auto planOf = [&](int r) {
      CollArgs a = argsOf(c, r);
      if (k == cclCodecNone) return r == 0 ? planSend(1, 9, a.count * 4) : planRecv(0, 9, a.count * 4);
      return r == 0 ? planCompressedSend(a, 1, 9) : planCompressedRecv(a, 0, 9);
    };
    auto run = [&](bool streams, bool exact) {
      World w = makeWorld(c, 0);
      if (!streams) {
        testing::runPlans(
            2, planOf,
            [&](int r) {
              return testing::RankBuffers{w.send[r].data(), w.recv[r].data(), nullptr};
            },
            5);
        return w;
      }
      const auto fabric = transport::makeFabric(2);
      ccltest::expectNoneThrew(ccltest::runRanks(2, [&](int r) {
        auto plan = std::make_shared<const Plan>(planOf(r));
        auto sched = std::make_shared<const Schedule>(scheduleWaves(planOf, 2, r));
        std::vector<std::byte> scratch(plan->scratchBytes);
        const auto t = transport::createLocalTransport(fabric, r);
        TransportLink link(*t, exact, std::chrono::seconds(20));
        HostKernels kernels;
        HostStream caller, comm;
        executeOnStream(StreamJob{plan, sched, buffersOf(w, r, scratch.data()), 0, 5, nullptr, {}}, link, kernels,
                        caller, comm);
        caller.synchronize();
        std::string message;
        ASSERT_EQ(caller.takeError(&message), cclSuccess) << message;
        comm.synchronize();
      }));
      return w;
    };
    const World want = run(false, false);
    EXPECT_EQ(run(true, true).recv[1], want.recv[1]);
    EXPECT_EQ(run(true, false).recv[1], want.recv[1]);
  }
}

// Byte counts: exact lengths count what the host executor counts; at the bound, more (the
// same for fixed-length streams with no non-finite block); staged through host memory, the
// true lengths again (read from the staged streams' headers).
TEST(StreamExecutor, WireBytesAreTheEncodedLengthsOrTheBound) {
  for (auto [codec, fixed] : {std::pair{cclCodecTopK, false}, std::pair{cclCodecInt4, false},
                              std::pair{cclCodecInt4, true}, std::pair{cclCodecMxfp8E4m3, true}}) {
    SCOPED_TRACE(std::string(cclCodecName(codec)) + (fixed ? " fixed-length" : ""));
    Case c{Coll::kAllReduce, codec, Algo::kAuto, 4};
    c.fixedLength = fixed;
    std::vector<ExecStats> exact, bound, staged;
    runStreams(c, 0, 1, true, &exact);
    runStreams(c, 0, 1, false, &bound);
    runStreams(c, 0, 1, false, &staged, true);
    for (int r = 0; r < c.nranks; ++r) {
      EXPECT_GT(exact[r].wireBytes, 0u);
      EXPECT_LT(exact[r].wireBytes, exact[r].rawBytes) << "the codec sends less than it stands for";
      if (fixed) {
        EXPECT_EQ(bound[r].wireBytes, exact[r].wireBytes);
      } else {
        EXPECT_GT(bound[r].wireBytes, exact[r].wireBytes);
      }
      EXPECT_EQ(bound[r].rawBytes, exact[r].rawBytes);
      EXPECT_EQ(staged[r].wireBytes, exact[r].wireBytes);
      EXPECT_EQ(staged[r].rawBytes, exact[r].rawBytes);
    }
  }
}

// At the bound, quantizers' streams are not smaller than the data (every block may be raw);
// fixed-length ones are, and their bound is exactly what they send; a sparsifier's at a low
// keep ratio is smaller too. What the device paths over NCCL decide by. Prints one rank's
// bytes per call (a 4-rank allreduce of 65,536 floats) for perf/README.md.
TEST(StreamExecutor, PostedBytesAgainstTheData) {
  std::vector<cclCodec_t> codecs = {cclCodecTopK};
  for (int k = 0; k < cclNumCodecs; ++k)
    if (codec::isQuantizer(k)) codecs.push_back(static_cast<cclCodec_t>(k));
  std::printf("%-11s %9s %9s %9s %9s\n", "codec", "data", "bound", "fixed", "sent");
  for (cclCodec_t codec : codecs) {
    SCOPED_TRACE(cclCodecName(codec));
    Case c{Coll::kAllReduce, codec, Algo::kAuto, 4};
    c.count = 65536;
    auto posted = [&](int r) {
      const Plan plan = planCollective(c.coll, argsOf(c, r));
      return postedBytes(plan, scheduleWaves([&](int q) { return planCollective(c.coll, argsOf(c, q)); }, c.nranks, r));
    };
    c.fixedLength = false;
    std::vector<PostedBytes> variable;
    for (int r = 0; r < c.nranks; ++r) variable.push_back(posted(r));
    c.fixedLength = codec::isQuantizer(codec);
    std::vector<ExecStats> exact;
    runStreams(c, 0, 1, true, &exact);
    for (int r = 0; r < c.nranks; ++r) {
      const PostedBytes fixed = posted(r);
      EXPECT_GT(variable[r].raw, 0u);
      EXPECT_EQ(fixed.raw, variable[r].raw);
      if (codec::isQuantizer(codec)) {
        EXPECT_GE(variable[r].posted, variable[r].raw) << "every block may be raw";
        EXPECT_LT(fixed.posted, fixed.raw);
        EXPECT_EQ(fixed.posted, exact[r].wireBytes) << "a fixed-length stream's bound is its length";
      } else {
        EXPECT_LT(variable[r].posted, variable[r].raw);
      }
      if (r == 0)
        std::printf("%-11s %9zu %9zu %9s %9zu\n", cclCodecName(codec), fixed.raw, variable[r].posted,
                    codec::isQuantizer(codec) ? std::to_string(fixed.posted).c_str() : "-",
                    static_cast<size_t>(exact[r].wireBytes));
    }
  }
}

// Both ends of every message post it in the same wave, and a wave lists a pair's messages
// in the same order at both ends, which is what a link matching by order (NCCL) needs.
TEST(StreamExecutor, WavesPairEveryMessageInOrder) {
  for (const Case& c :
       {Case{Coll::kAllReduce, cclCodecInt8, Algo::kTwoShot, 5}, Case{Coll::kBroadcast, cclCodecNone, Algo::kAuto, 6},
        Case{Coll::kAllGather, cclCodecTopK, Algo::kAuto, 4}, Case{Coll::kReduce, cclCodecNone, Algo::kAuto, 7}}) {
    std::vector<Plan> plans;
    std::vector<Schedule> scheds;
    for (int r = 0; r < c.nranks; ++r) {
      plans.push_back(planCollective(c.coll, argsOf(c, r)));
      scheds.push_back(scheduleWaves([&](int q) { return planCollective(c.coll, argsOf(c, q)); }, c.nranks, r));
    }
    for (int a = 0; a < c.nranks; ++a)
      for (int b = 0; b < c.nranks; ++b) {
        // Messages a -> b per wave: a's sends and b's receives, in their waves' order.
        size_t waves = std::max(scheds[a].waves.size(), scheds[b].waves.size());
        for (size_t w = 0; w < waves; ++w) {
          std::vector<uint32_t> sent, received;
          if (w < scheds[a].waves.size())
            for (StepId id : scheds[a].waves[w])
              if (plans[a].steps[id].kind == StepKind::kSend && plans[a].steps[id].peer == b)
                sent.push_back(plans[a].steps[id].tag);
          if (w < scheds[b].waves.size())
            for (StepId id : scheds[b].waves[w])
              if (plans[b].steps[id].kind == StepKind::kRecv && plans[b].steps[id].peer == a)
                received.push_back(plans[b].steps[id].tag);
          EXPECT_EQ(sent, received) << name(c) << ": " << a << " -> " << b << " wave " << w;
        }
      }
  }
}

TEST(StreamExecutor, PlansThatDoNotPairAreRefused) {
  auto unpaired = [](int r) {
    Plan p;
    if (r == 0) p.send(1, 5, Ref{Buf::kSend, 0}, 4);
    return p;
  };
  EXPECT_THROW(scheduleWaves(unpaired, 2, 0), Error);
  // Each rank receives before it sends: the host executor would wait forever too.
  auto cycle = [](int r) {
    Plan p;
    StepId got = p.recv(1 - r, 1, Ref{Buf::kRecv, 0}, 4);
    p.send(1 - r, 1, Ref{Buf::kSend, 0}, 4, {got});
    return p;
  };
  EXPECT_THROW(scheduleWaves(cycle, 2, 0), Error);
}

// The call only enqueues: with the caller's stream held by an earlier step, nothing of the
// collective has run when executeOnStream returns; releasing it lets the call complete.
TEST(StreamExecutor, EnqueuesAndReturnsBeforeRunning) {
  const Case c{Coll::kAllReduce, cclCodecInt4, Algo::kAuto, 2};
  World w = makeWorld(c, 0);
  const auto fabric = transport::makeFabric(2);
  std::atomic<bool> release{false};
  std::atomic<int> checked{0};
  ccltest::expectNoneThrew(ccltest::runRanks(2, [&](int r) {
    auto plan = std::make_shared<const Plan>(planCollective(c.coll, argsOf(c, r)));
    auto sched = std::make_shared<const Schedule>(
        scheduleWaves([&](int q) { return planCollective(c.coll, argsOf(c, q)); }, 2, r));
    std::vector<std::byte> scratch(plan->scratchBytes);
    const auto t = transport::createLocalTransport(fabric, r);
    TransportLink link(*t, true, std::chrono::seconds(20));
    HostKernels kernels;
    HostStream caller, comm;
    caller.enqueue([&] {
      while (!release.load()) std::this_thread::yield();
    });
    const Bytes before = w.recv[r];
    executeOnStream(StreamJob{plan, sched, buffersOf(w, r, scratch.data()), 0, 1, nullptr, {}}, link, kernels, caller,
                    comm);
    const Event end = caller.record();
    EXPECT_FALSE(caller.reached(end));
    EXPECT_EQ(w.recv[r], before) << "nothing was written yet";
    // Both ranks have looked before either stream may go on.
    checked.fetch_add(1);
    if (r == 0) {
      while (checked.load() < 2) std::this_thread::yield();
      release.store(true);
    }
    caller.block(end);
    EXPECT_EQ(caller.takeError(nullptr), cclSuccess);
    EXPECT_NE(w.recv[r], before);
    comm.synchronize();
  }));
}

// Rank 0 of two-rank case c alone (rank 1 exists but calls nothing) over the link
// makeLink(rank 0's transport) makes: the failure its caller's stream ends with.
std::string aloneFails(const Case& c,
                       const std::function<std::unique_ptr<TransportLink>(transport::Transport&)>& makeLink) {
  World w = makeWorld(c, 0);
  const auto fabric = transport::makeFabric(2);
  const auto t0 = transport::createLocalTransport(fabric, 0);
  const auto t1 = transport::createLocalTransport(fabric, 1);
  auto plan = std::make_shared<const Plan>(planCollective(c.coll, argsOf(c, 0)));
  auto sched = std::make_shared<const Schedule>(
      scheduleWaves([&](int q) { return planCollective(c.coll, argsOf(c, q)); }, 2, 0));
  std::vector<std::byte> scratch(plan->scratchBytes);
  const std::unique_ptr<TransportLink> link = makeLink(*t0);
  HostKernels kernels;
  HostStream caller, comm;
  executeOnStream(StreamJob{plan, sched, buffersOf(w, 0, scratch.data()), 0, 1, nullptr, {}}, *link, kernels, caller,
                  comm);
  caller.synchronize();
  std::string message;
  EXPECT_EQ(caller.takeError(&message), cclSystemError);
  EXPECT_NE(message.find("CCL_TIMEOUT"), std::string::npos) << message;
  comm.synchronize();
  return message;
}

// A peer that never takes part: the wave times out, the failure reaches the caller's
// stream with the time-out's message, and the steps after it do nothing.
TEST(StreamExecutor, APeerThatNeverComesFailsTheCallersStream) {
  aloneFails({Coll::kAllReduce, cclCodecNone, Algo::kRing, 2}, [](transport::Transport& t) {
    return std::make_unique<TransportLink>(t, true, std::chrono::milliseconds(300));
  });
}

// The time-out of a staged link says how far its stream and proxy got, and names the threads
// of the process blocked in a call that can wait (common/activity.h): on a GPU, the peer rank
// of the same process stuck in a CUDA call that waits for the device.
TEST(StreamExecutor, AStagedTimeOutNamesTheFlagsAndTheBlockedThreads) {
  std::atomic<bool> release{false}, inside{false};
  std::thread stuck([&] {  // rank 1: inside a call that does not return until the test is done
    ActivityScope outer("enqueuing a device call", 1);
    ActivityScope inner("cudaMallocAsync", 1);
    inside = true;
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  });
  // The time-out names threads blocked for more than a second: the stuck one must be inside
  // its call before the link's clock starts (a loaded machine may start it late), and the
  // time-out is longer than that second by a margin.
  while (!inside.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const std::string message = aloneFails({Coll::kAllReduce, cclCodecInt8, Algo::kRing, 2}, [](transport::Transport& t) {
    return std::make_unique<TransportLink>(t, false, std::chrono::milliseconds(1500), nullptr, hostStaging());
  });
  EXPECT_NE(message.find("[staging flags: the stream staged groups up to ticket "), std::string::npos) << message;
  EXPECT_NE(message.find("rank 1: enqueuing a device call > cudaMallocAsync for "), std::string::npos) << message;
  release = true;
  stuck.join();
  EXPECT_EQ(activitiesLongerThan(0), "");
}

// Staging is bounded in bytes: a 1 GiB all-reduce of 8 ranks, int8 in fixed-length streams
// (as on a device), 1 MiB chunks, two-shot and ring: every group the staged link makes of a
// wave (TransportLink::subWaves) fits one block of the default 256 MiB ring, and both ends of
// every message put it in the same group (else a group would wait for a message its peer
// sends in a later one). Without sub-waves the two-shot's largest wave is one block of 462
// MiB, in a ring of eight: 3.7 GB of pinned memory per rank.
TEST(StreamExecutor, StagedGroupsOfAGibibyteCallOnEightRanksFitTheStagingBound) {
  const size_t block = TransportLink::blockBytes(size_t{256} << 20);
  for (const Algo algo : {Algo::kTwoShot, Algo::kRing}) {
    const int n = 8;
    auto args = [&](int r) {
      CollArgs a;
      a.rank = r;
      a.nranks = n;
      a.count = (size_t{1} << 30) / 4;
      a.chunkBytes = size_t{1} << 20;
      a.algo = algo;
      a.codec = codec::fixLength(codec::defaultParams(cclCodecInt8));
      return a;
    };
    auto planOf = [&](int r) { return planCollective(Coll::kAllReduce, args(r)); };
    // Per rank and wave: each transfer's group, in the order the link posts them.
    struct Posted {
      bool send;
      int peer;
      uint32_t group;
    };
    std::vector<std::vector<std::vector<Posted>>> posted(n);
    size_t largestWave = 0, groups = 0;
    for (int r = 0; r < n; ++r) {
      const Plan plan = planOf(r);
      const Schedule sched = scheduleWaves(planOf, planShifts(Coll::kAllReduce, args(r)), r);
      for (const auto& wave : sched.waves) {
        std::vector<Transfer> xs;
        size_t total = 0;
        for (StepId id : wave) {
          Transfer x;
          x.send = plan.steps[id].kind == StepKind::kSend;
          x.peer = plan.steps[id].peer;
          x.bytes = sched.postedBytes[id];
          total += TransportLink::stagedBytes(x.bytes);
          xs.push_back(x);
        }
        largestWave = std::max(largestWave, total);
        const std::vector<uint32_t> g = TransportLink::subWaves(xs, n, block);
        std::map<uint32_t, size_t> bytes;
        for (size_t i = 0; i < xs.size(); ++i) bytes[g[i]] += TransportLink::stagedBytes(xs[i].bytes);
        for (const auto& [group, b] : bytes) EXPECT_LE(b, block) << algoName(algo) << " rank " << r;
        groups += bytes.size();
        posted[r].emplace_back();
        for (size_t i = 0; i < xs.size(); ++i) posted[r].back().push_back({xs[i].send, xs[i].peer, g[i]});
      }
    }
    // The k-th send of r to p in a wave and the k-th receive of p from r: one group.
    for (int r = 0; r < n; ++r)
      for (size_t w = 0; w < posted[r].size(); ++w)
        for (int p = 0; p < n; ++p) {
          std::vector<uint32_t> sends, recvs;
          for (const Posted& x : posted[r][w])
            if (x.send && x.peer == p) sends.push_back(x.group);
          for (const Posted& x : posted[p][w])
            if (!x.send && x.peer == r) recvs.push_back(x.group);
          EXPECT_EQ(sends, recvs) << algoName(algo) << " wave " << w << " from " << r << " to " << p;
        }
    std::printf("%s: largest wave %zu MiB, %zu groups of at most %zu MiB\n", algoName(algo), largestWave >> 20, groups,
                block >> 20);
  }
}

}  // namespace
}  // namespace ccl::coll
