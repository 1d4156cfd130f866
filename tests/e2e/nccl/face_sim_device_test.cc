// SPDX-License-Identifier: BSD-3-Clause
// The NCCL face on device buffers of the simulated device (tests/harness/sim_device.h), as a GPU
// node meets it: 8 ranks as processes on 2 nodes of 4 (CCL_HOST_ID), CCL_CODEC=int8 and
// nothing else. Each child is one rank; it registers the simulated device with ccl's api and
// calls the face with NVIDIA's types, as an NCCL program does (no real NCCL: device calls take
// ccl's device path, the one the face hands compressed calls to). It checks, reading ccl's
// statistics through the face's communicator:
// - all-gather and broadcast are exact (CCL_COMPRESS's default leaves them out) and counted
//   as not_listed; all-reduce is compressed;
// - the all-reduce takes the hierarchical plan: every byte sent inside a node is uncompressed
//   (raw = wire), the bytes across nodes compressed (wire < raw); CCL_ALGO=ring compresses
//   inside the nodes too, as it does on host buffers; CCL_CHUNK_BYTES changes the commands a
//   device call enqueues; with CCL_LINK_MODEL the cost model chooses the device call's
//   algorithm, priced with the device kit's kernels;
// - each reason a call goes uncompressed is counted (small, dtype, op, collective, one_node),
//   and the face's destroy-time summary prints them (CCL_DEBUG=INFO, checked by ctest);
// - calls on stream 0 (the legacy default stream) run, the all-reduce compressed.
// FaceLoss: a rank lost while the others are idle shows in ncclCommGetAsyncError only once a
// call has met the loss (thread ranks on host buffers).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "nccl/comm.h"  // the face's communicator, for ccl's statistics behind it
#include "nccl/config_compat.h"
#include "rank_threads.h"
#include "sim_device.h"

namespace ccltest {
namespace {

constexpr int kRanks = 8, kPerNode = 4;
constexpr size_t kCount = (size_t{1} << 16) + 37;  // 256 KiB of floats: above CCL_CODEC_MIN_BYTES

struct Fail {
  std::string what;
};

void require(bool ok, const std::string& what) {
  if (!ok) throw Fail{what};
}

void nccl(ncclResult_t r, const char* what, ncclComm_t comm = nullptr) {
  require(r == ncclSuccess, std::string(what) + ": " + ncclGetErrorString(r) + " (" + ncclGetLastError(comm) + ")");
}

cclStats_t statsOf(ncclComm_t comm) {
  cclStats_t s = CCL_STATS_INITIALIZER;
  require(cclCommGetStats(comm->ccl, &s) == cclSuccess, "cclCommGetStats");
  return s;
}

// What one call moved, from two readings of the statistics.
struct Moved {
  unsigned long long raw = 0, wire = 0, acrossRaw = 0, acrossWire = 0, compressed = 0, commands = 0;
  unsigned long long insideRaw() const { return raw - acrossRaw; }
  unsigned long long insideWire() const { return wire - acrossWire; }
};
Moved between(const cclStats_t& a, const cclStats_t& b, cclOpKind_t kind) {
  Moved m;
  m.raw = b.op[kind].rawBytes - a.op[kind].rawBytes;
  m.wire = b.op[kind].wireBytes - a.op[kind].wireBytes;
  m.compressed = b.op[kind].compressedCalls - a.op[kind].compressedCalls;
  m.acrossRaw = b.acrossRawBytes - a.acrossRawBytes;
  m.acrossWire = b.acrossWireBytes - a.acrossWireBytes;
  m.commands = b.deviceCommands - a.deviceCommands;
  return m;
}

// Device memory and a stream of the simulated device.
struct Device {
  SimDriver& sim = simDriver();
  cclStream_t stream = sim.newStream(0);
  ~Device() { sim.destroyStream(stream); }
  cudaStream_t cuda() const { return reinterpret_cast<cudaStream_t>(stream); }
  void sync() { sim.streamOf(stream).synchronize(); }
};

struct Buffer {
  float* p;
  explicit Buffer(size_t n) : p(static_cast<float*>(simDriver().alloc(n * sizeof(float), 0))) {}
  ~Buffer() { simDriver().release(p); }
};

float input(int rank, size_t i) { return static_cast<float>((rank + 1) * static_cast<int>(i % 13) - 6); }

// NCCL's stream 0 (the legacy default stream, PyTorch's current stream unless it set one),
// which the face hands to ccl as CUDA's explicit handle of that stream.
void syncLegacy() { simDriver().streamOf(SimDriver::legacyStream()).synchronize(); }

// A device all-reduce of kCount floats on `comm` (on stream 0 when `legacy`); returns what it
// moved. Checks the sum within 2 % of the largest (int8), or exactly when `exact`.
Moved allReduce(ncclComm_t comm, int rank, Device& dev, bool exact, bool legacy = false) {
  Buffer in(kCount), out(kCount);
  for (size_t i = 0; i < kCount; ++i) in.p[i] = input(rank, i);
  const cclStats_t before = statsOf(comm);
  nccl(ncclAllReduce(in.p, out.p, kCount, ncclFloat32, ncclSum, comm, legacy ? nullptr : dev.cuda()), "ncclAllReduce",
       comm);
  if (legacy)
    syncLegacy();
  else
    dev.sync();
  const int n = comm->nranks;
  double worst = 0, largest = 0;
  for (size_t i = 0; i < kCount; ++i) {
    double want = 0;
    for (int r = 0; r < n; ++r) want += input(r, i);
    largest = std::fmax(largest, std::fabs(want));
    worst = std::fmax(worst, std::fabs(out.p[i] - want));
  }
  require(exact ? worst == 0 : worst <= 0.02 * largest,
          "allreduce: largest error " + std::to_string(worst) + " of " + std::to_string(largest));
  return between(before, statsOf(comm), cclOpAllReduce);
}

void rankBody(int rank, const ncclUniqueId& id) {
  Device dev;
  setenv("CCL_CODEC_SHM", "on", 1);  // host buffers between processes of one machine compress too
  ncclComm_t comm = nullptr;
  nccl(ncclCommInitRank(&comm, kRanks, id, rank), "ncclCommInitRank");
  require(comm->real == nullptr, "no real NCCL was expected");

  // 1. The default: the hierarchical plan. Inside a node uncompressed, across compressed.
  const Moved hier = allReduce(comm, rank, dev, false);
  require(hier.compressed == 1, "the all-reduce was not compressed");
  require(hier.insideRaw() > 0 && hier.insideWire() == hier.insideRaw(),
          "inside a node: raw " + std::to_string(hier.insideRaw()) + " wire " + std::to_string(hier.insideWire()));
  require(hier.acrossRaw > 0 && hier.acrossWire < hier.acrossRaw,
          "across nodes: raw " + std::to_string(hier.acrossRaw) + " wire " + std::to_string(hier.acrossWire));

  // 2. All-gather and broadcast: exact, not compressed, counted as not listed.
  {
    const cclStats_t before = statsOf(comm);
    Buffer in(kCount), out(kCount * kRanks), bc(kCount);
    for (size_t i = 0; i < kCount; ++i) in.p[i] = input(rank, i) + 0.123f * static_cast<float>(i % 7);
    for (size_t i = 0; i < kCount; ++i) bc.p[i] = rank == 3 ? in.p[i] : -1.0f;
    nccl(ncclAllGather(in.p, out.p, kCount, ncclFloat32, comm, dev.cuda()), "ncclAllGather", comm);
    nccl(ncclBroadcast(bc.p, bc.p, kCount, ncclFloat32, 3, comm, dev.cuda()), "ncclBroadcast", comm);
    dev.sync();
    for (int r = 0; r < kRanks; ++r)
      for (size_t i = 0; i < kCount; ++i) {
        const float want = input(r, i) + 0.123f * static_cast<float>(i % 7);
        require(std::memcmp(&out.p[static_cast<size_t>(r) * kCount + i], &want, 4) == 0,
                "allgather is not bit-identical at rank " + std::to_string(r) + " element " + std::to_string(i));
        if (r == 3)
          require(std::memcmp(&bc.p[i], &want, 4) == 0, "broadcast is not bit-identical at " + std::to_string(i));
      }
    const cclStats_t after = statsOf(comm);
    require(after.op[cclOpAllGather].compressedCalls == before.op[cclOpAllGather].compressedCalls &&
                after.op[cclOpBroadcast].compressedCalls == before.op[cclOpBroadcast].compressedCalls,
            "allgather or broadcast was compressed");
    require(after.uncompressed[cclUncompressedNotListed] - before.uncompressed[cclUncompressedNotListed] == 2,
            "allgather and broadcast were not counted as not_listed");
  }

  // 3. Each reason the default codec does not apply, one call each.
  {
    const cclStats_t before = statsOf(comm);
    Buffer f(kCount), o(kCount);
    for (size_t i = 0; i < kCount; ++i) f.p[i] = 1.0f;
    nccl(ncclAllReduce(f.p, o.p, 100, ncclFloat32, ncclSum, comm, dev.cuda()), "small", comm);
    nccl(ncclAllReduce(f.p, o.p, kCount, ncclInt32, ncclSum, comm, dev.cuda()), "dtype", comm);
    nccl(ncclAllReduce(f.p, o.p, kCount, ncclFloat32, ncclMax, comm, dev.cuda()), "op", comm);
    nccl(ncclReduce(f.p, o.p, kCount, ncclFloat32, ncclSum, 0, comm, dev.cuda()), "collective", comm);
    dev.sync();
    const cclStats_t after = statsOf(comm);
    for (cclUncompressedReason_t r :
         {cclUncompressedSmall, cclUncompressedDataType, cclUncompressedOp, cclUncompressedCollective})
      require(after.uncompressed[r] - before.uncompressed[r] == 1,
              std::string("reason ") + cclUncompressedReasonName(r) + " was not counted once");
  }

  // 4. CCL_ALGO=ring (read when a communicator is made, here a split of all ranks): a flat
  // ring compresses inside the nodes too, on device buffers as on host buffers.
  setenv("CCL_ALGO", "ring", 1);
  ncclComm_t ring = nullptr;
  nccl(ncclCommSplit(comm, 0, rank, &ring, nullptr), "ncclCommSplit (ring)", comm);
  unsetenv("CCL_ALGO");
  const Moved flat = allReduce(ring, rank, dev, false);
  // (The last rank of a node sends only across: its ring successor is on the other node.)
  require(rank % kPerNode == kPerNode - 1 || flat.insideWire() < flat.insideRaw(),
          "CCL_ALGO=ring: the bytes inside a node were not compressed");
  {
    std::vector<float> in(kCount), out(kCount);
    for (size_t i = 0; i < kCount; ++i) in[i] = input(rank, i);
    for (ncclComm_t c : {comm, ring}) {
      const cclStats_t before = statsOf(c);
      nccl(ncclAllReduce(in.data(), out.data(), kCount, ncclFloat32, ncclSum, c, nullptr), "host allreduce", c);
      const Moved host = between(before, statsOf(c), cclOpAllReduce);
      const Moved device = c == comm ? hier : flat;
      require(host.insideRaw() == device.insideRaw() &&
                  (host.insideWire() < host.insideRaw()) == (device.insideWire() < device.insideRaw()),
              "the host and device plans differ in what they send inside a node");
    }
  }

  // 5. CCL_CHUNK_BYTES: smaller chunks, more waves, more commands per device call.
  setenv("CCL_CHUNK_BYTES", "8K", 1);
  ncclComm_t small = nullptr;
  nccl(ncclCommSplit(comm, 0, rank, &small, nullptr), "ncclCommSplit (8K chunks)", comm);
  unsetenv("CCL_CHUNK_BYTES");
  const Moved chunked = allReduce(small, rank, dev, false);
  require(chunked.commands > hier.commands, "CCL_CHUNK_BYTES=8K enqueued " + std::to_string(chunked.commands) +
                                                " commands, the default " + std::to_string(hier.commands));

  // 6. One node (a split by node, CCL_CODEC_SHM=auto): device calls stay uncompressed there.
  setenv("CCL_CODEC_SHM", "auto", 1);
  ncclComm_t node = nullptr;
  nccl(ncclCommSplit(comm, rank / kPerNode, rank, &node, nullptr), "ncclCommSplit", comm);
  {
    const cclStats_t before = statsOf(node);
    const Moved m = allReduce(node, rank % kPerNode, dev, true);
    require(m.compressed == 0, "a device all-reduce inside one node was compressed");
    require(statsOf(node).uncompressed[cclUncompressedOneNode] - before.uncompressed[cclUncompressedOneNode] == 1,
            "one_node was not counted");
  }
  // 7. With links to price on (CCL_LINK_MODEL), the device all-reduce's algorithm is the cost
  // model's choice, priced with the device kit's kernels (cclStats_t.autoChosen counts it).
  setenv("CCL_LINK_MODEL", "across=10:3,inside=3:450", 1);
  ncclComm_t priced = nullptr;
  nccl(ncclCommSplit(comm, 0, rank, &priced, nullptr), "ncclCommSplit (priced)", comm);
  unsetenv("CCL_LINK_MODEL");
  {
    const cclStats_t before = statsOf(priced);
    const Moved m = allReduce(priced, rank, dev, false);
    require(m.compressed == 1, "the priced device all-reduce was not compressed");
    require(statsOf(priced).autoChosen[cclOpAllReduce] - before.autoChosen[cclOpAllReduce] == 1,
            "the device all-reduce's algorithm was not the cost model's choice");
  }
  // 8. Stream 0: NCCL orders such a call on the legacy default stream, as PyTorch issues a
  // blocking collective on its current stream; without NVIDIA's NCCL it runs on ccl's device
  // path, compressed, and so do sends and receives.
  require(allReduce(comm, rank, dev, false, true).compressed == 1, "the all-reduce on stream 0 was not compressed");
  {
    Buffer sent(kCount), got(kCount);
    for (size_t i = 0; i < kCount; ++i) sent.p[i] = input(rank, i);
    const int to = (rank + 1) % kRanks, from = (rank + kRanks - 1) % kRanks;
    nccl(ncclGroupStart(), "ncclGroupStart");
    nccl(ncclSend(sent.p, kCount, ncclFloat32, to, comm, nullptr), "ncclSend on stream 0", comm);
    nccl(ncclRecv(got.p, kCount, ncclFloat32, from, comm, nullptr), "ncclRecv on stream 0", comm);
    nccl(ncclGroupEnd(), "ncclGroupEnd");
    syncLegacy();
    for (size_t i = 0; i < kCount; ++i)
      require(got.p[i] == input(from, i), "ncclRecv on stream 0: element " + std::to_string(i));
  }
  for (ncclComm_t c : {priced, node, small, ring}) nccl(ncclCommDestroy(c), "ncclCommDestroy");
  // The destroy-time summary (CCL_DEBUG=INFO) of rank 0 names every reason counted above.
  if (rank != 0) return nccl(ncclCommDestroy(comm), "ncclCommDestroy");
  char path[] = "/tmp/ccl-face-summary-XXXXXX";
  const int fd = mkstemp(path);
  require(fd >= 0, "mkstemp");
  std::fflush(stderr);
  const int saved = dup(2);
  dup2(fd, 2);
  const ncclResult_t destroyed = ncclCommDestroy(comm);
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::string log(static_cast<size_t>(lseek(fd, 0, SEEK_END)), '\0');
  const ssize_t got = pread(fd, log.data(), log.size(), 0);
  close(fd);
  unlink(path);
  std::fputs(log.c_str(), stderr);
  nccl(destroyed, "ncclCommDestroy");
  require(got == static_cast<ssize_t>(log.size()), "reading the summary");
  // not_listed: the all-gather and broadcast of 2, the send and receive of 8, and the face's
  // own exchange at init (a broadcast).
  require(log.find("NCCL face: uncompressed rank=0 nranks=8 not_listed=5 collective=1 small=1 dtype=1 op=1") !=
              std::string::npos,
          "the summary does not list the reasons");
  require(log.find("NCCL face: across nodes rank=0 nranks=8 raw=") != std::string::npos,
          "the summary does not give the bytes across nodes");
}

// One child process per rank (the parent's rendezvous serves their init); a child exits 0
// when its checks passed.
TEST(FaceSimDevice, TwoNodesOfFourRanks) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  const std::vector<int> codes = runRankProcesses(
      kRanks,
      [&](int rank) {
        setenv("CCL_HOST_ID", rank < kPerNode ? "node-a" : "node-b", 1);
        ccl::coll::setDeviceDriver(&simDriver());
        try {
          rankBody(rank, id);
        } catch (const Fail& f) {
          std::fprintf(stderr, "rank %d: %s\n", rank, f.what.c_str());
          return 1;
        }
        return 0;
      },
      std::chrono::seconds(240));
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r << " (its stderr says why)";
}

// A rank lost while the others are idle (here it aborts its communicator) is news to ccl's
// watcher at once, and ccl's own async error says so (ccl.h). NVIDIA's NCCL reports a dead
// peer only through a call that meets it, and PyTorch's watchdog ends the process on any async
// error, where the survivors would shrink and go on: through the face they see ncclSuccess
// until a call fails for the loss, then ncclRemoteError, and shrink without the lost rank.
TEST(FaceLoss, AnIdleLossShowsInTheAsyncErrorOnceACallMeetsIt) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  constexpr int kLost = 2;
  ccltest::expectNoneThrew(ccltest::runRanks(3, [&](int rank) {
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclCommInitRank(&comm, 3, id, rank), ncclSuccess) << ncclGetLastError(nullptr);
    if (rank == kLost) {
      EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
      return;
    }
    cclResult_t seen = cclSuccess;
    for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
         seen == cclSuccess && std::chrono::steady_clock::now() < deadline;
         std::this_thread::sleep_for(std::chrono::milliseconds(5)))
      ASSERT_EQ(cclCommGetAsyncError(comm->ccl, &seen), cclSuccess);
    ASSERT_EQ(seen, cclRemoteError) << "ccl's watcher did not find the lost rank";
    ncclResult_t state = ncclInternalError;
    ASSERT_EQ(ncclCommGetAsyncError(comm, &state), ncclSuccess);
    EXPECT_EQ(state, ncclSuccess) << "an idle loss reached the face's async error before any call met it";
    // The watcher's words reach ncclGetLastError with the communicator (NCCL's string may be
    // "a result of previously launched asynchronous operations"), not without it.
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("rank 2 is gone"), std::string::npos) << ncclGetLastError(comm);
    EXPECT_EQ(std::string(ncclGetLastError(nullptr)).find("rank 2 is gone"), std::string::npos);
    float x = 1.0f;
    EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr), ncclRemoteError);
    ASSERT_EQ(ncclCommGetAsyncError(comm, &state), ncclSuccess);
    EXPECT_EQ(state, ncclRemoteError) << "the call that met the loss left no async error";
    int exclude[] = {kLost};
    ncclComm_t small = nullptr;
    ASSERT_EQ(ncclCommShrink(comm, exclude, 1, &small, nullptr, NCCL_SHRINK_ABORT), ncclSuccess)
        << ncclGetLastError(comm);
    float y = static_cast<float>(rank + 1);
    EXPECT_EQ(ncclAllReduce(&y, &y, 1, ncclFloat32, ncclSum, small, nullptr), ncclSuccess) << ncclGetLastError(small);
    EXPECT_EQ(y, 3.0f);
    EXPECT_EQ(ncclCommDestroy(small), ncclSuccess);
    EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
  }));
}

// The caller's ncclConfig_t reaches the real communicator: every field as it was set (a later
// NCCL's longer layout included), but blocking, and strings that outlive the caller's.
TEST(FaceConfig, TheCallersFieldsGoToTheRealCommunicator) {
  struct Longer {
    ncclConfig_t base;
    int later[4];  // fields of a later NCCL than the one the face was built with
  } user{NCCL_CONFIG_INITIALIZER, {11, 12, 13, 14}};
  user.base.size = sizeof(Longer);
  user.base.blocking = 0;
  user.base.cgaClusterSize = 4;
  user.base.maxCTAs = 16;
  user.base.trafficClass = 3;
  std::string net = "ib0", name = "trainer";
  user.base.netName = net.c_str();
  user.base.commName = name.c_str();
  const ccl::nccl::FaceConfig fc = ccl::nccl::readConfig(&user.base);
  net = "changed";  // the caller's strings may go once the call returned
  name = "changed";
  std::vector<unsigned char> bytes = ccl::nccl::realConfig(fc);
  ASSERT_EQ(bytes.size(), sizeof(Longer));
  Longer got;
  std::memcpy(&got, bytes.data(), sizeof(got));
  EXPECT_EQ(got.base.size, sizeof(Longer));
  EXPECT_EQ(got.base.blocking, 1) << "made blocking on the face's own thread";
  EXPECT_EQ(got.base.cgaClusterSize, 4);
  EXPECT_EQ(got.base.maxCTAs, 16);
  EXPECT_EQ(got.base.trafficClass, 3);
  EXPECT_EQ(got.base.minCTAs, NCCL_CONFIG_UNDEF_INT);
  EXPECT_STREQ(got.base.netName, "ib0");
  EXPECT_STREQ(got.base.commName, "trainer");
  for (int i = 0; i < 4; ++i) EXPECT_EQ(got.later[i], 11 + i);
  EXPECT_TRUE(ccl::nccl::realConfig(ccl::nccl::readConfig(nullptr)).empty()) << "no config: ncclCommInitRank";
}

}  // namespace
}  // namespace ccltest

int main(int argc, char** argv) {
  // No NVIDIA library: device buffers take ccl's device path (the simulated device's).
  setenv("CCL_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
  setenv("CCL_CODEC", "int8", 1);
  setenv("CCL_TIMEOUT", "60", 0);
  setenv("CCL_DEBUG", "INFO", 1);  // the face's destroy-time summary
  setenv("CCL_DEBUG_SUBSYS", "^transport", 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
