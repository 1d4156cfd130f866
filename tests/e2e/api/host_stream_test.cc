// SPDX-License-Identifier: BSD-3-Clause
// Host streams (cclHostStreamCreate): a call given one returns before it has run (its peer
// may not even have called yet), runs in order on the stream, gives the same bytes as the
// call on stream NULL for every collective and codec, keeps one communicator's operations in
// issue order across streams, and reports a failure through cclHostStreamSynchronize,
// cclCommGetAsyncError and the communicator's next call. Abort and destroy handle queued work.
#include <gtest/gtest.h>

#include <cmath>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "device_match.h"
#include "scoped_env.h"
#include "world.h"

namespace ccltest {
namespace {

struct Stream {
  Stream() { EXPECT_CCL_OK(cclHostStreamCreate(&s)); }
  ~Stream() { EXPECT_CCL_OK(cclHostStreamDestroy(s)); }
  cclStream_t s = nullptr;
};

TEST(HostStreams, ACallReturnsBeforeItsPeerHasCalled) {
  World& w = World::get(2);
  std::atomic<bool> issued{false};
  w.run([&](int rank, cclComm_t comm) {
    const size_t n = 4096;
    std::vector<float> in(n, float(rank + 1)), out(n, -1.f);
    if (rank == 0) {
      Stream s;
      ASSERT_CCL_OK(cclAllReduce(in.data(), out.data(), n, cclFloat32, cclSum, comm, s.s));
      EXPECT_EQ(cclHostStreamQuery(s.s), cclInProgress) << "the allreduce completed without its peer";
      issued.store(true);  // only now does rank 1 call: a blocking call would never return
      ASSERT_CCL_OK(cclHostStreamSynchronize(s.s));
      EXPECT_EQ(cclHostStreamQuery(s.s), cclSuccess);
    } else {
      while (!issued.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      ASSERT_CCL_OK(cclAllReduce(in.data(), out.data(), n, cclFloat32, cclSum, comm, nullptr));
    }
    for (float v : out) ASSERT_EQ(v, 3.f);
  });
}

// One collective, issued with `stream`, writing what each rank must compare into `out`.
using Issue = std::function<void(int rank, int n, cclComm_t comm, cclStream_t stream, const cclCompression_t* z,
                                 std::vector<char>& out)>;

struct Case {
  const char* name;
  Issue issue;
};

std::vector<Case> cases(size_t count) {
  auto f = [](std::vector<char>& bytes, size_t floats) -> float* {
    bytes.assign(floats * sizeof(float), 0);
    return reinterpret_cast<float*>(bytes.data());
  };
  auto in = [count](int rank, size_t mult = 1) { return inputOf(rank, count * mult, 7); };
  return {
      {"allreduce",
       [=](int r, int, cclComm_t c, cclStream_t s, const cclCompression_t* z, std::vector<char>& o) {
         static thread_local std::vector<float> x;
         x = in(r);
         ASSERT_CCL_OK(cclAllReduceEx(x.data(), f(o, count), count, cclFloat32, cclSum, c, s, z, nullptr));
       }},
      {"reducescatter",
       [=](int r, int n, cclComm_t c, cclStream_t s, const cclCompression_t* z, std::vector<char>& o) {
         static thread_local std::vector<float> x;
         x = in(r, n);
         ASSERT_CCL_OK(cclReduceScatterEx(x.data(), f(o, count), count, cclFloat32, cclSum, c, s, z, nullptr));
       }},
      {"allgather",
       [=](int r, int n, cclComm_t c, cclStream_t s, const cclCompression_t* z, std::vector<char>& o) {
         static thread_local std::vector<float> x;
         x = in(r);
         ASSERT_CCL_OK(cclAllGatherEx(x.data(), f(o, count * n), count, cclFloat32, c, s, z, nullptr));
       }},
      {"broadcast",
       [=](int r, int n, cclComm_t c, cclStream_t s, const cclCompression_t* z, std::vector<char>& o) {
         static thread_local std::vector<float> x;
         x = in(r);
         ASSERT_CCL_OK(cclBroadcastEx(x.data(), f(o, count), count, cclFloat32, n - 1, c, s, z));
       }},
      {"alltoall",
       [=](int r, int n, cclComm_t c, cclStream_t s, const cclCompression_t* z, std::vector<char>& o) {
         static thread_local std::vector<float> x;
         x = in(r, n);
         ASSERT_CCL_OK(cclAlltoAllEx(x.data(), f(o, count * n), count, cclFloat32, c, s, z));
       }},
      {"reduce",
       [=](int r, int, cclComm_t c, cclStream_t s, const cclCompression_t*, std::vector<char>& o) {
         static thread_local std::vector<float> x;
         x = in(r);
         ASSERT_CCL_OK(cclReduce(x.data(), f(o, count), count, cclFloat32, cclMax, 0, c, s));
       }},
      {"gather",
       [=](int r, int n, cclComm_t c, cclStream_t s, const cclCompression_t*, std::vector<char>& o) {
         static thread_local std::vector<float> x;
         x = in(r);
         ASSERT_CCL_OK(cclGather(x.data(), f(o, count * n), count, cclFloat32, 0, c, s));
       }},
      {"scatter",
       [=](int r, int n, cclComm_t c, cclStream_t s, const cclCompression_t*, std::vector<char>& o) {
         static thread_local std::vector<float> x;
         x = in(r, n);
         ASSERT_CCL_OK(cclScatter(x.data(), f(o, count), count, cclFloat32, n - 1, c, s));
       }},
      {"sendrecv ring",
       [=](int r, int n, cclComm_t c, cclStream_t s, const cclCompression_t* z, std::vector<char>& o) {
         static thread_local std::vector<float> x;
         x = in(r);
         ASSERT_CCL_OK(cclGroupStart());
         EXPECT_CCL_OK(cclSendEx(x.data(), count, cclFloat32, (r + 1) % n, c, s, z, nullptr));
         EXPECT_CCL_OK(cclRecvEx(f(o, count), count, cclFloat32, (r + n - 1) % n, c, s, z));
         ASSERT_CCL_OK(cclGroupEnd());
       }},
  };
}

// Every collective and codec through a host stream gives, byte for byte, what the same call
// gives on stream NULL; on a stream the calls are all enqueued first, then synchronised.
TEST(HostStreams, EveryCollectiveAndCodecMatchesStreamNullByteForByte) {
  const size_t count = 20000;  // 80 KB: above CCL_CODEC_MIN_BYTES, so the codecs apply
  std::vector<cclCompression_t> codecs;
  for (cclCodec_t k : {cclCodecNone, cclCodecInt8, cclCodecInt4, cclCodecFp8E4m3, cclCodecTopK}) {
    cclCompression_t z = CCL_COMPRESSION_INITIALIZER;
    z.codec = k;
    codecs.push_back(z);
  }
  for (int n : {1, 2, 3, 5, 8}) {
    const std::vector<Case> all = cases(count);
    World& w = World::get(n);
    w.run([&](int rank, cclComm_t comm) {
      for (const Case& c : all) {
        for (const cclCompression_t& z : codecs) {
          if (n == 1 && std::string(c.name) == "sendrecv ring") continue;  // a rank cannot send itself here
          std::vector<char> now, queued;
          c.issue(rank, n, comm, nullptr, &z, now);
          Stream s;
          c.issue(rank, n, comm, s.s, &z, queued);
          ASSERT_CCL_OK(cclHostStreamSynchronize(s.s));
          const bool rootOnly = std::string(c.name) == "reduce" || std::string(c.name) == "gather";
          if (rootOnly && rank != 0) continue;
          ASSERT_EQ(now.size(), queued.size());
          ASSERT_EQ(std::memcmp(now.data(), queued.data(), now.size()), 0)
              << c.name << " with " << cclCodecName(z.codec) << " on " << n << " ranks, rank " << rank;
        }
      }
    });
  }
}

// PowerSGD's allreduce is a plan too: on a host stream it gives stream NULL's bits.
TEST(HostStreams, PowerSgdAllReduceMatchesStreamNull) {
  const size_t count = 64 * 48;
  World::get(3).run([&](int rank, cclComm_t comm) {
    cclCompression_t z = CCL_COMPRESSION_INITIALIZER;
    z.codec = cclCodecPowerSgd;
    z.rank = 3;
    std::vector<float> x(count), now(count), queued(count);
    for (size_t i = 0; i < count; ++i) x[i] = std::sin(0.01f * static_cast<float>(i * (rank + 1)));
    ASSERT_CCL_OK(cclAllReduceEx(x.data(), now.data(), count, cclFloat32, cclAvg, comm, nullptr, &z, nullptr));
    Stream s;
    ASSERT_CCL_OK(cclAllReduceEx(x.data(), queued.data(), count, cclFloat32, cclAvg, comm, s.s, &z, nullptr));
    ASSERT_CCL_OK(cclHostStreamSynchronize(s.s));
    EXPECT_EQ(now, queued);
    EXPECT_NE(now, x) << "a low-rank result, not the input";
  });
}

TEST(HostStreams, ManyCallsQueuedBackToBackRunInOrder) {
  World& w = World::get(3);
  w.run([&](int rank, cclComm_t comm) {
    Stream s;
    const int calls = 40;
    std::vector<std::vector<int32_t>> out(calls, std::vector<int32_t>(257));
    std::vector<std::vector<int32_t>> in(calls);
    for (int i = 0; i < calls; ++i) {
      in[i].assign(257, rank * 1000 + i);
      ASSERT_CCL_OK(cclAllReduce(in[i].data(), out[i].data(), 257, cclInt32, cclSum, comm, s.s));
    }
    ASSERT_CCL_OK(cclHostStreamSynchronize(s.s));
    for (int i = 0; i < calls; ++i) EXPECT_EQ(out[i][0], 3000 + 3 * i) << "call " << i;
  });
}

TEST(HostStreams, OneCommunicatorKeepsIssueOrderAcrossStreams) {
  World& w = World::get(2);
  w.run([&](int rank, cclComm_t comm) {
    Stream a, b;
    const size_t n = 100000;  // large enough to take a while
    std::vector<float> x(n, 1.f), y(n, 2.f), z(n, 3.f), ox(n), oy(n), oz(n);
    // Rank 1 issues later, so a rank that ran its calls out of order would pair them wrongly.
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_CCL_OK(cclAllReduce(x.data(), ox.data(), n, cclFloat32, cclSum, comm, a.s));
    ASSERT_CCL_OK(cclAllReduce(y.data(), oy.data(), n, cclFloat32, cclSum, comm, nullptr));
    EXPECT_EQ(ox[n - 1], 2.f) << "a call on stream NULL returned before the one queued earlier had run";
    ASSERT_CCL_OK(cclAllReduce(z.data(), oz.data(), n, cclFloat32, cclMax, comm, b.s));
    ASSERT_CCL_OK(cclHostStreamSynchronize(b.s));
    ASSERT_CCL_OK(cclHostStreamSynchronize(a.s));
    EXPECT_EQ(ox[n - 1], 2.f);
    EXPECT_EQ(oy[n - 1], 4.f);
    EXPECT_EQ(oz[n - 1], 3.f);
  });
}

TEST(HostStreams, AGroupRunsOnOneStream) {
  World& w = World::get(2);
  w.run([&](int rank, cclComm_t comm) {
    Stream a, b;
    int32_t mine = rank + 10, theirs = -1;
    const int peer = 1 - rank;
    ASSERT_CCL_OK(cclGroupStart());
    EXPECT_CCL_OK(cclSend(&mine, 1, cclInt32, peer, comm, a.s));
    EXPECT_CCL_OK(cclRecv(&theirs, 1, cclInt32, peer, comm, a.s));
    ASSERT_CCL_OK(cclGroupEnd());
    ASSERT_CCL_OK(cclHostStreamSynchronize(a.s));
    EXPECT_EQ(theirs, peer + 10);
    // Two streams in one group: refused at cclGroupEnd, nothing runs, the communicator works.
    ASSERT_CCL_OK(cclGroupStart());
    EXPECT_CCL_OK(cclSend(&mine, 1, cclInt32, peer, comm, a.s));
    EXPECT_CCL_OK(cclRecv(&theirs, 1, cclInt32, peer, comm, b.s));
    EXPECT_EQ(cclGroupEnd(), cclInvalidUsage);
    EXPECT_NE(std::string(cclGetLastError(nullptr)).find("one stream"), std::string::npos);
    int32_t in = 1, out = 0;
    ASSERT_CCL_OK(cclAllReduce(&in, &out, 1, cclInt32, cclSum, comm, nullptr));
    EXPECT_EQ(out, 2);
  });
}

TEST(HostStreams, AFailedQueuedCallIsReportedEverywhere) {
  cclConfig_t config = CCL_CONFIG_INITIALIZER;
  config.timeoutMs = 1000;  // the lone allreduce below fails at this deadline
  World w(2, &config);
  ASSERT_TRUE(w.ready());
  w.run([&](int rank, cclComm_t comm) {
    if (rank == 1) return;  // never joins
    Stream s;
    std::vector<float> x(1000, 1.f);
    ASSERT_CCL_OK(cclAllReduce(x.data(), x.data(), x.size(), cclFloat32, cclSum, comm, s.s));
    const cclResult_t r = cclHostStreamSynchronize(s.s);
    EXPECT_NE(r, cclSuccess) << "an allreduce that no peer joined succeeded";
    EXPECT_NE(std::string(cclGetLastError(nullptr)).find("operation on the stream failed"), std::string::npos)
        << cclGetLastError(nullptr);
    cclResult_t async = cclSuccess;
    ASSERT_CCL_OK(cclCommGetAsyncError(comm, &async));
    EXPECT_EQ(async, r);
    EXPECT_EQ(cclHostStreamSynchronize(s.s), cclSuccess) << "the failure is reported once per stream";
    EXPECT_EQ(cclAllReduce(x.data(), x.data(), x.size(), cclFloat32, cclSum, comm, nullptr), r)
        << "the communicator takes no more work after a failure";
  });
}

TEST(HostStreams, AbortFailsQueuedCallsPromptly) {
  ScopedEnv timeout("CCL_TIMEOUT", "60");
  World w(2);
  ASSERT_TRUE(w.ready());
  w.run([&](int rank, cclComm_t comm) {
    if (rank == 1) return;  // never joins: without the abort, the calls would wait 60 s
    Stream s;
    std::vector<float> x(1000, 1.f);
    for (int i = 0; i < 3; ++i)
      ASSERT_CCL_OK(cclAllReduce(x.data(), x.data(), x.size(), cclFloat32, cclSum, comm, s.s));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const auto start = std::chrono::steady_clock::now();
    ASSERT_CCL_OK(cclCommAbort(comm));
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(took, 30.0) << "cclCommAbort waited for the queued calls' deadline";
    EXPECT_NE(cclHostStreamSynchronize(s.s), cclSuccess);
  });
  w.forgetComm(0);
}

TEST(HostStreams, DestroyRunsQueuedCallsFirst) {
  World w(2);
  ASSERT_TRUE(w.ready());
  w.run([&](int rank, cclComm_t comm) {
    Stream s;
    std::vector<int64_t> x(5000, rank + 1), y(5000, 0);
    ASSERT_CCL_OK(cclAllReduce(x.data(), y.data(), x.size(), cclInt64, cclSum, comm, s.s));
    ASSERT_CCL_OK(cclCommDestroy(comm));
    EXPECT_EQ(y[4999], 3) << "destroy returned before the queued call ran";
    EXPECT_CCL_OK(cclHostStreamSynchronize(s.s));
  });
  w.forgetComm(0);
  w.forgetComm(1);
}

TEST(HostStreams, BadHandlesAndUnsupportedUsesAreErrors) {
  EXPECT_EQ(cclHostStreamCreate(nullptr), cclInvalidArgument);
  EXPECT_EQ(cclHostStreamDestroy(nullptr), cclSuccess);
  int notAStream = 0;
  cclStream_t bogus = reinterpret_cast<cclStream_t>(&notAStream);
  EXPECT_EQ(cclHostStreamSynchronize(bogus), cclInvalidArgument);
  EXPECT_EQ(cclHostStreamQuery(bogus), cclInvalidArgument);
  EXPECT_EQ(cclHostStreamDestroy(bogus), cclInvalidArgument);
  EXPECT_EQ(cclHostStreamSynchronize(nullptr), cclInvalidArgument);
  World& w = World::get(2);
  w.run([&](int, cclComm_t comm) {
    float x[64] = {};
    EXPECT_EQ(cclAllReduce(x, x, 64, cclFloat32, cclSum, comm, bogus), cclInvalidUsage)
        << "a stream ccl did not make is a CUDA stream, which a host communicator refuses";
    EXPECT_CCL_OK(cclAllReduce(x, x, 64, cclFloat32, cclSum, comm, nullptr));
  });
}

}  // namespace
}  // namespace ccltest
