// SPDX-License-Identifier: BSD-3-Clause
// CCL_CODEC=auto through the API: on a link model slower than this CPU's codecs a large
// allreduce goes compressed with an allowed codec and a small one exact; on a fast model
// every call stays exact; without CCL_LINK_MODEL the links are probed, each level by pairs
// of its own; a bad one is refused at init on every rank; a codec passed to an *Ex call
// still wins; the choices are counted. CCL_LINK_MODEL alone (CCL_ALGO=auto, no CCL_CODEC=auto)
// makes the model choose algorithms only.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "ccl/ccl.h"
#include "rank_threads.h"
#include "scoped_env.h"

namespace {

using ccltest::expectNoneThrew;
using ccltest::runRanks;
using ccltest::ScopedEnv;

// Makes n communicators (one thread each) under the environment of the caller, runs `body`
// on each, and destroys them. Returns each rank's init result.
template <class Body>
std::vector<cclResult_t> withComms(int n, Body body) {
  cclUniqueId id{};
  EXPECT_EQ(cclGetUniqueId(&id), cclSuccess);
  std::vector<cclResult_t> init(static_cast<size_t>(n), cclSuccess);
  expectNoneThrew(runRanks(n, [&](int r) {
    cclComm_t comm = nullptr;
    init[static_cast<size_t>(r)] = cclCommInitRank(&comm, n, id, r);
    if (init[static_cast<size_t>(r)] != cclSuccess) return;
    body(r, comm);
    EXPECT_EQ(cclCommDestroy(comm), cclSuccess);
  }));
  return init;
}

cclOpStats_t allReduceStats(cclComm_t comm, size_t count) {
  std::vector<float> x(count), y(count);
  for (size_t i = 0; i < count; ++i) x[i] = std::sin(0.001f * static_cast<float>(i));
  EXPECT_EQ(cclAllReduce(x.data(), y.data(), count, cclFloat32, cclSum, comm, nullptr), cclSuccess);
  cclStats_t s = CCL_STATS_INITIALIZER;
  EXPECT_EQ(cclCommGetStats(comm, &s), cclSuccess);
  return s.op[cclOpAllReduce];
}

TEST(AutoCodec, CompressesWhatTheModelSaysPaysWithAnAllowedCodecOnly) {
  ScopedEnv codec("CCL_CODEC", "auto:int8");
  // 1 Mbit/s: slower than any CPU's codecs, sanitized builds' included, so the choice does
  // not depend on this machine's speed (the model's inputs are timed at init).
  ScopedEnv link("CCL_LINK_MODEL", "50:0.000125");
  ScopedEnv min("CCL_CODEC_MIN_BYTES", "0");
  withComms(3, [](int, cclComm_t comm) {
    const cclOpStats_t small = allReduceStats(comm, 4);
    EXPECT_EQ(small.compressedCalls, 0u) << "16 bytes: latency, whatever the codec";
    const cclOpStats_t big = allReduceStats(comm, 1 << 20);
    EXPECT_EQ(big.compressedCalls, 1u) << "4 MiB at 1 Mbit/s: int8 moves a quarter of the bytes";
    EXPECT_LT(big.wireBytes - small.wireBytes, (big.rawBytes - small.rawBytes) / 3);
    cclStats_t s = CCL_STATS_INITIALIZER;
    ASSERT_EQ(cclCommGetStats(comm, &s), cclSuccess);
    EXPECT_EQ(s.autoChosen[cclOpAllReduce], 2u) << "both calls were the cost model's choice";
    EXPECT_EQ(s.autoCompressed[cclOpAllReduce], 1u);
    EXPECT_EQ(s.autoChosen[cclOpBroadcast], 0u);
  });
}

TEST(AutoCodec, AFastLinkKeepsEveryCallExact) {
  ScopedEnv codec("CCL_CODEC", "auto:int8,int4");
  ScopedEnv link("CCL_LINK_MODEL", "0.5:1000");  // far faster than any codec on a CPU
  withComms(2, [](int, cclComm_t comm) { EXPECT_EQ(allReduceStats(comm, 1 << 20).compressedCalls, 0u); });
}

TEST(AutoCodec, WithoutLossyCodecsOnlyTheAlgorithmIsChosen) {
  ScopedEnv codec("CCL_CODEC", "auto");
  ScopedEnv link("CCL_LINK_MODEL", "50:0.125");
  withComms(3, [](int r, cclComm_t comm) {
    std::vector<float> x(100000, 1.0f + r), y(100000);
    ASSERT_EQ(cclAllReduce(x.data(), y.data(), x.size(), cclFloat32, cclSum, comm, nullptr), cclSuccess);
    for (float v : y) ASSERT_EQ(v, 6.0f);
    cclStats_t s = CCL_STATS_INITIALIZER;
    ASSERT_EQ(cclCommGetStats(comm, &s), cclSuccess);
    EXPECT_EQ(s.op[cclOpAllReduce].compressedCalls, 0u);
  });
}

TEST(AutoCodec, ACodecPassedToACallWins) {
  ScopedEnv codec("CCL_CODEC", "auto:int8");
  ScopedEnv link("CCL_LINK_MODEL", "0.5:1000");
  withComms(2, [](int, cclComm_t comm) {
    std::vector<float> x(1 << 16, 1.0f), y(1 << 16);
    cclCompression_t z = CCL_COMPRESSION_INITIALIZER;
    z.codec = cclCodecInt4;
    ASSERT_EQ(cclAllReduceEx(x.data(), y.data(), x.size(), cclFloat32, cclSum, comm, nullptr, &z, nullptr), cclSuccess);
    cclStats_t s = CCL_STATS_INITIALIZER;
    ASSERT_EQ(cclCommGetStats(comm, &s), cclSuccess);
    EXPECT_EQ(s.op[cclOpAllReduce].compressedCalls, 1u);
    EXPECT_EQ(s.autoChosen[cclOpAllReduce], 0u) << "the call's codec, not the model's";
    // A caller built before the choice counters: nothing is written past its size.
    cclStats_t old = CCL_STATS_INITIALIZER;
    old.size = offsetof(cclStats_t, autoChosen);
    old.autoChosen[cclOpAllReduce] = 77;
    ASSERT_EQ(cclCommGetStats(comm, &old), cclSuccess);
    EXPECT_EQ(old.op[cclOpAllReduce].calls, 1u);
    EXPECT_EQ(old.autoChosen[cclOpAllReduce], 77u);
  });
}

// Without CCL_LINK_MODEL the links are probed at init with the communicator's own calls,
// which leave no trace in its counters; the calls after it run, exact or within the codec's
// bound whatever was chosen.
TEST(AutoCodec, WithoutALinkModelTheLinksAreProbed) {
  ScopedEnv codec("CCL_CODEC", "auto:int8");
  ScopedEnv link("CCL_LINK_MODEL", nullptr);
  ScopedEnv min("CCL_CODEC_MIN_BYTES", "0");
  const std::vector<cclResult_t> init = withComms(3, [](int r, cclComm_t comm) {
    cclStats_t s = CCL_STATS_INITIALIZER;
    ASSERT_EQ(cclCommGetStats(comm, &s), cclSuccess);
    EXPECT_EQ(s.op[cclOpAllReduce].calls, 0u) << "the probe's calls are not the caller's";
    std::vector<float> x(1 << 16, 0.25f * static_cast<float>(r + 1)), y(x.size());
    ASSERT_EQ(cclAllReduce(x.data(), y.data(), x.size(), cclFloat32, cclSum, comm, nullptr), cclSuccess);
    for (float v : y) ASSERT_NEAR(v, 1.5f, 0.02f);
    ASSERT_EQ(cclCommGetStats(comm, &s), cclSuccess);
    EXPECT_EQ(s.autoChosen[cclOpAllReduce], 1u);
    EXPECT_EQ(s.autoCompressed[cclOpAllReduce], s.op[cclOpAllReduce].compressedCalls);
  });
  for (cclResult_t r : init) EXPECT_EQ(r, cclSuccess);
}

// Two nodes of two ranks: each level is probed by pairs of its own (inside: ranks of a node;
// across: the same local rank of the two nodes), with sends and receives that, like the
// probe's allreduces, leave no trace in the counters; the calls after it run.
TEST(AutoCodec, OnTwoNodesEachLevelIsProbedByItsOwnPairs) {
  ScopedEnv codec("CCL_CODEC", "auto:int8");
  ScopedEnv link("CCL_LINK_MODEL", nullptr);
  cclUniqueId id{};
  ASSERT_EQ(cclGetUniqueId(&id), cclSuccess);
  expectNoneThrew(runRanks(4, [&](int r) {
    cclConfig_t config = CCL_CONFIG_INITIALIZER;
    const std::string host = "node" + std::to_string(r / 2);
    config.hostId = host.c_str();
    cclComm_t comm = nullptr;
    ASSERT_EQ(cclCommInitRankConfig(&comm, 4, id, r, &config), cclSuccess);
    cclStats_t s = CCL_STATS_INITIALIZER;
    ASSERT_EQ(cclCommGetStats(comm, &s), cclSuccess);
    EXPECT_EQ(s.op[cclOpSend].calls + s.op[cclOpRecv].calls + s.op[cclOpAllReduce].calls, 0u);
    std::vector<float> x(1 << 16, 0.25f * static_cast<float>(r + 1)), y(x.size());
    ASSERT_EQ(cclAllReduce(x.data(), y.data(), x.size(), cclFloat32, cclSum, comm, nullptr), cclSuccess);
    for (float v : y) ASSERT_NEAR(v, 2.5f, 0.03f);
    EXPECT_EQ(cclCommDestroy(comm), cclSuccess);
  }));
}

// CCL_ALGO=auto under a cost model and no CCL_CODEC=auto: the algorithm by cost, the codec
// left alone. The bytes a rank sends tell the algorithm at 4 ranks: the ring sends 1.5 times
// the buffer, recursive doubling 2 times, one round to every rank 3 times.
size_t allReduceSentBytes(int r, cclComm_t comm, size_t count) {
  std::vector<float> x(count, 1.0f + static_cast<float>(r)), y(count);
  cclStats_t before = CCL_STATS_INITIALIZER, after = CCL_STATS_INITIALIZER;
  EXPECT_EQ(cclCommGetStats(comm, &before), cclSuccess);
  EXPECT_EQ(cclAllReduce(x.data(), y.data(), count, cclFloat32, cclSum, comm, nullptr), cclSuccess);
  for (float v : y) EXPECT_EQ(v, 10.0f);
  EXPECT_EQ(cclCommGetStats(comm, &after), cclSuccess);
  EXPECT_EQ(after.op[cclOpAllReduce].compressedCalls, before.op[cclOpAllReduce].compressedCalls);
  return after.op[cclOpAllReduce].wireBytes - before.op[cclOpAllReduce].wireBytes;
}

TEST(AutoAlgorithm, ALinkModelAloneChoosesTheAlgorithmByCost) {
  ScopedEnv codec("CCL_CODEC", "none");
  {
    // 100 ms a message, 1 TB/s: the fewest rounds win where the size rule takes the ring,
    // however slow this build's kernels (a sanitizer's reduce of 1 MiB takes milliseconds).
    ScopedEnv link("CCL_LINK_MODEL", "100000:1000");
    withComms(4, [](int r, cclComm_t comm) {
      const size_t count = 64 << 10;  // 256 KiB, past CCL_TREE_MAX_BYTES
      EXPECT_EQ(allReduceSentBytes(r, comm, count), 3 * count * sizeof(float)) << "one round to every rank";
      cclStats_t s = CCL_STATS_INITIALIZER;
      ASSERT_EQ(cclCommGetStats(comm, &s), cclSuccess);
      EXPECT_EQ(s.autoChosen[cclOpAllReduce], 1u);
      EXPECT_EQ(s.autoCompressed[cclOpAllReduce], 0u) << "no lossy codec was allowed";
    });
  }
  {
    // No latency, 1 kB/s: the fewest bytes win where the size rule sends to every rank.
    ScopedEnv link("CCL_LINK_MODEL", "0:0.000001");
    withComms(4, [](int r, cclComm_t comm) {
      const size_t count = 128;  // 512 bytes, under CCL_DIRECT_MAX_BYTES
      EXPECT_EQ(allReduceSentBytes(r, comm, count), 3 * count * sizeof(float) / 2) << "the ring";
    });
  }
  {
    // Links probed at init: the model chooses, whatever it finds.
    ScopedEnv link("CCL_LINK_MODEL", "probe");
    withComms(4, [](int r, cclComm_t comm) {
      allReduceSentBytes(r, comm, 4096);
      cclStats_t s = CCL_STATS_INITIALIZER;
      ASSERT_EQ(cclCommGetStats(comm, &s), cclSuccess);
      EXPECT_EQ(s.autoChosen[cclOpAllReduce], 1u);
    });
  }
  // Without a model: the size rules.
  ScopedEnv link("CCL_LINK_MODEL", nullptr);
  withComms(4, [](int r, cclComm_t comm) {
    EXPECT_EQ(allReduceSentBytes(r, comm, 128), 3 * 128 * sizeof(float)) << "one round to every rank";
    cclStats_t s = CCL_STATS_INITIALIZER;
    ASSERT_EQ(cclCommGetStats(comm, &s), cclSuccess);
    EXPECT_EQ(s.autoChosen[cclOpAllReduce], 0u);
  });
}

// The probe at init runs plans of its own through the executor, not public calls: a
// communicator made inside a group (as NCCL allows, one per device) is probed as one made
// outside, and its probe counts in no statistics.
TEST(AutoAlgorithm, LinksAreProbedForACommunicatorMadeInsideAGroup) {
  ScopedEnv link("CCL_LINK_MODEL", "probe");
  cclUniqueId id{};
  ASSERT_EQ(cclGetUniqueId(&id), cclSuccess);
  expectNoneThrew(runRanks(4, [&](int r) {
    cclComm_t comm = nullptr;
    ASSERT_EQ(cclGroupStart(), cclSuccess);
    const cclResult_t init = cclCommInitRank(&comm, 4, id, r);
    ASSERT_EQ(cclGroupEnd(), cclSuccess);
    ASSERT_EQ(init, cclSuccess) << cclGetLastError(nullptr);
    cclStats_t s = CCL_STATS_INITIALIZER;
    ASSERT_EQ(cclCommGetStats(comm, &s), cclSuccess);
    EXPECT_EQ(s.op[cclOpSend].calls + s.op[cclOpRecv].calls + s.op[cclOpAllReduce].calls, 0u);
    std::vector<float> x(4096, static_cast<float>(r + 1)), y(x.size());
    ASSERT_EQ(cclAllReduce(x.data(), y.data(), x.size(), cclFloat32, cclSum, comm, nullptr), cclSuccess);
    for (float v : y) ASSERT_EQ(v, 10.0f);
    ASSERT_EQ(cclCommGetStats(comm, &s), cclSuccess);
    EXPECT_EQ(s.autoChosen[cclOpAllReduce], 1u) << "the probed model chose";
    EXPECT_EQ(cclCommDestroy(comm), cclSuccess);
  }));
}

TEST(AutoAlgorithm, ANamedAlgorithmOrAnUntimedCodecKeepsTheRules) {
  ScopedEnv link("CCL_LINK_MODEL", "1000:1000");
  {
    ScopedEnv algo("CCL_ALGO", "ring");
    withComms(4, [](int r, cclComm_t comm) {
      EXPECT_EQ(allReduceSentBytes(r, comm, 64 << 10), 3 * (64u << 10) * sizeof(float) / 2);
      cclStats_t s = CCL_STATS_INITIALIZER;
      ASSERT_EQ(cclCommGetStats(comm, &s), cclSuccess);
      EXPECT_EQ(s.autoChosen[cclOpAllReduce], 0u) << "CCL_ALGO named the ring";
    });
  }
  // A codec passed to one call whose kernels the model did not time at init: its algorithm
  // by the size rules, not priced as if encoding were free.
  withComms(2, [](int, cclComm_t comm) {
    std::vector<float> x(1 << 16, 1.0f), y(1 << 16);
    cclCompression_t z = CCL_COMPRESSION_INITIALIZER;
    z.codec = cclCodecInt4;
    ASSERT_EQ(cclAllReduceEx(x.data(), y.data(), x.size(), cclFloat32, cclSum, comm, nullptr, &z, nullptr), cclSuccess);
    for (float v : y) ASSERT_NEAR(v, 2.0f, 0.2f);
    cclStats_t s = CCL_STATS_INITIALIZER;
    ASSERT_EQ(cclCommGetStats(comm, &s), cclSuccess);
    EXPECT_EQ(s.op[cclOpAllReduce].compressedCalls, 1u);
    EXPECT_EQ(s.autoChosen[cclOpAllReduce], 0u);
  });
}

TEST(AutoCodec, ABadLinkModelIsRefusedOnEveryRank) {
  ScopedEnv codec("CCL_CODEC", "auto:int8");
  for (const char* bad : {"fast", "10", "10:0", "across=1:1,over=2:2"}) {
    ScopedEnv link("CCL_LINK_MODEL", bad);
    const std::vector<cclResult_t> got = withComms(2, [](int, cclComm_t) {});
    for (cclResult_t r : got) EXPECT_EQ(r, cclInvalidArgument) << bad;
  }
  ScopedEnv lossless("CCL_CODEC", "auto:powersgd");
  ScopedEnv link("CCL_LINK_MODEL", "1:1");
  for (cclResult_t r : withComms(2, [](int, cclComm_t) {})) EXPECT_EQ(r, cclInvalidArgument) << "powersgd";
}

}  // namespace
