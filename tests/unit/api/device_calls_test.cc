// SPDX-License-Identifier: BSD-3-Clause
// The api's device path on a simulated device (sim_device.h): calls whose buffers are device
// memory return once enqueued on their stream and, when the stream has run them, leave the
// same bytes as the host path for every collective, codec and 1..4 ranks (error feedback and
// send/recv and groups included); bad input (mixed memories, NULL or host streams, another
// device's memory or stream, groups mixing host and device calls, LoCo, powersgd) is refused with a message before
// anything is enqueued; a failure after the call returned becomes the communicator's asynchronous error; a host call on
// the same communicator runs after its device calls; cclCommCuDevice reports the device.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ccl/ccl.h"
#include "collectives/exec/links/transport_link.h"
#include "device_match.h"
#include "rank_threads.h"
#include "scoped_env.h"
#include "sim_device.h"

namespace ccltest {
namespace {

#define CCL_OK(call)                                                                                      \
  do {                                                                                                    \
    const cclResult_t r_ = (call);                                                                        \
    if (r_ != cclSuccess) throw std::runtime_error(std::string(#call) + ": " + cclGetLastError(nullptr)); \
  } while (0)

std::vector<cclComm_t> makeComms(int n, int device = 0) {
  cclUniqueId id;
  if (cclGetUniqueId(&id) != cclSuccess) throw std::runtime_error("cclGetUniqueId failed");
  std::vector<cclComm_t> comms(n, nullptr);
  expectNoneThrew(runRanks(n, [&](int r) {
    SimDriver::currentDevice = device;
    CCL_OK(cclCommInitRank(&comms[r], n, id, r));
  }));
  return comms;
}

void destroy(std::vector<cclComm_t>& comms) {
  expectNoneThrew(runRanks(static_cast<int>(comms.size()), [&](int r) { CCL_OK(cclCommDestroy(comms[r])); }));
  comms.clear();
}

void expectNoAsyncError(cclComm_t comm) {
  cclResult_t e = cclInternalError;
  CCL_OK(cclCommGetAsyncError(comm, &e));
  if (e != cclSuccess) throw std::runtime_error(std::string("asynchronous error: ") + cclGetErrorString(e));
}

// Every collective and codec: the device path leaves the host path's bytes.
class SimOps final : public DeviceOps {
 public:
  void* alloc(size_t bytes) override { return simDriver().alloc(bytes, 0); }
  void release(void* p) override { simDriver().release(p); }
  void upload(void* d, const void* h, size_t bytes) override { std::memcpy(d, h, bytes); }
  void download(void* h, const void* d, size_t bytes) override { std::memcpy(h, d, bytes); }
  cclStream_t newStream() override { return simDriver().newStream(0); }
  void destroyStream(cclStream_t s) override { simDriver().destroyStream(s); }
  void synchronize(cclStream_t s) override { simDriver().streamOf(s).synchronize(); }
};

class MatchHost : public ::testing::TestWithParam<int> {};

TEST_P(MatchHost, EveryCollectiveAndCodec) {
  SimOps ops;
  expectDeviceMatchesHost(GetParam(), ops);
}

INSTANTIATE_TEST_SUITE_P(Ranks, MatchHost, ::testing::Values(1, 2, 3, 4));

// Device buffers 1, 2 and 3 bytes past an aligned address (inside every float): the same
// bytes as the host path's aligned buffers, every collective and codec.
class MatchHostMisaligned : public ::testing::TestWithParam<size_t> {};

TEST_P(MatchHostMisaligned, EveryCollectiveAndCodec) {
  SimOps ops;
  expectDeviceMatchesHost(3, ops, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Bytes, MatchHostMisaligned, ::testing::Values(1, 2, 3));

// Every dtype on device buffers inside an element (1, 2 and 3 bytes past an aligned
// address): the uncompressed reductions and gathers give the bytes the host path gives on
// aligned buffers (integer and float elements alike; the plan stages what it reduces).
TEST(DeviceCalls, EveryDtypeInsideAnElementMatchesTheHost) {
  const int n = 3;
  const size_t count = 1001;
  const size_t sizes[cclNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};  // ccl.h's order
  auto host = makeComms(n), dev = makeComms(n);
  expectNoneThrew(runRanks(n, [&](int r) {
    SimStream stream(0);
    for (int t = 0; t < cclNumTypes; ++t) {
      const auto type = static_cast<cclDataType_t>(t);
      const size_t es = sizes[t];
      // Small integers in every byte pattern's low bits: sums and maxima stay exact in every type.
      std::vector<unsigned char> in(count * n * es, 0);
      for (size_t i = 0; i < count * n; ++i) {
        const uint8_t v = static_cast<uint8_t>((i * 7 + static_cast<size_t>(r) * 3) % 5);
        if (t == cclFloat32) {
          const float f = v;
          std::memcpy(&in[i * es], &f, 4);
        } else if (t == cclFloat64) {
          const double f = v;
          std::memcpy(&in[i * es], &f, 8);
        } else if (t == cclFloat16 || t == cclBfloat16) {
          static const uint16_t half[5] = {0, 0x3c00, 0x4000, 0x4200, 0x4400},
                                bf16[5] = {0, 0x3f80, 0x4000, 0x4040, 0x4080};
          const uint16_t bits = t == cclFloat16 ? half[v] : bf16[v];
          std::memcpy(&in[i * es], &bits, 2);
        } else if (t == cclFloat8e4m3 || t == cclFloat8e5m2) {
          static const uint8_t e4m3[5] = {0, 0x38, 0x40, 0x44, 0x48}, e5m2[5] = {0, 0x3c, 0x40, 0x42, 0x44};
          in[i * es] = t == cclFloat8e4m3 ? e4m3[v] : e5m2[v];
        } else {
          in[i * es] = v;  // little-endian: the low byte of every integer width
        }
      }
      for (size_t at : {size_t{1}, size_t{2}, size_t{3}}) {
        for (int kind = 0; kind < 3; ++kind) {  // allreduce sum, allreduce max, allgather
          const size_t recvElems = kind == 2 ? count * n : count;
          std::vector<unsigned char> hostOut(recvElems * es, 0xee);
          SimBuffer dsend(count * n * es + at, 0), drecv(recvElems * es + at, 0);
          unsigned char* s = static_cast<unsigned char*>(dsend.p) + at;
          unsigned char* d = static_cast<unsigned char*>(drecv.p) + at;
          std::memcpy(s, in.data(), count * es);
          std::memset(d, 0xee, recvElems * es);
          if (kind < 2) {
            const cclRedOp_t op = kind == 0 ? cclSum : cclMax;
            CCL_OK(cclAllReduce(in.data(), hostOut.data(), count, type, op, host[r], nullptr));
            CCL_OK(cclAllReduce(s, d, count, type, op, dev[r], stream.s));
          } else {
            CCL_OK(cclAllGather(in.data(), hostOut.data(), count, type, host[r], nullptr));
            CCL_OK(cclAllGather(s, d, count, type, dev[r], stream.s));
          }
          stream.synchronize();
          expectNoAsyncError(dev[r]);
          if (std::memcmp(hostOut.data(), d, recvElems * es) != 0)
            throw std::runtime_error("dtype " + std::to_string(t) + " kind " + std::to_string(kind) + " at +" +
                                     std::to_string(at) + ": the device bytes differ from the host's");
        }
      }
    }
  }));
  destroy(host);
  destroy(dev);
}

// One thread drives the communicators of a clique (cclCommInitAll), as a single-process
// multi-GPU program does: a group of one ring allreduce per communicator, 8 ranks (on the two
// simulated devices), 14 waves, more than the staged link holds in flight. Enqueuing one
// communicator's call waits for its stream to release staging, which takes its peers' sends,
// some of them the other communicators' of this very thread, not enqueued yet: the group must
// still complete, with every rank holding the exact sum.
TEST(DeviceCalls, OneThreadDrivesACliqueThroughAGroupBeyondTheStagingBound) {
  setenv("CCL_ALGO", "ring", 1);
  setenv("CCL_TIMEOUT", "20", 1);
  const int n = 8;
  const size_t count = 1 << 16;
  std::vector<cclComm_t> comms(n, nullptr);
  std::vector<int> devices(n);
  for (int r = 0; r < n; ++r) devices[r] = r % SimDriver::kDevices;
  SimDriver::currentDevice = 0;
  CCL_OK(cclCommInitAll(comms.data(), n, devices.data()));
  std::vector<std::unique_ptr<SimBuffer>> send, recv;
  std::vector<std::unique_ptr<SimStream>> streams;
  std::vector<float> sum(count, 0.f);
  for (int r = 0; r < n; ++r) {
    send.push_back(std::make_unique<SimBuffer>(count * 4, devices[r]));
    recv.push_back(std::make_unique<SimBuffer>(count * 4, devices[r]));
    streams.push_back(std::make_unique<SimStream>(devices[r]));
    auto* x = static_cast<float*>(send[r]->p);
    for (size_t i = 0; i < count; ++i) x[i] = static_cast<float>((i + 3 * r) % 17);
  }
  expectNoneThrew(runRanks(1, [&](int) {  // one thread, under the runner's deadline
    CCL_OK(cclGroupStart());
    for (int r = 0; r < n; ++r) {
      SimDriver::currentDevice = devices[r];
      CCL_OK(cclAllReduce(send[r]->p, recv[r]->p, count, cclFloat32, cclSum, comms[r], streams[r]->s));
    }
    CCL_OK(cclGroupEnd());
    for (int r = 0; r < n; ++r) streams[r]->synchronize();
  }));
  for (int r = 0; r < n; ++r) {
    const auto* got = static_cast<const float*>(recv[r]->p);
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i) {
      float want = 0;
      for (int q = 0; q < n; ++q) want += static_cast<float>((i + 3 * q) % 17);
      wrong += got[i] != want;
    }
    EXPECT_EQ(wrong, 0u) << "rank " << r;
    expectNoAsyncError(comms[r]);
    CCL_OK(cclCommDestroy(comms[r]));
  }
  unsetenv("CCL_ALGO");
  unsetenv("CCL_TIMEOUT");
}

// A communicator destroyed or aborted while another's device call on the same devices waits
// for a peer (as PyTorch's watchdog aborts one communicator while another is stuck) makes no
// call that waits for the whole device (on CUDA: cudaFreeHost of its staging), and returns
// promptly; the stuck call then completes once its peer comes.
TEST(DeviceCalls, DestroyAndAbortWaitForNoOtherCommunicatorsWork) {
  const int n = 2;
  const size_t count = 4096;
  for (bool abort : {false, true}) {
    auto a = makeComms(n), b = makeComms(n);
    std::vector<std::unique_ptr<SimBuffer>> buf;
    std::vector<std::unique_ptr<SimStream>> streams;
    for (int r = 0; r < n; ++r) {
      buf.push_back(std::make_unique<SimBuffer>(count * 4, 0));
      streams.push_back(std::make_unique<SimStream>(0));
    }
    // Both communicators have links (a device call each), then rank 0 of `a` calls alone.
    expectNoneThrew(runRanks(n, [&](int r) {
      CCL_OK(cclAllReduce(buf[r]->p, buf[r]->p, count, cclFloat32, cclSum, a[r], streams[r]->s));
      CCL_OK(cclAllReduce(buf[r]->p, buf[r]->p, count, cclFloat32, cclSum, b[r], streams[r]->s));
      streams[r]->synchronize();
    }));
    SimBuffer lone(count * 4, 0);
    SimStream loneStream(0);
    CCL_OK(cclAllReduce(lone.p, lone.p, count, cclFloat32, cclSum, a[0], loneStream.s));  // waits for rank 1
    const long syncBefore = simDriver().counts().stagingSyncCalls;
    const auto start = std::chrono::steady_clock::now();
    expectNoneThrew(runRanks(n, [&](int r) { CCL_OK(abort ? cclCommAbort(b[r]) : cclCommDestroy(b[r])); }));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(simDriver().counts().stagingSyncCalls, syncBefore)
        << (abort ? "abort" : "destroy") << " freed staging in a way that waits for the whole device";
    EXPECT_LT(seconds, 5.0) << (abort ? "abort" : "destroy") << " waited for the other communicator";
    SimBuffer peer(count * 4, 0);
    SimStream peerStream(0);
    expectNoneThrew(runRanks(1, [&](int) {
      CCL_OK(cclAllReduce(peer.p, peer.p, count, cclFloat32, cclSum, a[1], peerStream.s));
      peerStream.synchronize();
    }));
    loneStream.synchronize();
    expectNoAsyncError(a[0]);
    destroy(a);
  }
}

// A call whose staging is many times the ring's returns at once, whatever its peers do: the
// part that would wait for staging goes to the communicator's launcher, and the caller's
// stream waits for it there. Rank 1 calls only once rank 0's call has returned (before, rank
// 0 waited for staging its peer's receives would release: until its time-out). Both
// results are exact (uncompressed) and within int8's bound.
TEST(DeviceCalls, ACallBeyondTheStagingRingReturnsBeforeItsPeerCalls) {
  setenv("CCL_STAGING_BYTES", "512K", 1);
  setenv("CCL_CHUNK_BYTES", "64K", 1);
  setenv("CCL_ALGO", "ring", 1);
  constexpr int n = 2;
  auto comms = makeComms(n);
  const size_t count = (size_t{8} << 20) / 4;  // groups of 64 KiB: many more than the ring's 8
  for (const cclCodec_t c : {cclCodecNone, cclCodecInt8}) {
    std::atomic<bool> returned{false};
    expectNoneThrew(runRanks(n, [&](int r) {
      SimBuffer a(count * 4, 0), b(count * 4, 0);
      for (size_t i = 0; i < count; ++i) a.as<float>()[i] = static_cast<float>((i + r) % 9);
      SimStream stream(0);
      if (r == 1)
        while (!returned.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      const cclCompression_t codec = codecOf(c);
      CCL_OK(cclAllReduceEx(a.p, b.p, count, cclFloat32, cclSum, comms[r], stream.s, &codec, nullptr));
      if (r == 0) returned = true;
      stream.synchronize();
      expectNoAsyncError(comms[r]);
      for (size_t i = 0; i < count; ++i) {
        const float want = static_cast<float>(i % 9 + (i + 1) % 9);
        if (std::fabs(b.as<float>()[i] - want) > (c == cclCodecNone ? 0.f : 0.2f))
          throw std::runtime_error(std::string(cclCodecName(c)) + ": element " + std::to_string(i) + " is " +
                                   std::to_string(b.as<float>()[i]) + ", not " + std::to_string(want));
      }
    }));
  }
  destroy(comms);
  unsetenv("CCL_STAGING_BYTES");
  unsetenv("CCL_ALGO");
  setenv("CCL_CHUNK_BYTES", "8192", 1);
}

// An abort while a call's enqueuing waits on the launcher: rank 0's call has more staged
// groups than its ring holds and its peer never comes, so its staging is never released.
// The call itself returned; cclCommAbort, from this thread, returns within its bound, the
// caller's stream then completes (the launcher releases it), and nothing the launcher still
// uses is freed under it (ASan and TSan builds run this too).
TEST(DeviceCalls, AnAbortWhileTheLauncherWaitsForStagingEndsIt) {
  setenv("CCL_STAGING_BYTES", "512K", 1);
  setenv("CCL_CHUNK_BYTES", "64K", 1);
  setenv("CCL_ALGO", "ring", 1);
  auto comms = makeComms(2);
  const size_t count = (size_t{8} << 20) / 4;
  SimBuffer a(count * 4, 0), b(count * 4, 0);
  SimStream stream(0);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(cclAllReduce(a.p, b.p, count, cclFloat32, cclSum, comms[0], stream.s), cclSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto abortStart = std::chrono::steady_clock::now();
  EXPECT_EQ(cclCommAbort(comms[0]), cclSuccess);
  const double abortSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - abortStart).count();
  stream.synchronize();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(abortSeconds, 5.0);
  EXPECT_LT(seconds, 10.0) << "the call waited for its time-out (CCL_TIMEOUT=30)";
  EXPECT_EQ(cclCommAbort(comms[1]), cclSuccess);
  unsetenv("CCL_STAGING_BYTES");
  unsetenv("CCL_ALGO");
  setenv("CCL_CHUNK_BYTES", "8192", 1);
}

// Residual feedback kept in device memory follows the host state call after call, and the
// statistics count the device calls.
TEST(DeviceCalls, FeedbackAcrossCallsAndStats) {
  const int n = 2;
  auto host = makeComms(n), dev = makeComms(n);
  expectNoneThrew(runRanks(n, [&](int r) {
    const size_t count = 20000;
    const cclCompression_t codec = codecOf(cclCodecInt4);
    cclFeedback_t fh = nullptr, fd = nullptr;
    CCL_OK(cclFeedbackCreate(&fh, cclFeedbackResidual, 0.f, 0));
    CCL_OK(cclFeedbackCreate(&fd, cclFeedbackResidual, 0.f, 0));
    SimBuffer dsend(count * 4, 0), drecv(count * 4, 0);
    SimStream stream(0);
    for (uint32_t call = 0; call < 3; ++call) {
      const std::vector<float> in = inputOf(r, count, 100 + call);
      std::vector<float> out(count);
      std::memcpy(dsend.p, in.data(), count * 4);
      CCL_OK(cclAllReduceEx(in.data(), out.data(), count, cclFloat32, cclSum, host[r], nullptr, &codec, fh));
      CCL_OK(cclAllReduceEx(dsend.p, drecv.p, count, cclFloat32, cclSum, dev[r], stream.s, &codec, fd));
      stream.synchronize();
      if (std::memcmp(out.data(), drecv.p, count * 4) != 0)
        throw std::runtime_error("call " + std::to_string(call) + ": the device result differs from the host's");
    }
    cclStats_t hs = CCL_STATS_INITIALIZER, ds = CCL_STATS_INITIALIZER;
    CCL_OK(cclCommGetStats(host[r], &hs));
    CCL_OK(cclCommGetStats(dev[r], &ds));
    const cclOpStats_t& h = hs.op[cclOpAllReduce];
    const cclOpStats_t& d = ds.op[cclOpAllReduce];
    EXPECT_EQ(d.calls, 3u);
    EXPECT_EQ(d.compressedCalls, 3u);
    EXPECT_EQ(d.rawBytes, h.rawBytes);
    // Staged through host memory, encoded streams cross the network at their true length.
    EXPECT_EQ(d.wireBytes, h.wireBytes);
    EXPECT_LT(d.wireBytes, d.rawBytes / 4);
    CCL_OK(cclFeedbackDestroy(fh));
    CCL_OK(cclFeedbackDestroy(fd));
  }));
  destroy(host);
  destroy(dev);
}

// Send and receive, uncompressed and with a codec and feedback: the host path's bytes.
TEST(DeviceCalls, SendRecvMatchHost) {
  auto host = makeComms(2), dev = makeComms(2);
  expectNoneThrew(runRanks(2, [&](int r) {
    const size_t count = 9000;
    const int peer = 1 - r;
    SimBuffer dsend(count * 4, 0), drecv(count * 4, 0);
    SimStream stream(0);
    cclFeedback_t fh = nullptr, fd = nullptr;
    CCL_OK(cclFeedbackCreate(&fh, cclFeedbackResidual, 0.f, 0));
    CCL_OK(cclFeedbackCreate(&fd, cclFeedbackResidual, 0.f, 0));
    for (cclCodec_t c : {cclCodecNone, cclCodecInt8, cclCodecTopK}) {
      const cclCompression_t codec = codecOf(c);
      const std::vector<float> in = inputOf(r, count, 7 + c);
      std::vector<float> out(count, -1.f);
      std::memcpy(dsend.p, in.data(), count * 4);
      // Rank 0 sends first, rank 1 receives first: no group needed on either path.
      auto both = [&](cclComm_t comm, const void* s, void* d, cclStream_t st, cclFeedback_t fb) {
        if (r == 0) {
          CCL_OK(cclSendEx(s, count, cclFloat32, peer, comm, st, &codec, fb));
          CCL_OK(cclRecvEx(d, count, cclFloat32, peer, comm, st, &codec));
        } else {
          CCL_OK(cclRecvEx(d, count, cclFloat32, peer, comm, st, &codec));
          CCL_OK(cclSendEx(s, count, cclFloat32, peer, comm, st, &codec, fb));
        }
      };
      both(host[r], in.data(), out.data(), nullptr, fh);
      both(dev[r], dsend.p, drecv.p, stream.s, fd);
      stream.synchronize();
      expectNoAsyncError(dev[r]);
      if (std::memcmp(out.data(), drecv.p, count * 4) != 0)
        throw std::runtime_error(std::string(cclCodecName(c)) + ": the device result differs from the host's");
    }
    CCL_OK(cclFeedbackDestroy(fh));
    CCL_OK(cclFeedbackDestroy(fd));
  }));
  destroy(host);
  destroy(dev);
}

// Groups on device buffers: a ring of sends and receives (each rank's send waits for its
// neighbour's receive: without the group the first send would wait for ever) with
// collectives between and a send to the rank itself, against the same group on host
// buffers.
class DeviceGroups : public ::testing::TestWithParam<int> {};

TEST_P(DeviceGroups, RingAndMixedGroupsMatchHost) {
  const int n = GetParam();
  auto host = makeComms(n), dev = makeComms(n);
  expectNoneThrew(runRanks(n, [&](int r) {
    const size_t count = 6000;
    const size_t total = count * static_cast<size_t>(n);
    SimBuffer d1(total * 4, 0), d2(total * 4, 0), d3(total * 4, 0), d4(total * 4, 0), d5(count * 4, 0);
    SimStream stream(0);
    const int next = (r + 1) % n, prev = (r - 1 + n) % n;
    for (cclCodec_t c : {cclCodecNone, cclCodecInt8}) {
      const cclCompression_t codec = codecOf(c);
      const std::vector<float> in = inputOf(r, total, 50 + c), in2 = inputOf(r, total, 60 + c);
      // What each buffer holds after the group, on host and on device.
      std::vector<float> h1 = in, h2 = in2, h3(total, -1.f), h4(total, -1.f), h5(count, -1.f);
      std::memcpy(d1.p, in.data(), total * 4);
      std::memcpy(d2.p, in2.data(), total * 4);
      std::memcpy(d3.p, h3.data(), total * 4);
      std::memcpy(d4.p, h4.data(), total * 4);
      std::memcpy(d5.p, h5.data(), count * 4);
      auto group = [&](cclComm_t comm, float* b1, float* b2, float* b3, float* b4, float* b5, cclStream_t st) {
        CCL_OK(cclGroupStart());
        // Point-to-point first and a collective between: the group reorders nothing it must not.
        CCL_OK(cclSendEx(b1, count, cclFloat32, next, comm, st, &codec, nullptr));
        CCL_OK(cclRecvEx(b5, count, cclFloat32, r, comm, st, &codec));  // from itself, before its send
        CCL_OK(cclAllReduceEx(b2, b2, count, cclFloat32, cclSum, comm, st, &codec, nullptr));
        CCL_OK(cclRecvEx(b3, count, cclFloat32, prev, comm, st, &codec));
        CCL_OK(cclSendEx(b2 + count, count, cclFloat32, r, comm, st, &codec, nullptr));  // to itself
        CCL_OK(cclAllGatherEx(b1, b4, count, cclFloat32, comm, st, &codec, nullptr));
        CCL_OK(cclGroupEnd());
      };
      group(host[r], h1.data(), h2.data(), h3.data(), h4.data(), h5.data(), nullptr);
      group(dev[r], d1.as<float>(), d2.as<float>(), d3.as<float>(), d4.as<float>(), d5.as<float>(), stream.s);
      stream.synchronize();
      expectNoAsyncError(dev[r]);
      const std::string what = std::string(cclCodecName(c)) + " rank " + std::to_string(r);
      if (std::memcmp(h2.data(), d2.p, count * 4) != 0) throw std::runtime_error(what + ": the allreduce differs");
      if (std::memcmp(h3.data(), d3.p, count * 4) != 0) throw std::runtime_error(what + ": the receive differs");
      if (std::memcmp(h4.data(), d4.p, total * 4) != 0) throw std::runtime_error(what + ": the allgather differs");
      if (std::memcmp(h5.data(), d5.p, count * 4) != 0)
        throw std::runtime_error(what + ": the receive from itself differs");
      if (h5[0] == -1.f) throw std::runtime_error(what + ": nothing was received from itself");
    }
  }));
  destroy(host);
  destroy(dev);
}

INSTANTIATE_TEST_SUITE_P(Ranks, DeviceGroups, ::testing::Values(2, 3, 4));

// Expects `r` to be `code` with a message containing `phrase`.
void expectRefused(cclResult_t r, cclResult_t code, const char* phrase, const char* what) {
  EXPECT_EQ(r, code) << what;
  EXPECT_NE(std::string(cclGetLastError(nullptr)).find(phrase), std::string::npos)
      << what << ": " << cclGetLastError(nullptr);
}

TEST(DeviceCalls, BadInputIsRefusedBeforeAnythingRuns) {
  auto comms = makeComms(1);
  cclComm_t comm = comms[0];
  const size_t count = 1024;
  SimBuffer a(count * 4, 0), b(count * 4, 0), other(count * 4, 1);
  std::vector<float> host(count);
  SimStream stream(0), stream1(1);
  cclStream_t hostStream = nullptr;
  ASSERT_EQ(cclHostStreamCreate(&hostStream), cclSuccess);

  expectRefused(cclAllReduce(a.p, host.data(), count, cclFloat32, cclSum, comm, stream.s), cclInvalidUsage,
                "host memory", "device sendbuff, host recvbuff");
  expectRefused(cclAllReduce(host.data(), a.p, count, cclFloat32, cclSum, comm, stream.s), cclInvalidUsage,
                "host memory", "host sendbuff, device recvbuff");
  expectRefused(cclAllReduce(a.p, b.p, count, cclFloat32, cclSum, comm, nullptr), cclInvalidUsage, "stream is NULL",
                "device buffers on stream NULL");
  expectRefused(cclAllReduce(a.p, b.p, count, cclFloat32, cclSum, comm, hostStream), cclInvalidUsage, "host stream",
                "device buffers on a host stream");
  expectRefused(cclAllReduce(a.p, b.p, count, cclFloat32, cclSum, comm, stream1.s), cclInvalidUsage,
                "belongs to device 1", "a stream of another device");
  expectRefused(cclAllReduce(other.p, b.p, count, cclFloat32, cclSum, comm, stream.s), cclInvalidUsage,
                "memory of device 1", "a buffer of another device");
  expectRefused(cclSend(a.p, count, cclFloat32, 0, comm, stream.s), cclInvalidUsage, "itself",
                "a device send to oneself");

  cclFeedback_t loco = nullptr;
  ASSERT_EQ(cclFeedbackCreate(&loco, cclFeedbackLoco, 0.5f, 0), cclSuccess);
  const cclCompression_t int8 = codecOf(cclCodecInt8);
  expectRefused(cclAllReduceEx(a.p, b.p, count, cclFloat32, cclSum, comm, stream.s, &int8, loco), cclInvalidUsage,
                "LoCo", "LoCo feedback on device buffers");
  const cclCompression_t powersgd = codecOf(cclCodecPowerSgd);
  expectRefused(cclAllReduceEx(a.p, b.p, count, cclFloat32, cclSum, comm, stream.s, &powersgd, nullptr),
                cclInvalidArgument, "host memory only", "powersgd on device buffers");

  // A group mixing host and device buffers runs nothing.
  std::vector<float> host2(count);
  ASSERT_EQ(cclGroupStart(), cclSuccess);
  ASSERT_EQ(cclAllReduce(a.p, b.p, count, cclFloat32, cclSum, comm, stream.s), cclSuccess);
  ASSERT_EQ(cclAllReduce(host.data(), host2.data(), count, cclFloat32, cclSum, comm, nullptr), cclSuccess);
  expectRefused(cclGroupEnd(), cclInvalidUsage, "mixes calls on host and on device",
                "a group of host and device calls");

  // Nothing was enqueued and the communicator is fine: a good call runs.
  for (size_t i = 0; i < count; ++i) a.as<float>()[i] = float(i);
  ASSERT_EQ(cclAllReduce(a.p, b.p, count, cclFloat32, cclSum, comm, stream.s), cclSuccess) << cclGetLastError(nullptr);
  stream.synchronize();
  cclResult_t async = cclInternalError;
  ASSERT_EQ(cclCommGetAsyncError(comm, &async), cclSuccess);
  EXPECT_EQ(async, cclSuccess);
  for (size_t i = 0; i < count; ++i) ASSERT_EQ(b.as<float>()[i], float(i));

  ASSERT_EQ(cclFeedbackDestroy(loco), cclSuccess);
  ASSERT_EQ(cclHostStreamDestroy(hostStream), cclSuccess);
  destroy(comms);
}

// A call that moves nothing, on a CUDA stream as NCCL programs make it (nccl-tests' all-gather,
// all-to-all and reduce-scatter did on a device): done at once, on every rank, whatever the
// stream; it used to be refused as "a CUDA stream given for host buffers".
TEST(DeviceCalls, ACallOfNothingOnACudaStreamIsDone) {
  auto comms = makeComms(2);
  SimBuffer a(64, 0), b(64, 0);
  expectNoneThrew(runRanks(2, [&](int r) {
    SimStream stream(0);
    CCL_OK(cclAllGather(a.p, b.p, 0, cclFloat32, comms[r], stream.s));
    CCL_OK(cclReduceScatter(a.p, b.p, 0, cclFloat32, cclSum, comms[r], stream.s));
    CCL_OK(cclAlltoAll(a.p, b.p, 0, cclFloat32, comms[r], stream.s));
    CCL_OK(cclAllReduce(a.p, b.p, 0, cclFloat32, cclSum, comms[r], stream.s));
    stream.synchronize();
    expectNoAsyncError(comms[r]);
  }));
  destroy(comms);
}

// A call that fails after it returned (the ranks disagree on the count): the failure is
// the communicator's asynchronous error on every rank, and its next call is refused.
TEST(DeviceCalls, AFailureAfterTheCallReturnedIsTheAsyncError) {
  auto comms = makeComms(2);
  expectNoneThrew(runRanks(2, [&](int r) {
    const size_t count = 4096 + static_cast<size_t>(r) * 512;
    SimBuffer a(count * 4, 0), b(count * 4, 0);
    SimStream stream(0);
    CCL_OK(cclAllReduce(a.p, b.p, count, cclFloat32, cclSum, comms[r], stream.s));
    stream.synchronize();
    cclResult_t async = cclSuccess;
    CCL_OK(cclCommGetAsyncError(comms[r], &async));
    if (async == cclSuccess) throw std::runtime_error("mismatched counts left no asynchronous error");
    if (cclAllReduce(a.p, b.p, 1024, cclFloat32, cclSum, comms[r], stream.s) == cclSuccess)
      throw std::runtime_error("a failed communicator took another call");
  }));
  destroy(comms);
}

// A rank's own failure inside a device call (here a batch of compute steps that fails on
// its device) tells its peer through the link, as on host memory
// (executor_local_failure_test): the peer's call, this one or its next, fails at once with a
// remote error (the link's abort by that rank), instead of waiting for the failed rank's
// messages until the communicator's timeout (cclSystemError).
TEST(DeviceCalls, ARanksOwnFailureTellsItsPeerAtOnce) {
  constexpr int kVictim = 1;
  constexpr double kPromptSeconds = 30;  // half the communicators' timeout
  cclUniqueId id;
  ASSERT_EQ(cclGetUniqueId(&id), cclSuccess);
  std::vector<cclComm_t> comms(2, nullptr);
  expectNoneThrew(runRanks(2, [&](int r) {
    SimDriver::currentDevice = r;  // the victim alone on its device
    cclConfig_t config = CCL_CONFIG_INITIALIZER;
    config.timeoutMs = 60000;
    CCL_OK(cclCommInitRankConfig(&comms[r], 2, id, r, &config));
  }));
  simDriver().failComputeOn.store(kVictim);
  expectNoneThrew(runRanks(2, [&](int r) {
    SimDriver::currentDevice = r;
    const size_t count = size_t{1} << 16;
    SimBuffer a(count * 4, r), b(count * 4, r);
    SimStream stream(r);
    const auto start = std::chrono::steady_clock::now();
    cclResult_t result = cclSuccess, async = cclSuccess;
    // The peer's first call may end before the news comes (all it needed sent before the
    // failure): its second may not.
    for (int k = 0; k < 2 && result == cclSuccess && async == cclSuccess; ++k) {
      result = cclAllReduce(a.p, b.p, count, cclFloat32, cclSum, comms[r], stream.s);
      stream.synchronize();
      CCL_OK(cclCommGetAsyncError(comms[r], &async));
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("rank %d: %s / %s after %.3f s\n", r, cclGetErrorString(result), cclGetErrorString(async), seconds);
    if (result == cclSuccess && async == cclSuccess) throw std::runtime_error("no call failed");
    if (seconds > kPromptSeconds)
      throw std::runtime_error("rank " + std::to_string(r) + " learnt of the failure only after " +
                               std::to_string(seconds) + " s");
    // The victim's error is its own; the peer's the link's abort, a remote error (the log
    // names the rank that aborted).
    const cclResult_t want = r == kVictim ? cclInternalError : cclRemoteError;
    if (async != want)
      throw std::runtime_error("rank " + std::to_string(r) + ": asynchronous error " + cclGetErrorString(async) +
                               ", not " + cclGetErrorString(want));
    // The victim's call returned before it failed, on CUDA's callback thread: the caller
    // reads why through the communicator (this thread recorded no failure of its own).
    if (r == kVictim && result == cclSuccess) {
      const std::string why = cclGetLastError(comms[r]);
      if (why.find("injected failure of a compute batch") == std::string::npos)
        throw std::runtime_error("the victim's cclGetLastError(comm) does not say why its call failed: \"" + why +
                                 "\"");
      if (std::string(cclGetLastError(nullptr)).find("injected failure") != std::string::npos)
        throw std::runtime_error("cclGetLastError(NULL) gave the communicator's failure, not this thread's");
    }
  }));
  simDriver().failComputeOn.store(-1);
  expectNoneThrew(runRanks(2, [&](int r) { CCL_OK(cclCommAbort(comms[r])); }));
}

// What each rank's compressed allreduce ends with (its result, else its asynchronous
// error) when rank `victim`'s decode refuses a corrupted stream, after a good call that
// leaves valid streams of the same shape in every buffer (another call's values: a peer that
// took them would end with a wrong sum and no error). `hostOf(r)`: rank r's host identity
// (nodes), or null. A rank whose call succeeds has "(largest error E)" appended.
std::vector<std::string> failedCallOutcomes(int ranks, int victim, const std::function<const char*(int)>& hostOf) {
  const size_t count = size_t{1} << 16;
  const cclCompression_t int8 = codecOf(cclCodecInt8);
  cclUniqueId id;
  if (cclGetUniqueId(&id) != cclSuccess) throw std::runtime_error("cclGetUniqueId failed");
  std::vector<cclComm_t> comms(ranks, nullptr);
  std::deque<SimBuffer> a, b;  // SimBuffer does not move
  for (int r = 0; r < ranks; ++r) {
    const int device = r == victim ? 1 : 0;
    a.emplace_back(count * 4, device);
    b.emplace_back(count * 4, device);
  }
  std::vector<std::string> outcome(ranks);
  std::atomic<int> ready{0};
  const float sum = static_cast<float>(ranks * (ranks + 1) / 2);
  expectNoneThrew(runRanks(ranks, [&](int r) {
    SimDriver::currentDevice = r == victim ? 1 : 0;  // the victim alone on its device
    cclConfig_t config = CCL_CONFIG_INITIALIZER;
    config.timeoutMs = 60000;
    config.hostId = hostOf(r);
    CCL_OK(cclCommInitRankConfig(&comms[r], ranks, id, r, &config));
    SimStream stream(SimDriver::currentDevice);
    auto allReduce = [&](float value) {
      std::fill_n(a[r].as<float>(), count, value * float(r + 1));
      const cclResult_t result =
          cclAllReduceEx(a[r].p, b[r].p, count, cclFloat32, cclSum, comms[r], stream.s, &int8, nullptr);
      stream.synchronize();
      cclResult_t async = cclSuccess;
      CCL_OK(cclCommGetAsyncError(comms[r], &async));
      return result != cclSuccess ? result : async;
    };
    CCL_OK(allReduce(1.0f));
    for (size_t i = 0; i < count; i += 997)
      if (std::fabs(b[r].as<float>()[i] - sum) > 0.01f * sum) throw std::runtime_error("the good call's sum is wrong");
    // Every rank's first call has ended before the victim's next decode is armed.
    if (++ready == ranks) simDriver().refuseDecodeOn.store(1);
    while (ready.load() < ranks) std::this_thread::yield();
    const cclResult_t failed = allReduce(10.0f);
    outcome[r] = cclGetErrorString(failed);
    if (failed == cclSuccess) {
      float worst = 0;
      for (size_t i = 0; i < count; ++i) worst = std::max(worst, std::fabs(b[r].as<float>()[i] - 10.0f * sum));
      outcome[r] += " (largest error " + std::to_string(worst) + ")";
    }
  }));
  for (int r = 0; r < ranks; ++r) std::printf("rank %d: %s\n", r, outcome[r].c_str());
  if (simDriver().refuseDecodeOn.exchange(-1) != -1) ADD_FAILURE() << "the victim decoded nothing";
  expectNoneThrew(runRanks(ranks, [&](int r) { CCL_OK(cclCommAbort(comms[r])); }));
  return outcome;
}

// A rank whose call failed mid-way (here its decode refused a corrupted stream) sends its
// peers nothing they would take for its data: every stream it would have encoded after the
// failure says so (codec::failedSenderHeader), so each peer's call fails with a remote error
// instead of decoding what the failed call left in its buffers.
TEST(DeviceCalls, AFailedCallSendsNoStreamItsPeersTake) {
  constexpr int kVictim = 1;
  const std::vector<std::string> outcome = failedCallOutcomes(3, kVictim, [](int) { return nullptr; });
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(outcome[r], cclGetErrorString(r == kVictim ? cclInvalidUsage : cclRemoteError)) << "rank " << r;
}

// The same across two nodes of two ranks (the hierarchical allreduce: the codec only across
// nodes, uncompressed inside them). The victim's node peer takes the victim's share
// uncompressed, with no header to say it is stale: the link tells the peers before it
// would send such bytes (StreamLink::tellPeers), so that call fails too.
TEST(DeviceCalls, AFailedCallSendsNoUncompressedBytesItsPeersTake) {
  ScopedEnv hier("CCL_ALGO", "hier");
  constexpr int kVictim = 1;
  const std::vector<std::string> outcome =
      failedCallOutcomes(4, kVictim, [](int r) { return r < 2 ? "node a" : "node b"; });
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(outcome[r], cclGetErrorString(r == kVictim ? cclInvalidUsage : cclRemoteError)) << "rank " << r;
}

// A call returns before it has run; a host call of the same communicator runs after it.
TEST(DeviceCalls, AsynchronousAndOrderedBeforeHostCalls) {
  auto comms = makeComms(2);
  expectNoneThrew(runRanks(2, [&](int r) {
    const size_t count = 50000;
    SimBuffer a(count * 4, 0), b(count * 4, 0);
    for (size_t i = 0; i < count; ++i) a.as<float>()[i] = float(r + 1);
    SimStream stream(0);
    std::atomic<bool> open{false};
    simDriver().streamOf(stream.s).enqueue([&] {
      while (!open.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    CCL_OK(cclAllReduce(a.p, b.p, count, cclFloat32, cclSum, comms[r], stream.s));
    // Held by the gate: the call cannot have run.
    ccl::coll::Stream& s = simDriver().streamOf(stream.s);
    if (s.reached(s.record())) throw std::runtime_error("the device call ran before its stream reached it");
    std::thread opener([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      open.store(true);
    });
    std::vector<float> h(count, float(10 * (r + 1))), ho(count);
    CCL_OK(cclAllReduce(h.data(), ho.data(), count, cclFloat32, cclSum, comms[r], nullptr));
    // The host call returned: the device call before it has run.
    for (size_t i = 0; i < count; i += 997)
      if (b.as<float>()[i] != 3.f) throw std::runtime_error("the host call returned before the device call ran");
    for (size_t i = 0; i < count; i += 997)
      if (ho[i] != 30.f) throw std::runtime_error("wrong host result");
    opener.join();
    stream.synchronize();
  }));
  destroy(comms);
}

TEST(DeviceCalls, TheCommunicatorsDevice) {
  auto on1 = makeComms(1, 1);
  int device = -7;
  ASSERT_EQ(cclCommCuDevice(on1[0], &device), cclSuccess);
  EXPECT_EQ(device, 1);
  {
    SimBuffer a(4096, 1), b(4096, 1), zero(4096, 0);
    SimStream s1(1);
    EXPECT_EQ(cclAllReduce(a.p, b.p, 1024, cclFloat32, cclSum, on1[0], s1.s), cclSuccess) << cclGetLastError(nullptr);
    s1.synchronize();
    expectRefused(cclAllReduce(zero.p, b.p, 1024, cclFloat32, cclSum, on1[0], s1.s), cclInvalidUsage, "device is 1",
                  "device-0 memory on a device-1 communicator");
  }
  cclComm_t child = nullptr;
  ASSERT_EQ(cclCommSplit(on1[0], 0, 0, &child, nullptr), cclSuccess) << cclGetLastError(nullptr);
  ASSERT_EQ(cclCommCuDevice(child, &device), cclSuccess);
  EXPECT_EQ(device, 1) << "a split communicator keeps its parent's device";
  ASSERT_EQ(cclCommDestroy(child), cclSuccess);
  destroy(on1);

  // Without a device driver (a build without CUDA): no device, device memory refused.
  ccl::coll::setDeviceDriver(nullptr);
  auto none = makeComms(1);
  ccl::coll::setDeviceDriver(&simDriver());
  ASSERT_EQ(cclCommCuDevice(none[0], &device), cclSuccess);
  EXPECT_EQ(device, -1);
  {
    SimBuffer a(4096, 0), b(4096, 0);
    SimStream s0(0);
    expectRefused(cclAllReduce(a.p, b.p, 1024, cclFloat32, cclSum, none[0], s0.s), cclInvalidUsage, "has no device",
                  "device memory on a communicator without a device");
  }
  destroy(none);
}

// The steady path allocates nothing: once a call of the largest size has run, twenty more
// calls enqueued while the stream is held (the host running far ahead of the device, as in a
// training or perf loop) take no device or staging memory, and the staged link never holds
// more than its ring of blocks however far ahead the host is (it waits for the stream instead).
TEST(DeviceCalls, TheSteadyPathAllocatesNothingAndStagingIsBounded) {
  constexpr int n = 2;
  constexpr size_t count = 40000;                        // several waves of CCL_CHUNK_BYTES=8192
  const long before = simDriver().counts().stagingLive;  // earlier tests' launcher flags stay
  auto comms = makeComms(n);
  const cclCompression_t codec = codecOf(cclCodecInt8);
  std::vector<SimDriver::Counts> warm(n), after(n);
  std::atomic<int> warmed{0};
  expectNoneThrew(runRanks(n, [&](int r) {
    SimBuffer a(count * 4, 0), b(count * 4, 0);
    for (size_t i = 0; i < count; ++i) a.as<float>()[i] = float(r + 1);
    SimStream stream(0);
    for (int k = 0; k < 2; ++k)
      CCL_OK(cclAllReduceEx(a.p, b.p, count, cclFloat32, cclSum, comms[r], stream.s, &codec, nullptr));
    stream.synchronize();
    // Both ranks warm before either counts: their allocations share the driver's counters.
    warmed.fetch_add(1);
    while (warmed.load() < n) std::this_thread::yield();
    if (r == 0) simDriver().resetStagingPeak();
    warm[r] = simDriver().counts();
    std::atomic<bool> open{false};
    simDriver().streamOf(stream.s).enqueue([&] {
      while (!open.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    std::thread opener([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      open.store(true);
    });
    for (int k = 0; k < 20; ++k)
      CCL_OK(cclAllReduceEx(a.p, b.p, count, cclFloat32, cclSum, comms[r], stream.s, &codec, nullptr));
    opener.join();
    stream.synchronize();
    expectNoAsyncError(comms[r]);
    for (size_t i = 0; i < count; i += 991)
      if (std::fabs(b.as<float>()[i] - 3.f) > 0.05f) throw std::runtime_error("wrong result");
    after[r] = simDriver().counts();
  }));
  const SimDriver::Counts end = simDriver().counts();
  EXPECT_EQ(end.deviceAllocs, std::max(warm[0].deviceAllocs, warm[1].deviceAllocs)) << "device memory was allocated";
  EXPECT_EQ(end.stagingAllocs, std::max(warm[0].stagingAllocs, warm[1].stagingAllocs))
      << "staging memory was allocated";
  // Per rank: the link's flags, its ring of blocks and the launcher's flag.
  EXPECT_LE(end.stagingPeak - before, n * (2 + static_cast<long>(ccl::coll::TransportLink::kStagingBlocks)));
  destroy(comms);
}

// Staging is bounded in bytes (CCL_STAGING_BYTES): calls whose waves are many times a
// block go as groups that fit one (sub-waves, split alike at both ends), so the ranks' rings,
// and the rings they outgrew on the way (kept for later links), stay within twice the bound
// per rank, where whole waves take many times that; the sums are right either way.
TEST(DeviceCalls, StagingStaysWithinItsByteBound) {
  constexpr int n = 4;
  constexpr size_t bound = size_t{1} << 20;
  const size_t count = (size_t{6} << 20) / 4;
  for (const bool bounded : {true, false}) {
    setenv("CCL_STAGING_BYTES", bounded ? "1M" : "1G", 1);
    setenv("CCL_CHUNK_BYTES", "64K", 1);
    const size_t live = simDriver().counts().stagingLiveBytes;  // kept by earlier tests' links
    simDriver().resetStagingPeak();
    auto comms = makeComms(n);
    for (const char* algo : {"twoshot", "ring"}) {
      setenv("CCL_ALGO", algo, 1);
      expectNoneThrew(runRanks(n, [&](int r) {
        SimBuffer a(count * 4, 0), b(count * 4, 0);
        for (size_t i = 0; i < count; ++i) a.as<float>()[i] = static_cast<float>((i * 3 + r) % 11) - 5.f;
        SimStream stream(0);
        const cclCompression_t codec = codecOf(cclCodecInt8);
        CCL_OK(cclAllReduceEx(a.p, b.p, count, cclFloat32, cclSum, comms[r], stream.s, &codec, nullptr));
        stream.synchronize();
        expectNoAsyncError(comms[r]);
        // int8 per block of 128: each of the n inputs (|x| <= 5) within 5/127 of itself.
        for (size_t i = 0; i < count; ++i) {
          float want = 0;
          for (int q = 0; q < n; ++q) want += static_cast<float>((i * 3 + q) % 11) - 5.f;
          if (std::fabs(b.as<float>()[i] - want) > 0.2f)
            throw std::runtime_error(std::string(algo) + ": element " + std::to_string(i) + " is " +
                                     std::to_string(b.as<float>()[i]) + ", not about " + std::to_string(want));
        }
      }));
    }
    const size_t peak = simDriver().counts().stagingPeakBytes - live;
    if (bounded) {
      EXPECT_LE(peak, n * (2 * bound + 4096)) << "staging of " << n << " ranks";
    } else {
      EXPECT_GT(peak, n * (2 * bound + 4096)) << "whole waves should need more than the bound";
    }
    destroy(comms);
  }
  unsetenv("CCL_ALGO");
  unsetenv("CCL_STAGING_BYTES");
  setenv("CCL_CHUNK_BYTES", "8192", 1);
}

// Calls whose staging outgrows the ring remake it with stream-ordered memory calls only: a
// synchronous pinned allocation or free waits for the whole GPU on CUDA, where the other
// rank's flag kernel may be waiting for this rank's next wave (the stall two ranks on one H200
// hit at the first 64 MiB compressed all-reduce). After the first call, which makes the
// link's flags, no synchronous staging call happens until the communicators go.
TEST(DeviceCalls, StagingGrowsWithStreamOrderedMemoryOnly) {
  constexpr int n = 2;
  auto comms = makeComms(n);
  std::vector<long> syncAfterFirst(n);
  std::atomic<int> first{0};
  expectNoneThrew(runRanks(n, [&](int r) {
    SimStream stream(0);
    for (const bool compressed : {false, true}) {
      const cclCompression_t codec = codecOf(compressed ? cclCodecInt8 : cclCodecNone);
      for (size_t count = 256; count <= (size_t{1} << 17); count *= 4) {
        SimBuffer a(count * 4, 0), b(count * 4, 0);
        for (size_t i = 0; i < count; ++i) a.as<float>()[i] = float(r + 1);
        CCL_OK(cclAllReduceEx(a.p, b.p, count, cclFloat32, cclSum, comms[r], stream.s, &codec, nullptr));
        stream.synchronize();
        if (count == 256 && !compressed) {
          first.fetch_add(1);
          while (first.load() < n) std::this_thread::yield();
          syncAfterFirst[r] = simDriver().counts().stagingSyncCalls;
        }
        for (size_t i = 0; i < count; i += 97)
          if (std::fabs(b.as<float>()[i] - 3.f) > 0.05f) throw std::runtime_error("wrong result");
      }
    }
    expectNoAsyncError(comms[r]);
  }));
  const long grown = simDriver().counts().stagingSyncCalls - std::max(syncAfterFirst[0], syncAfterFirst[1]);
  EXPECT_EQ(grown, 0) << "synchronous staging allocations or frees while the ranks' calls ran";
  destroy(comms);
}

// A 64 MiB int8 two-shot all-reduce of two ranks (1 MiB chunks: 32 streams each way per
// wave) enqueues tens of commands per rank, not thousands, and one host function: every
// wave's encodes are one batch, its transfers one staged group (batched copies, stream
// flags), its decodes one batch, and the call's checks one host function at its end. The
// communicator's statistics count what the device received. Once warm, the call makes no
// call that waits for the device, on its enqueue path or on any other thread (the proxy).
TEST(DeviceCalls, ACompressedCallIsTensOfCommandsAndOneHostFunction) {
  setenv("CCL_ALGO", "twoshot", 1);
  setenv("CCL_CHUNK_BYTES", "1M", 1);
  constexpr int n = 2;
  auto comms = makeComms(n);
  const size_t count = (size_t{64} << 20) / 4;
  const cclCompression_t codec = codecOf(cclCodecInt8);
  std::vector<SimDriver::Commands> call(n);
  std::vector<cclStats_t> before(n, CCL_STATS_INITIALIZER), after(n, CCL_STATS_INITIALIZER);
  std::atomic<int> warm{0};
  SimDriver::Counts start{}, end{};
  expectNoneThrew(runRanks(n, [&](int r) {
    SimBuffer a(count * 4, 0), b(count * 4, 0);
    for (size_t i = 0; i < count; ++i) a.as<float>()[i] = static_cast<float>((i + r) % 7) - 3.f;
    SimStream stream(0);
    CCL_OK(cclAllReduceEx(a.p, b.p, count, cclFloat32, cclSum, comms[r], stream.s, &codec, nullptr));
    stream.synchronize();
    warm.fetch_add(1);
    while (warm.load() < n) std::this_thread::yield();
    if (r == 0) start = simDriver().counts();
    warm.fetch_add(1);
    while (warm.load() < 2 * n) std::this_thread::yield();
    CCL_OK(cclCommGetStats(comms[r], &before[r]));
    const SimDriver::Commands first = SimDriver::threadCommands();
    CCL_OK(cclAllReduceEx(a.p, b.p, count, cclFloat32, cclSum, comms[r], stream.s, &codec, nullptr));
    const SimDriver::Commands last = SimDriver::threadCommands();
    call[r] = {last.hostFunctions - first.hostFunctions, last.device - first.device, last.waits - first.waits,
               last.records - first.records, last.blocking - first.blocking};
    stream.synchronize();
    CCL_OK(cclCommGetStats(comms[r], &after[r]));
    expectNoAsyncError(comms[r]);
    for (size_t i = 0; i < count; i += 4099) {
      const float want = static_cast<float>((i + 0) % 7) - 3.f + static_cast<float>((i + 1) % 7) - 3.f;
      if (std::fabs(b.as<float>()[i] - want) > 0.1f) throw std::runtime_error("wrong sum at " + std::to_string(i));
    }
    warm.fetch_add(1);
    while (warm.load() < 3 * n) std::this_thread::yield();
    if (r == 0) end = simDriver().counts();
    warm.fetch_add(1);  // the streams go (and synchronise) after the reading
    while (warm.load() < 4 * n) std::this_thread::yield();
  }));
  for (int r = 0; r < n; ++r) {
    EXPECT_LE(call[r].total(), 40) << "rank " << r << ": " << call[r].device << " device commands, " << call[r].waits
                                   << " waits, " << call[r].records << " events, " << call[r].hostFunctions
                                   << " host functions";
    EXPECT_EQ(call[r].hostFunctions, 1) << "rank " << r;
    EXPECT_EQ(call[r].blocking, 0) << "rank " << r << ": the enqueue path waited for the device";
    EXPECT_EQ(static_cast<long>(after[r].deviceCommands - before[r].deviceCommands), call[r].total()) << "rank " << r;
    EXPECT_EQ(after[r].deviceHostFunctions - before[r].deviceHostFunctions, 1u) << "rank " << r;
  }
  // Each rank's one synchronize; nothing else, on any thread, waited for the device.
  EXPECT_EQ(end.blockingCalls - start.blockingCalls, n);
  EXPECT_EQ(end.deviceAllocs, start.deviceAllocs);
  EXPECT_EQ(end.stagingAllocs, start.stagingAllocs);
  destroy(comms);
  unsetenv("CCL_ALGO");
  setenv("CCL_CHUNK_BYTES", "8192", 1);
}

// A call on a stream being captured into a graph is refused before anything is enqueued, with
// a message; the communicator takes calls again once the capture has ended.
TEST(DeviceCalls, CallsUnderGraphCaptureAreRefused) {
  auto comms = makeComms(1);
  SimBuffer a(4096, 0), b(4096, 0);
  SimStream stream(0);
  simDriver().setCapturing(stream.s, true);
  expectRefused(cclAllReduce(a.p, b.p, 1024, cclFloat32, cclSum, comms[0], stream.s), cclInvalidUsage, "captured",
                "a call under stream capture");
  simDriver().setCapturing(stream.s, false);
  for (size_t i = 0; i < 1024; ++i) a.as<float>()[i] = float(i);
  ASSERT_EQ(cclAllReduce(a.p, b.p, 1024, cclFloat32, cclSum, comms[0], stream.s), cclSuccess)
      << cclGetLastError(nullptr);
  stream.synchronize();
  EXPECT_EQ(b.as<float>()[1000], 1000.f);
  expectNoAsyncError(comms[0]);
  destroy(comms);
}

// Where the stand-in NCCL (fake_nccl.c) saw each rank make its communicator.
std::mutex gNotedMutex;
std::vector<int> gNotedDevice;

}  // namespace
}  // namespace ccltest

extern "C" __attribute__((visibility("default"))) void ccltest_note_nccl_init(int rank, int nranks) {
  std::lock_guard<std::mutex> lock(ccltest::gNotedMutex);
  ccltest::gNotedDevice.resize(static_cast<size_t>(nranks), -9);
  ccltest::gNotedDevice[static_cast<size_t>(rank)] = ccltest::SimDriver::currentDevice;
}

namespace ccltest {
namespace {

// CCL_DEVICE_TRANSPORT=nccl makes NVIDIA's communicator of each rank on the rank's device, as
// NCCL takes the current one: cclCommInitAll's ranks on their devlist entries (not on the
// worker thread's device 0), and a split's on the parent's device whatever is current on the
// thread that splits.
TEST(DeviceCalls, NcclCommunicatorsAreMadeOnTheRanksDevices) {
  setenv("CCL_DEVICE_TRANSPORT", "nccl", 1);
  setenv("CCL_NCCL_LIBRARY", CCL_TEST_FAKE_NCCL, 1);
  SimDriver::currentDevice = 0;
  std::vector<cclComm_t> comms(2, nullptr);
  const int devlist[2] = {1, 0};
  ASSERT_EQ(cclCommInitAll(comms.data(), 2, devlist), cclSuccess) << cclGetLastError(nullptr);
  {
    std::lock_guard<std::mutex> lock(gNotedMutex);
    EXPECT_EQ(gNotedDevice, (std::vector<int>{1, 0})) << "NCCL's communicators were made on other devices";
    gNotedDevice.clear();
  }
  for (int r = 0; r < 2; ++r) {
    int device = -7;
    ASSERT_EQ(cclCommCuDevice(comms[r], &device), cclSuccess);
    EXPECT_EQ(device, devlist[r]);
  }
  std::vector<cclComm_t> children(2, nullptr);
  expectNoneThrew(runRanks(2, [&](int r) {
    SimDriver::currentDevice = 0;  // not rank 0's device
    CCL_OK(cclCommSplit(comms[r], 0, r, &children[r], nullptr));
  }));
  {
    std::lock_guard<std::mutex> lock(gNotedMutex);
    EXPECT_EQ(gNotedDevice, (std::vector<int>{1, 0})) << "a split's NCCL communicators were made on other devices";
    gNotedDevice.clear();
  }
  destroy(children);
  destroy(comms);
  unsetenv("CCL_DEVICE_TRANSPORT");
  unsetenv("CCL_NCCL_LIBRARY");
}

// CCL_DEVICE_TRANSPORT=auto (the default) makes NVIDIA's communicators where every rank can:
// its driver runs NCCL, the library loads, no two ranks share a GPU. Otherwise the calls are
// staged, and the communicator is made all the same.
TEST(DeviceCalls, AutoDeviceTransportUsesNcclWhereEveryRankCan) {
  unsetenv("CCL_DEVICE_TRANSPORT");
  setenv("CCL_NCCL_LIBRARY", CCL_TEST_FAKE_NCCL, 1);
  auto noted = [] {
    std::lock_guard<std::mutex> lock(gNotedMutex);
    std::vector<int> got = gNotedDevice;
    gNotedDevice.clear();
    return got;
  };
  noted();
  simDriver().pretendNccl = true;
  std::vector<cclComm_t> comms(2, nullptr);
  const int devlist[2] = {1, 0};
  ASSERT_EQ(cclCommInitAll(comms.data(), 2, devlist), cclSuccess) << cclGetLastError(nullptr);
  EXPECT_EQ(noted(), (std::vector<int>{1, 0})) << "two ranks on two devices: NVIDIA's communicators";
  destroy(comms);
  auto shared = makeComms(2, 0);
  EXPECT_TRUE(noted().empty()) << "two ranks on one GPU: staged, no NCCL communicator";
  destroy(shared);
  setenv("CCL_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
  comms.assign(2, nullptr);
  ASSERT_EQ(cclCommInitAll(comms.data(), 2, devlist), cclSuccess) << cclGetLastError(nullptr);
  EXPECT_TRUE(noted().empty()) << "no library: staged";
  destroy(comms);
  simDriver().pretendNccl = false;
  setenv("CCL_NCCL_LIBRARY", CCL_TEST_FAKE_NCCL, 1);
  comms.assign(2, nullptr);
  ASSERT_EQ(cclCommInitAll(comms.data(), 2, devlist), cclSuccess) << cclGetLastError(nullptr);
  EXPECT_TRUE(noted().empty()) << "a driver that does not run NCCL: staged";
  destroy(comms);
  unsetenv("CCL_NCCL_LIBRARY");
}

// One rank over NVIDIA's NCCL (CCL_DEVICE_TRANSPORT=auto picks it for a rank alone on its
// GPU): its plans send nothing, so no link can decline their codec. The device call keeps
// the host path's codec round trip, byte for byte (a plan that moved 0 bytes was taken for
// one whose streams are not smaller than its data, and ran uncompressed).
TEST(DeviceCalls, OneRankOverNcclKeepsTheHostPathsCodec) {
  unsetenv("CCL_DEVICE_TRANSPORT");
  setenv("CCL_NCCL_LIBRARY", CCL_TEST_FAKE_NCCL, 1);
  {
    std::lock_guard<std::mutex> lock(gNotedMutex);
    gNotedDevice.clear();
  }
  simDriver().pretendNccl = true;
  SimOps ops;
  expectDeviceMatchesHost(1, ops);
  simDriver().pretendNccl = false;
  unsetenv("CCL_NCCL_LIBRARY");
  std::lock_guard<std::mutex> lock(gNotedMutex);
  EXPECT_FALSE(gNotedDevice.empty()) << "the device communicator did not use NVIDIA's NCCL";
  gNotedDevice.clear();
}

// CCL_DEVICE_TRANSPORT: an unknown value fails the communicator's creation; nccl with a
// library that cannot be loaded fails it on every rank, naming the library, rather than
// leaving ranks waiting in NCCL's init; without a device the setting changes nothing.
TEST(DeviceCalls, DeviceTransportSetting) {
  auto initAll = [](int n, std::vector<cclResult_t>& results) -> std::vector<std::string> {
    cclUniqueId id;
    if (cclGetUniqueId(&id) != cclSuccess) throw std::runtime_error("cclGetUniqueId failed");
    std::vector<cclComm_t> comms(n, nullptr);
    std::vector<std::string> messages(n);
    results.assign(n, cclSuccess);
    expectNoneThrew(runRanks(n, [&](int r) {
      results[r] = cclCommInitRank(&comms[r], n, id, r);
      messages[r] = cclGetLastError(nullptr);
      if (comms[r]) cclCommDestroy(comms[r]);
    }));
    return messages;
  };
  std::vector<cclResult_t> results;
  setenv("CCL_DEVICE_TRANSPORT", "bogus", 1);
  auto messages = initAll(1, results);
  EXPECT_EQ(results[0], cclInvalidArgument);
  EXPECT_NE(messages[0].find("CCL_DEVICE_TRANSPORT"), std::string::npos) << messages[0];

  setenv("CCL_DEVICE_TRANSPORT", "nccl", 1);
  setenv("CCL_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
  messages = initAll(2, results);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r], cclSystemError) << "rank " << r;
    EXPECT_NE(messages[r].find("CCL_DEVICE_TRANSPORT=nccl"), std::string::npos) << messages[r];
  }

  ccl::coll::setDeviceDriver(nullptr);  // a communicator without a device: staged or nccl alike
  messages = initAll(2, results);
  ccl::coll::setDeviceDriver(&simDriver());
  for (int r = 0; r < 2; ++r) EXPECT_EQ(results[r], cclSuccess) << messages[r];
  unsetenv("CCL_DEVICE_TRANSPORT");
  unsetenv("CCL_NCCL_LIBRARY");
}

}  // namespace
}  // namespace ccltest

int main(int argc, char** argv) {
  // Small chunks: several waves per call. Every size compressed. A stuck call fails soon.
  setenv("CCL_CHUNK_BYTES", "8192", 1);
  setenv("CCL_CODEC_MIN_BYTES", "0", 1);
  setenv("CCL_TIMEOUT", "30", 0);
  ccl::coll::setDeviceDriver(&ccltest::simDriver());
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
