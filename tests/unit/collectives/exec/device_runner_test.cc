// SPDX-License-Identifier: BSD-3-Clause
// coll::DeviceRunner, which the api's device path and the NCCL face's compressed runner both
// run their calls with, on the simulated device. Planned for a link that posts every stream
// at its bound (as NCCL does), quantizers get fixed-length streams and are not declined, and a
// codec whose bound is still not below the data is. Over the staged link, a fixed-length
// error-feedback allreduce of three calls, alternating between two caller streams, leaves
// the host executor's results and residuals. A residual restarts when its size or operation
// changes. (An at-bound link over the local transport exchanges inside a host function,
// which the simulated device runs on one thread for all ranks, as CUDA does: ranks of one
// process would wait for each other there, so it is planned with here, not run.)
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "collectives/algorithms/algorithms.h"
#include "collectives/exec/device_runner.h"
#include "collectives/exec/links/transport_link.h"
#include "plan_runner.h"
#include "rank_threads.h"
#include "sim_device.h"
#include "transport/transport.h"

namespace ccltest {
namespace {

using namespace ccl;

coll::CollArgs allreduceArgs(cclCodec_t codec, int nranks, size_t count) {
  coll::CollArgs a;
  a.nranks = nranks;
  a.count = count;
  a.dtype = cclFloat32;
  a.op = cclSum;
  a.chunkBytes = 2048;  // several waves
  a.codec = codec::defaultParams(codec);
  a.codec.seed = 11;
  a.feedback = true;
  return a;
}

coll::Plan planAllReduce(const coll::CollArgs& with, int r) {
  coll::CollArgs a = with;
  a.rank = r;
  return coll::planCollective(coll::Coll::kAllReduce, a);
}

// A runner on simulated device 0 whose link posts every stream at its bound, or stages the
// streams through host memory at their true length (the api's device path).
std::unique_ptr<coll::DeviceRunner> runnerOver(transport::Transport& t, bool staged) {
  SimDriver::currentDevice = 0;
  return std::make_unique<coll::DeviceRunner>(simDriver().open(0), [&t, staged](coll::Device& d) {
    return std::make_unique<coll::TransportLink>(t, /*exactLengths=*/false, std::chrono::seconds(30), nullptr,
                                                 staged ? std::optional(d.staging()) : std::nullopt);
  });
}

TEST(DeviceRunner, QuantizersPlanFixedLengthStreamsAndAtTheBoundDenseCodecsAreDeclined) {
  const auto fabric = transport::makeFabric(1);
  const auto t = transport::createLocalTransport(fabric, 0);
  auto runner = runnerOver(*t, false);
  ASSERT_TRUE(runner->link().sendsAtBound());
  for (cclCodec_t c : {cclCodecInt8, cclCodecInt4, cclCodecFp8E4m3, cclCodecMxfp8E4m3}) {
    const auto p = runner->plan(coll::Coll::kAllReduce, allreduceArgs(c, 4, 4096), planAllReduce, 0, 4);
    EXPECT_TRUE(p.compressed && !p.declined) << cclCodecName(c);
    EXPECT_TRUE(p.plan->codec.fixedLength) << cclCodecName(c);
    EXPECT_LT(p.moved.posted, p.moved.raw) << cclCodecName(c);
  }
  coll::CollArgs half = allreduceArgs(cclCodecInt8, 4, 4096);
  half.codec.fp16Scales = true;  // no fixed-length encoding: every block may be raw
  const auto p = runner->plan(coll::Coll::kAllReduce, half, planAllReduce, 0, 4);
  EXPECT_TRUE(p.declined);
  EXPECT_FALSE(p.plan->codec.fixedLength);
  EXPECT_GE(p.moved.posted, p.moved.raw);
  // Staged, the streams are copied at their bound (fixed-length quantizers) but cross the
  // network at their true length: nothing is declined.
  auto staged = runnerOver(*t, true);
  const auto q = staged->plan(coll::Coll::kAllReduce, half, planAllReduce, 0, 4);
  EXPECT_FALSE(q.declined);
  EXPECT_TRUE(staged->plan(coll::Coll::kAllReduce, allreduceArgs(cclCodecInt4, 4, 4096), planAllReduce, 0, 4)
                  .plan->codec.fixedLength);
}

TEST(DeviceRunner, FeedbackCallsOnTwoStreamsLeaveTheHostExecutorsBytes) {
  constexpr int n = 3;
  constexpr size_t count = 5000;
  constexpr int calls = 3;
  const coll::CollArgs args = allreduceArgs(cclCodecInt4, n, count);
  coll::CollArgs fixed = args;
  fixed.codec = codec::fixLength(fixed.codec);
  const size_t floats = coll::feedbackFloats(coll::Coll::kAllReduce, fixed);
  std::vector<std::vector<std::vector<float>>> input(calls, std::vector<std::vector<float>>(n));
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& call : input)
    for (auto& x : call) {
      x.resize(count);
      for (float& v : x) v = normal(rng);
    }

  // The host executor, with the same fixed-length parameters, one call after the other.
  std::vector<std::vector<std::vector<float>>> wantOut(calls, std::vector<std::vector<float>>(n));
  std::vector<std::vector<float>> wantRes(n, std::vector<float>(floats, 0.0f));
  for (int k = 0; k < calls; ++k)
    ccl::testing::runPlans(
        n, [&](int r) { return planAllReduce(fixed, r); },
        [&](int r) {
          wantOut[k][r].resize(count);
          return ccl::testing::RankBuffers{input[k][r].data(), wantOut[k][r].data(), wantRes[r].data()};
        },
        100 + k);

  // The runner: the three calls enqueued at once on streams a, b, a, nothing synchronised
  // between them. They share the residual and scratch: only the runner's ordering of each
  // call after the previous one, across streams, gives the host's bytes.
  std::vector<std::vector<std::vector<float>>> gotOut(calls, std::vector<std::vector<float>>(n));
  std::vector<std::vector<float>> gotRes(n);
  const auto fabric = transport::makeFabric(n);
  expectNoneThrew(runRanks(n, [&](int r) {
    const auto t = transport::createLocalTransport(fabric, r);
    auto runner = runnerOver(*t, true);
    SimStream a(0), b(0);
    std::vector<std::unique_ptr<SimBuffer>> send, recv;
    const coll::DeviceRunner::Planned p = runner->plan(coll::Coll::kAllReduce, fixed, planAllReduce, r, n);
    ASSERT_FALSE(p.declined);
    float* residual = nullptr;
    for (int k = 0; k < calls; ++k) {
      send.push_back(std::make_unique<SimBuffer>(count * 4, 0));
      recv.push_back(std::make_unique<SimBuffer>(count * 4, 0));
      std::memcpy(send[k]->p, input[k][r].data(), count * 4);
      coll::Stream& caller = runner->caller((k % 2 ? b : a).s);
      char* scratch = runner->begin(caller, p.plan->scratchBytes);
      residual = runner->residual(7, 0, floats, 1, caller);
      coll::StreamJob job{p.plan,  p.schedule, coll::Buffers{send[k]->p, recv[k]->p, scratch, residual}, 0, 100u + k,
                          nullptr, {}};
      runner->run(std::span<const coll::StreamJob>(&job, 1), caller);
    }
    a.synchronize();
    b.synchronize();
    for (SimStream* s : {&a, &b}) {
      std::string message;
      ASSERT_EQ(runner->caller(s->s).takeError(&message), cclSuccess) << message;
    }
    runner->commStream().synchronize();
    for (int k = 0; k < calls; ++k) gotOut[k][r].assign(recv[k]->as<float>(), recv[k]->as<float>() + count);
    gotRes[r].assign(residual, residual + floats);
  }));
  for (int r = 0; r < n; ++r) {
    for (int k = 0; k < calls; ++k) EXPECT_EQ(gotOut[k][r], wantOut[k][r]) << "rank " << r << " call " << k;
    EXPECT_EQ(gotRes[r], wantRes[r]) << "rank " << r;
  }
}

TEST(DeviceRunner, AResidualRestartsWhenItsSizeOperationOrGenerationChanges) {
  const auto fabric = transport::makeFabric(1);
  const auto t = transport::createLocalTransport(fabric, 0);
  auto runner = runnerOver(*t, true);
  SimStream s(0);
  coll::Stream& caller = runner->caller(s.s);
  float* r = runner->residual(1, 2, 16, 0, caller);
  s.synchronize();
  r[3] = 5.0f;
  EXPECT_EQ(runner->residual(1, 2, 16, 0, caller)[3], 5.0f)
      << "kept for the same holder, generation, size and operation";
  float* next = runner->residual(1, 3, 16, 0, caller);
  s.synchronize();
  EXPECT_EQ(next[3], 0.0f) << "another generation";
  next[3] = 6.0f;
  EXPECT_EQ(runner->residual(4, 3, 16, 0, caller)[3], 0.0f) << "another holder";
  EXPECT_EQ(runner->residual(1, 3, 16, 0, caller)[3], 6.0f) << "the holder's, not the other holder's";
  float* other = runner->residual(1, 3, 16, 1, caller);
  s.synchronize();
  EXPECT_EQ(other[3], 0.0f) << "another operation";
  other[0] = 1.0f;
  float* bigger = runner->residual(1, 3, 32, 1, caller);
  s.synchronize();
  EXPECT_EQ(bigger[0], 0.0f) << "another size";
  runner->commStream().synchronize();
}

// NCCL lets a communicator be destroyed with calls in flight: the runner, destroyed while its
// last call waits on the caller's stream, frees that call's residual only after it has run.
TEST(DeviceRunner, DestroyedWithACallInFlightFreesOnlyAfterItRan) {
  const auto fabric = transport::makeFabric(1);
  const auto t = transport::createLocalTransport(fabric, 0);
  auto runner = runnerOver(*t, true);
  SimStream s(0);
  constexpr size_t count = 3000;
  SimBuffer send(count * 4, 0), recv(count * 4, 0);
  const coll::CollArgs args = allreduceArgs(cclCodecInt4, 1, count);
  const coll::DeviceRunner::Planned p = runner->plan(coll::Coll::kAllReduce, args, planAllReduce, 0, 1);
  std::atomic<bool> open{false}, ran{false}, freedEarly{false};
  coll::Stream& caller = runner->caller(s.s);
  caller.enqueue([&] {
    while (!open.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  char* scratch = runner->begin(caller, p.plan->scratchBytes);
  float* residual = runner->residual(9, 0, coll::feedbackFloats(coll::Coll::kAllReduce, args), 1, caller);
  coll::StreamJob job{p.plan, p.schedule, coll::Buffers{send.p, recv.p, scratch, residual}, 0, 1, nullptr, {}};
  job.finished = [&](cclResult_t, const std::string&) { ran.store(true); };
  runner->run(std::span<const coll::StreamJob>(&job, 1), caller);
  simDriver().releaseHook = [&](void* q) {
    if ((q == residual || (scratch && q == scratch)) && !ran.load()) freedEarly.store(true);
  };
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    open.store(true);
  });
  runner.reset();  // waits for the call
  opener.join();
  s.synchronize();
  simDriver().releaseHook = nullptr;
  EXPECT_TRUE(ran.load());
  EXPECT_FALSE(freedEarly.load()) << "scratch or a residual was freed before the call that reads it ran";
}

}  // namespace
}  // namespace ccltest
