// SPDX-License-Identifier: BSD-3-Clause
// The stream executor on a GPU (ctest label gpu; skipped, with the reason, without a device):
// CUDA streams and events order work as host streams do; a plan's compute steps as CUDA
// kernels give the host's bytes for every collective and codec (one rank on a device against
// the host executor); with two or more devices, ranks as threads, one device each, over
// NVIDIA's NCCL (the NCCL transport), against the host executor's bytes.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "collectives/algorithms/algorithms.h"
#include "collectives/exec/cuda/cuda_stream.h"
#include "collectives/exec/cuda/device_kernels.h"
#include "collectives/exec/executor.h"
#include "collectives/exec/links/nccl_link.h"
#include "collectives/exec/stream_executor.h"
#include "gpu_test_util.h"
#include "rank_threads.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/local/local_transport.h"

namespace ccl::coll {
namespace {

using Bytes = std::vector<uint8_t>;
using codec::gputest::DeviceBuffer;

TEST(CudaStreams, EventsOrderStreamsAndHostStepsReportFailures) {
  CCL_SKIP_WITHOUT_CUDA_DEVICE();
  CudaStream a, b;
  std::atomic<int> order{0};
  int first = -1, second = -1;
  a.enqueue([&] { first = order++; });
  const Event e = a.record();
  b.wait(e);
  b.enqueue([&] { second = order++; });
  b.synchronize();
  EXPECT_TRUE(a.reached(e));
  EXPECT_EQ(first, 0);
  EXPECT_EQ(second, 1);
  a.enqueue([] { throw Error(cclInvalidUsage, "a step failed"); });
  a.enqueue([&] { order++; });  // later steps still run, as after a failed kernel
  a.synchronize();
  std::string message;
  EXPECT_EQ(a.takeError(&message), cclInvalidUsage);
  EXPECT_EQ(message, "a step failed");
  EXPECT_EQ(a.takeError(nullptr), cclSuccess);
  EXPECT_EQ(order.load(), 3);
}

// A one-rank link on the device: each receive is the send of the same tag (in order).
class DeviceSelfLink final : public StreamLink {
 public:
  void group(std::span<const Transfer> xs, Stream& stream) override {
    std::map<uint64_t, std::vector<const Transfer*>> sends;
    for (const Transfer& x : xs)
      if (x.send) sends[x.tag].push_back(&x);
    std::map<uint64_t, size_t> used;
    for (const Transfer& x : xs) {
      if (x.send) continue;
      const Transfer* s = sends.at(x.tag).at(used[x.tag]++);
      ASSERT_EQ(
          cudaMemcpyAsync(x.buf, s->buf, x.bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream.native())),
          cudaSuccess);
    }
  }
  bool exactLengths() const override { return false; }
};

struct Case {
  Coll coll;
  cclCodec_t codec;
  int nranks;
  bool feedback;
  bool fixedLength = false;  // what the NCCL face's runner encodes with (codec::fixLength)
};

CollArgs argsOf(const Case& c, int r) {
  CollArgs a;
  a.rank = r;
  a.nranks = c.nranks;
  a.count = 3000;
  a.chunkBytes = 4096;
  a.codec = codec::defaultParams(c.codec);
  a.codec.seed = 9;
  if (c.fixedLength) a.codec = codec::fixLength(a.codec);
  a.feedback = c.feedback;
  return a;
}

struct RankData {
  Bytes send, recv;
  std::vector<float> feedback;
};

RankData inputs(const Case& c, int r) {
  const BufferCounts n = bufferCounts(c.coll, 3000, static_cast<size_t>(c.nranks), r == 0);
  RankData d;
  d.send.resize(std::max<size_t>(n.send, 1) * 4);
  d.recv.assign(std::max<size_t>(n.recv, 1) * 4, 0x5a);
  std::mt19937 rng(77 + r);
  std::normal_distribution<float> normal;
  for (size_t i = 0; i * 4 < d.send.size(); ++i) {
    const float v = normal(rng);
    std::memcpy(&d.send[i * 4], &v, 4);
  }
  if (c.feedback) {
    d.feedback.resize(feedbackFloats(c.coll, argsOf(c, r)));
    for (float& f : d.feedback) f = 1e-3f * normal(rng);
  }
  return d;
}

// The host executor's result: the reference.
RankData onHost(const Case& c, int r, transport::Transport& t, uint64_t seed) {
  RankData d = inputs(c, r);
  const Plan plan = planCollective(c.coll, argsOf(c, r));
  std::vector<uint8_t> scratch(plan.scratchBytes);
  Job job;
  job.plan = &plan;
  job.buffers = {d.send.data(), d.recv.data(), scratch.data(), d.feedback.empty() ? nullptr : d.feedback.data()};
  job.transport = &t;
  job.callSeed = seed;
  execute(std::span<const Job>(&job, 1), ExecOptions{});
  return d;
}

// The stream executor on the device; copies the results back.
RankData onDevice(const Case& c, int r, StreamLink& link, uint64_t seed) {
  RankData d = inputs(c, r);
  auto plan = std::make_shared<const Plan>(planCollective(c.coll, argsOf(c, r)));
  auto sched = std::make_shared<const Schedule>(
      scheduleWaves([&](int q) { return planCollective(c.coll, argsOf(c, q)); }, c.nranks, r));
  DeviceBuffer send(d.send.size()), recv(d.recv.size()), scratch(std::max<size_t>(plan->scratchBytes, 1)),
      fb(std::max<size_t>(d.feedback.size() * 4, 4));
  send.upload(d.send.data(), d.send.size());
  recv.upload(d.recv.data(), d.recv.size());
  if (!d.feedback.empty()) fb.upload(d.feedback.data(), d.feedback.size() * 4);
  CudaStream caller, comm;
  CudaKernels kernels;
  StreamJob job{
      plan,
      sched,
      Buffers{send.get(), recv.get(), scratch.get(), d.feedback.empty() ? nullptr : static_cast<float*>(fb.get())},
      0,
      seed,
      nullptr,
      {}};
  executeOnStream(job, link, kernels, caller, comm);
  caller.synchronize();
  std::string message;
  EXPECT_EQ(caller.takeError(&message), cclSuccess) << message;
  EXPECT_EQ(cudaStreamSynchronize(static_cast<cudaStream_t>(caller.native())), cudaSuccess);
  const std::vector<uint8_t> got = recv.download(d.recv.size());
  std::memcpy(d.recv.data(), got.data(), got.size());
  if (!d.feedback.empty()) {
    const std::vector<uint8_t> f = fb.download(d.feedback.size() * 4);
    std::memcpy(d.feedback.data(), f.data(), f.size());
  }
  return d;
}

std::vector<Case> cases(int nranks) {
  std::vector<Case> out;
  for (int c = 0; c < kNumColls; ++c) {
    const Coll coll = static_cast<Coll>(c);
    const CollInfo& info = collInfo(coll);
    if (info.pointToPoint) continue;
    out.push_back({coll, cclCodecNone, nranks, false});
    if (!info.compressible) continue;
    for (int k = 1; k < cclNumCodecs; ++k) {
      if (codec::isLowRank(static_cast<cclCodec_t>(k))) continue;  // an api-layer composite
      out.push_back({coll, static_cast<cclCodec_t>(k), nranks, false});
      if (info.feedback) out.push_back({coll, static_cast<cclCodec_t>(k), nranks, true});
      if (codec::isQuantizer(k)) out.push_back({coll, static_cast<cclCodec_t>(k), nranks, info.feedback, true});
    }
  }
  return out;
}

std::string nameOf(const Case& c) {
  return std::string(collInfo(c.coll).name) + "/" + std::to_string(c.codec) + (c.feedback ? "/feedback" : "") +
         (c.fixedLength ? "/fixed" : "");
}

TEST(DeviceStreamExecutor, OneRankGivesTheHostExecutorsBytes) {
  CCL_SKIP_WITHOUT_CUDA_DEVICE();
  const auto fabric = transport::makeFabric(1);
  const auto t = transport::createLocalTransport(fabric, 0);
  DeviceSelfLink link;
  int ran = 0;
  for (const Case& c : cases(1)) {
    SCOPED_TRACE(nameOf(c));
    const RankData want = onHost(c, 0, *t, 5);
    const RankData got = onDevice(c, 0, link, 5);
    EXPECT_EQ(got.recv, want.recv);
    EXPECT_EQ(got.feedback, want.feedback);
    ++ran;
  }
  EXPECT_GT(ran, 20);
}

// Ranks as threads, one device each, over NVIDIA's NCCL: the GPU path end to end.
TEST(DeviceStreamExecutor, RanksOnDevicesOverNcclGiveTheHostExecutorsBytes) {
  CCL_SKIP_WITHOUT_CUDA_DEVICE();
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  if (devices < 2) GTEST_SKIP() << "one rank per device needs two devices; this machine has " << devices;
  const std::string library = CCL_TEST_NVIDIA_NCCL;
  if (library.empty()) GTEST_SKIP() << "no NVIDIA NCCL library was found at configure time";
  const transport::nccl::Functions fn = transport::nccl::load(library);
  const int n = std::min(devices, 4);
  for (const Case& c : cases(n)) {
    SCOPED_TRACE(nameOf(c));
    std::vector<RankData> want(n), got(n);
    {
      const auto fabric = transport::makeFabric(n);
      ccltest::expectNoneThrew(ccltest::runRanks(n, [&](int r) {
        const auto t = transport::createLocalTransport(fabric, r);
        want[r] = onHost(c, r, *t, 3);
      }));
    }
    cclUniqueId id;
    bootstrap::createUniqueId(&id);
    ccltest::expectNoneThrew(ccltest::runRanks(n, [&](int r) {
      ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
      auto bs = bootstrap::Bootstrap::connect(id, r, n, std::chrono::seconds(60));
      transport::nccl::Transport t(fn, *bs);
      NcclLink link(t);
      got[r] = onDevice(c, r, link, 3);
    }));
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(got[r].recv, want[r].recv) << "rank " << r;
      EXPECT_EQ(got[r].feedback, want[r].feedback) << "rank " << r;
    }
  }
}

}  // namespace
}  // namespace ccl::coll
