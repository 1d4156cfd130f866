// SPDX-License-Identifier: BSD-3-Clause
// The NCCL API beyond the collectives: versions, errors, ncclConfig_t layouts and
// non-blocking mode, PreMulSum and ncclAvg, groups, split/shrink/revoke, registration, the
// device API's host functions and the route to the real NCCL.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "nccl_test_util.h"
#include "raw_enum_calls.h"
#include "scoped_env.h"

namespace nccl_test {
namespace {

std::vector<float> allReduceFloats(ncclComm_t comm, const std::vector<float>& in, ncclRedOp_t op) {
  std::vector<float> out(in.size(), -1.0f);
  EXPECT_EQ(ncclAllReduce(in.data(), out.data(), in.size(), ncclFloat32, op, comm, nullptr), ncclSuccess)
      << ncclGetLastError(comm);
  return out;
}

// The face reports the newer ABI it implements (nccl_2_30_test.cc checks which one).
TEST(NcclApi, VersionIsNotOlderThanTheHeaders) {
  int v = 0;
  ASSERT_EQ(ncclGetVersion(&v), ncclSuccess);
  EXPECT_GE(v, NCCL_VERSION_CODE);
  EXPECT_EQ(ncclGetVersion(nullptr), ncclInvalidArgument);
}

TEST(NcclApi, CallsAreServedByCcl) {
  Dl_info info{};
  ASSERT_NE(dladdr(reinterpret_cast<void*>(&ncclAllReduce), &info), 0);
  ASSERT_NE(info.dli_fname, nullptr);
  EXPECT_EQ(std::string(info.dli_fname).find("/usr/local/cuda"), std::string::npos) << info.dli_fname;
}

TEST(NcclApi, ErrorsHaveMessages) {
  float x = 0;
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, nullptr, nullptr), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("ncclAllReduce"), std::string::npos);
  EXPECT_STRNE(ncclGetErrorString(ncclInvalidUsage), "");
  EXPECT_EQ(ncclCommDestroy(nullptr), ncclSuccess);
  runRanks(2, [](int, ncclComm_t comm) {
    float y = 1;
    EXPECT_EQ(ncclAllReduce(&y, &y, 1, static_cast<ncclDataType_t>(ncclNumTypes), ncclSum, comm, nullptr),
              ncclInvalidArgument);
    EXPECT_EQ(ncclAllReduce(&y, &y, 1, ncclFloat32, static_cast<ncclRedOp_t>(ncclNumOps + 3), comm, nullptr),
              ncclInvalidArgument);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("was not created"), std::string::npos);
    EXPECT_EQ(ncclBroadcast(&y, &y, 1, ncclFloat32, 5, comm, nullptr), ncclInvalidArgument);
    int device = 0;
    ASSERT_EQ(ncclCommCuDevice(comm, &device), ncclSuccess);
    EXPECT_EQ(device, -1);
  });
}

// Enum arguments outside their types (16 is past ncclDataType_t's values, -1 below every
// enum's), as a C caller passes them: refused with ncclInvalidArgument and a message naming
// the value, before anything reads them as the enum (under UBSan, a load of an invalid enum
// value ended the process).
TEST(NcclApi, EnumValuesOutsideTheirTypesAreRefused) {
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitAll(&comm, 1, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  float x = 1.0f, y = 0.0f;
  const auto refused = [&](ncclResult_t r, const std::string& what) {
    EXPECT_EQ(r, ncclInvalidArgument) << what;
    EXPECT_NE(std::string(ncclGetLastError(comm)).find(what), std::string::npos) << ncclGetLastError(comm);
  };
  for (const int bad : {16, -1}) {
    SCOPED_TRACE(bad);
    const std::string type = "datatype " + std::to_string(bad) + " is not an ncclDataType_t";
    refused(rawAllReduce(&x, &y, 1, bad, ncclSum, comm), type);
    refused(rawBroadcast(&x, &y, 1, bad, 0, comm), type);
    refused(rawSend(&x, 1, bad, 0, comm), type);
    ncclRedOp_t op;
    refused(rawRedOpCreatePreMulSum(&op, &x, bad, ncclScalarHostImmediate, comm), type);
    refused(rawRedOpCreatePreMulSum(&op, &x, ncclFloat32, bad == 16 ? 2 : bad, comm),
            "residence " + std::to_string(bad == 16 ? 2 : bad) + " is not an ncclScalarResidence_t");
    EXPECT_STREQ(rawGetErrorString(bad), "unknown result code");
  }
  refused(rawAllReduce(&x, &y, 1, ncclFloat32, -1, comm), "op -1 is not an ncclRedOp_t");
  refused(rawRedOpDestroy(-1, comm), "op -1 is not an ncclRedOp_t");
  EXPECT_EQ(y, 0.0f);  // nothing ran
  ASSERT_EQ(rawAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm), ncclSuccess) << ncclGetLastError(comm);
  EXPECT_EQ(y, 1.0f);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// The NCCL 2.14 layout, the oldest with a config: four fields fewer than 2.28's.
struct ConfigV21400 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
};

TEST(NcclConfig, OlderSmallerLayoutIsReadUpToItsSize) {
  // The old struct sits in a larger buffer of garbage: reading past `size` would take a
  // wild commName pointer and an invalid splitShare.
  alignas(ncclConfig_t) unsigned char storage[sizeof(ncclConfig_t) + 64];
  std::memset(storage, 0xab, sizeof(storage));
  auto* old = reinterpret_cast<ConfigV21400*>(storage);
  *old = ConfigV21400{sizeof(ConfigV21400),  0xcafebeef, 21403, 0, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,
                      NCCL_CONFIG_UNDEF_INT, nullptr};
  runRanks(
      3,
      [](int rank, ncclComm_t comm) {
        auto out = allReduceFloats(comm, {1.0f * rank, 2.0f}, ncclSum);
        EXPECT_EQ(out[0], 3.0f);
        EXPECT_EQ(out[1], 6.0f);
      },
      reinterpret_cast<ncclConfig_t*>(storage));
}

TEST(NcclConfig, InvalidConfigsAreRefused) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = nullptr;
  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  bad.magic = 0;
  EXPECT_EQ(ncclCommInitRankConfig(&comm, 1, id, 0, &bad), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("NCCL_CONFIG_INITIALIZER"), std::string::npos);
  ncclConfig_t blocking = NCCL_CONFIG_INITIALIZER;
  blocking.blocking = 2;
  EXPECT_EQ(ncclCommInitRankConfig(&comm, 1, id, 0, &blocking), ncclInvalidArgument);
  ncclConfig_t tiny = NCCL_CONFIG_INITIALIZER;
  tiny.size = 8;
  EXPECT_EQ(ncclCommInitRankConfig(&comm, 1, id, 0, &tiny), ncclInvalidArgument);
  EXPECT_EQ(comm, nullptr);
}

TEST(NcclConfig, NonBlockingInitReportsProgressUntilReady) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = "nonblocking";
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::atomic<int> sawProgress{0};
  runThreads(3, [&](int rank) {
    ncclComm_t comm = nullptr;
    ncclResult_t r = ncclCommInitRankConfig(&comm, 3, id, rank, &config);
    ASSERT_TRUE(r == ncclInProgress || r == ncclSuccess) << r;
    ASSERT_NE(comm, nullptr);  // the handle is usable for polling at once
    if (r == ncclInProgress) ++sawProgress;
    ASSERT_EQ(waitReady(comm), ncclSuccess);
    auto out = allReduceFloats(comm, {1.0f}, ncclSum);
    EXPECT_EQ(out[0], 3.0f);
    EXPECT_EQ(ncclCommFinalize(comm), ncclSuccess);
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  });
  // Rank 0 cannot finish before the other ranks join, so at least one saw ncclInProgress.
  EXPECT_GT(sawProgress.load(), 0);
}

TEST(NcclRedOps, PreMulSumWithHostAndDeviceResidence) {
  runRanks(3, [](int rank, ncclComm_t comm) {
    float two = 2.0f;
    ncclRedOp_t op;
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, &two, ncclFloat32, ncclScalarHostImmediate, comm), ncclSuccess);
    EXPECT_GE(static_cast<int>(op), static_cast<int>(ncclNumOps));
    two = 100.0f;  // host-immediate: the value was read at creation
    auto out = allReduceFloats(comm, {1.0f + rank, 0.5f}, op);
    EXPECT_EQ(out[0], 12.0f);  // 2 * (1 + 2 + 3)
    EXPECT_EQ(out[1], 3.0f);
    EXPECT_EQ(ncclRedOpDestroy(op, comm), ncclSuccess);
    EXPECT_EQ(ncclAllReduce(out.data(), out.data(), 1, ncclFloat32, op, comm, nullptr), ncclInvalidArgument);

    // ncclScalarDevice: dereferenced when each collective runs (host memory without CUDA).
    int32_t scale = 3;
    ncclRedOp_t dev;
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&dev, &scale, ncclInt32, ncclScalarDevice, comm), ncclSuccess);
    int32_t in = rank + 1, res = 0;
    ASSERT_EQ(ncclAllReduce(&in, &res, 1, ncclInt32, dev, comm, nullptr), ncclSuccess);
    EXPECT_EQ(res, 18);
    scale = -1;
    ASSERT_EQ(ncclReduce(&in, &res, 1, ncclInt32, dev, 0, comm, nullptr), ncclSuccess);
    if (rank == 0) {
      EXPECT_EQ(res, -6);
    }
    // An op is valid only for its datatype.
    float f = 1;
    EXPECT_EQ(ncclAllReduce(&f, &f, 1, ncclFloat32, dev, comm, nullptr), ncclInvalidArgument);
    EXPECT_EQ(ncclRedOpDestroy(dev, comm), ncclSuccess);
    EXPECT_EQ(ncclRedOpDestroy(ncclSum, comm), ncclInvalidArgument);
  });
}

TEST(NcclRedOps, PreMulSumNarrowTypesReduceScatterAndGroups) {
  runRanks(4, [](int rank, ncclComm_t comm) {
    __half half = __half(0.5f);
    ncclRedOp_t op;
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, &half, ncclFloat16, ncclScalarHostImmediate, comm), ncclSuccess);
    auto send = filled(ncclFloat16, 8, [&](size_t i) { return 2.0 * (rank + i); });
    auto recv = filled(ncclFloat16, 2, [](size_t) { return -1; });
    ASSERT_EQ(ncclReduceScatter(send.data(), recv.data(), 2, ncclFloat16, op, comm, nullptr), ncclSuccess);
    for (size_t i = 0; i < 2; ++i) EXPECT_EQ(get(ncclFloat16, recv.data(), i), 6.0 + 4.0 * (2 * rank + i));
    // Inside a group the pre-multiplied copies must live until ncclGroupEnd.
    std::vector<float> a(64, 1.0f), b(64, 2.0f);
    float two = 2.0f;
    ncclRedOp_t fop;
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&fop, &two, ncclFloat32, ncclScalarHostImmediate, comm), ncclSuccess);
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(a.data(), a.data(), a.size(), ncclFloat32, fop, comm, nullptr), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(b.data(), b.data(), b.size(), ncclFloat32, fop, comm, nullptr), ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(comm);
    EXPECT_EQ(a[63], 8.0f);
    EXPECT_EQ(b[0], 16.0f);
    EXPECT_EQ(ncclRedOpDestroy(op, comm), ncclSuccess);
    EXPECT_EQ(ncclRedOpDestroy(fop, comm), ncclSuccess);
  });
}

TEST(NcclRedOps, OpBelongsToItsCommunicator) {
  runRanks(2, [](int rank, ncclComm_t comm) {
    ncclComm_t other = nullptr;
    ASSERT_EQ(ncclCommSplit(comm, 0, rank, &other, nullptr), ncclSuccess);
    float s = 2.0f;
    ncclRedOp_t op;
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, &s, ncclFloat32, ncclScalarHostImmediate, comm), ncclSuccess);
    float x = 1;
    EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, op, other, nullptr), ncclInvalidArgument);
    EXPECT_EQ(ncclRedOpDestroy(op, other), ncclInvalidArgument);
    EXPECT_EQ(ncclRedOpDestroy(op, comm), ncclSuccess);
    EXPECT_EQ(ncclCommDestroy(other), ncclSuccess);
  });
}

// NCCL's contract for ncclScalarDevice: the scalar is dereferenced when the collective runs,
// which inside a group is at its end. The face read it (and the input it scales) when the call
// was queued, where a plain op's input is read at the group's end.
TEST(NcclRedOps, DeviceScalarAndInputAreReadWhenTheGroupRuns) {
  runRanks(2, [](int rank, ncclComm_t comm) {
    float scale = 2.0f;
    ncclRedOp_t op;
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, &scale, ncclFloat32, ncclScalarDevice, comm), ncclSuccess);
    float in = -100.0f, out = 0.0f, plainIn = -100.0f, plainOut = 0.0f;
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(&in, &out, 1, ncclFloat32, op, comm, nullptr), ncclSuccess) << ncclGetLastError(comm);
    ASSERT_EQ(ncclAllReduce(&plainIn, &plainOut, 1, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
    // Written after the calls, before the group runs them; the op may go once the call returned.
    scale = 10.0f;
    in = plainIn = 1.0f + rank;
    EXPECT_EQ(ncclRedOpDestroy(op, comm), ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(comm);
    EXPECT_EQ(plainOut, 3.0f);
    EXPECT_EQ(out, 30.0f);  // 10 * (1 + 2)
  });
}

TEST(NcclGroups, OneThreadCreatesAndDrivesSeveralRanks) {
  constexpr int n = 4;
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comms[n] = {};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; ++r) ASSERT_EQ(ncclCommInitRank(&comms[r], n, id, r), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<std::vector<double>> bufs(n, std::vector<double>(5));
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < 5; ++i) bufs[r][i] = r * 10.0 + i;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(ncclAllReduce(bufs[r].data(), bufs[r].data(), 5, ncclFloat64, ncclMax, comms[r], nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (int r = 0; r < n; ++r) EXPECT_EQ(bufs[r][2], 32.0);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

// ncclCommAbort on a non-blocking communicator whose init cannot finish (its peer never
// comes) returns at once, as NVIDIA's abort ends such an init; it waited for CCL_TIMEOUT.
TEST(NcclConfig, AnAbortEndsAHangingNonBlockingInit) {
  ccltest::ScopedEnv timeout("CCL_TIMEOUT", "30");
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = nullptr;
  const ncclResult_t r = ncclCommInitRankConfig(&comm, 2, id, 0, &config);  // rank 1 never joins
  ASSERT_EQ(r, ncclInProgress) << ncclGetLastError(nullptr);
  ncclResult_t state = ncclSuccess;
  ASSERT_EQ(ncclCommGetAsyncError(comm, &state), ncclSuccess);
  EXPECT_EQ(state, ncclInProgress);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(ncclCommAbort(comm), ncclSuccess) << ncclGetLastError(nullptr);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(took, 10.0) << "the abort waited for the init's CCL_TIMEOUT (30 s)";
}

// A watchdog thread aborts a communicator whose creation the owner's open group holds: the
// owner's group end skips it, reading nothing freed (under ASan, a use-after-free before).
TEST(NcclGroups, AnAbortFromAnotherThreadOfACommunicatorTheGroupCreates) {
  constexpr int n = 2;
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comms[n] = {};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; ++r) ASSERT_EQ(ncclCommInitRank(&comms[r], n, id, r), ncclSuccess);
  ncclResult_t aborted = ncclInternalError;
  std::thread watchdog([&] { aborted = ncclCommAbort(comms[0]); });
  watchdog.join();
  EXPECT_EQ(aborted, ncclSuccess) << ncclGetLastError(nullptr);
  // Rank 1's creation completes, or fails when the abort came while rank 0's was still running
  // (its end aborts what it made, as a rank lost during an init would): both are fine here.
  const ncclResult_t end = ncclGroupEnd();
  EXPECT_TRUE(end == ncclSuccess || end == ncclRemoteError) << end << ": " << ncclGetLastError(nullptr);
  if (end == ncclSuccess) {
    int count = 0;
    ASSERT_EQ(ncclCommCount(comms[1], &count), ncclSuccess);
    EXPECT_EQ(count, n);
  }
  EXPECT_EQ(ncclCommAbort(comms[1]), ncclSuccess);  // its peer is gone: abort, not destroy
}

TEST(NcclGroups, NonBlockingInitsInOneGroup) {
  constexpr int n = 3;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comms[n] = {};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; ++r) ASSERT_EQ(ncclCommInitRankConfig(&comms[r], n, id, r, &config), ncclSuccess);
  const ncclResult_t end = ncclGroupEnd();
  EXPECT_TRUE(end == ncclSuccess || end == ncclInProgress) << end;
  for (ncclComm_t c : comms) ASSERT_EQ(waitReady(c), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<std::vector<float>> bufs(n, std::vector<float>(3, 1.5f));
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(ncclAllReduce(bufs[r].data(), bufs[r].data(), 3, ncclFloat32, ncclSum, comms[r], nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < n; ++r) EXPECT_EQ(bufs[r][1], 4.5f);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommAbort(c), ncclSuccess);
}

TEST(NcclGroups, InitAllAndAverage) {
  constexpr int n = 3;
  ncclComm_t comms[n] = {};
  ASSERT_EQ(ncclCommInitAll(comms, n, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<std::vector<int64_t>> bufs(n, std::vector<int64_t>(4));
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < 4; ++i) bufs[r][i] = r * 3 + static_cast<int64_t>(i);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(ncclAllReduce(bufs[r].data(), bufs[r].data(), 4, ncclInt64, ncclAvg, comms[r], nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(bufs[r][i], (9 + 3 * static_cast<int64_t>(i)) / 3);
  for (int r = 0; r < n; ++r) {
    int count = 0, rank = -1;
    ASSERT_EQ(ncclCommCount(comms[r], &count), ncclSuccess);
    ASSERT_EQ(ncclCommUserRank(comms[r], &rank), ncclSuccess);
    EXPECT_EQ(count, n);
    EXPECT_EQ(rank, r);
    EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
  }
}

TEST(NcclGroups, SimulateEndRunsNothing) {
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclGroupSimulateEnd(&info), ncclSuccess);
  EXPECT_GE(info.estimatedTime, 0.0f);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);  // the group is closed
  runRanks(2, [](int rank, ncclComm_t comm) {
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    float x = 1.0f + rank;
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
    EXPECT_EQ(ncclGroupSimulateEnd(&sim), ncclInvalidUsage);
    EXPECT_EQ(x, 1.0f + rank);  // nothing ran
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
    EXPECT_EQ(x, 3.0f);
  });
}

// NCCL cancels a group one of whose calls failed, and its end returns the error: whether the
// face refused the call (an op destroyed) or ccl's communicator did (buffers that overlap
// other than in place).
TEST(NcclGroups, ACallThatFailsFailsTheWholeGroup) {
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitAll(&comm, 1, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  float a[4] = {1, 2, 3, 4}, b[4] = {-7, -7, -7, -7}, scalar = 2;
  ncclRedOp_t gone;
  ASSERT_EQ(ncclRedOpCreatePreMulSum(&gone, &scalar, ncclFloat32, ncclScalarHostImmediate, comm), ncclSuccess);
  ASSERT_EQ(ncclRedOpDestroy(gone, comm), ncclSuccess);
  for (const bool faceRefuses : {true, false}) {
    SCOPED_TRACE(faceRefuses ? "the face refuses" : "ccl refuses");
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    EXPECT_EQ(ncclAllReduce(a, b, 4, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
    if (faceRefuses)
      EXPECT_EQ(ncclAllReduce(a, b, 4, ncclFloat32, gone, comm, nullptr), ncclInvalidArgument);
    else
      EXPECT_EQ(ncclAllReduce(a, a + 1, 3, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidArgument);
    EXPECT_EQ(ncclAllReduce(a, b, 4, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
    EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
    EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("a call of the group failed"), std::string::npos)
        << ncclGetLastError(nullptr);
    EXPECT_EQ(b[0], -7.0f);  // nothing of the group ran
  }
  // The next group is a group of its own.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(a, b, 4, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  EXPECT_EQ(b[3], 4.0f);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// One thread driving both ranks splits them in a group, one rank with NCCL_SPLIT_NOCOLOR: that
// rank's part of the split can only finish at the group's end, once the other rank's is issued.
TEST(NcclGroups, OneThreadSplitsWithNoColorInAGroup) {
  constexpr int n = 2;
  ncclComm_t comms[n] = {};
  ASSERT_EQ(ncclCommInitAll(comms, n, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  ncclComm_t subs[n] = {comms[0], comms[1]};  // not NULL, so that the NULL below is the split's
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclCommSplit(comms[0], NCCL_SPLIT_NOCOLOR, 0, &subs[0], nullptr), ncclSuccess)
      << ncclGetLastError(nullptr);
  EXPECT_EQ(ncclCommSplit(comms[1], 5, 0, &subs[1], nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));  // not a timeout's end
  EXPECT_EQ(subs[0], nullptr);
  int count = 0;
  ASSERT_EQ(ncclCommCount(subs[1], &count), ncclSuccess);
  EXPECT_EQ(count, 1);
  EXPECT_EQ(ncclCommDestroy(subs[1]), ncclSuccess);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

TEST(NcclLifecycle, SplitWithNoColor) {
  runRanks(5, [](int rank, ncclComm_t comm) {
    ncclComm_t sub = nullptr;
    const int color = rank == 4 ? NCCL_SPLIT_NOCOLOR : rank % 2;
    ASSERT_EQ(ncclCommSplit(comm, color, -rank, &sub, nullptr), ncclSuccess) << ncclGetLastError(comm);
    if (rank == 4) {
      EXPECT_EQ(sub, nullptr);
      return;
    }
    int count = 0, subRank = -1;
    ASSERT_EQ(ncclCommCount(sub, &count), ncclSuccess);
    ASSERT_EQ(ncclCommUserRank(sub, &subRank), ncclSuccess);
    EXPECT_EQ(count, 2);
    EXPECT_EQ(subRank, rank < 2 ? 1 : 0);  // key -rank reverses the order
    auto out = allReduceFloats(sub, {static_cast<float>(rank)}, ncclSum);
    EXPECT_EQ(out[0], color == 0 ? 2.0f : 4.0f);
    EXPECT_EQ(ncclCommDestroy(sub), ncclSuccess);
  });
}

TEST(NcclLifecycle, ShrinkWithoutTheExcludedRank) {
  runRanks(4, [](int rank, ncclComm_t comm) {
    if (rank == 2) return;  // the excluded rank takes no part
    int exclude[] = {2};
    ncclComm_t small = nullptr;
    ASSERT_EQ(ncclCommShrink(comm, exclude, 1, &small, nullptr, NCCL_SHRINK_DEFAULT), ncclSuccess)
        << ncclGetLastError(comm);
    int count = 0, newRank = -1;
    ASSERT_EQ(ncclCommCount(small, &count), ncclSuccess);
    ASSERT_EQ(ncclCommUserRank(small, &newRank), ncclSuccess);
    EXPECT_EQ(count, 3);
    EXPECT_EQ(newRank, rank < 2 ? rank : 2);
    auto out = allReduceFloats(small, {static_cast<float>(rank)}, ncclSum);
    EXPECT_EQ(out[0], 4.0f);  // 0 + 1 + 3
    EXPECT_EQ(ncclCommDestroy(small), ncclSuccess);
  });
}

TEST(NcclLifecycle, RevokeStopsNewWorkAndScalableInit) {
  ncclUniqueId ids[2];
  ASSERT_EQ(ncclGetUniqueId(&ids[0]), ncclSuccess);
  ASSERT_EQ(ncclGetUniqueId(&ids[1]), ncclSuccess);
  runThreads(2, [&](int rank) {
    ncclComm_t comm = nullptr;
    EXPECT_EQ(ncclCommInitRankScalable(&comm, 2, rank, 3, ids, nullptr), ncclInvalidArgument);  // nId > nranks
    ASSERT_EQ(ncclCommInitRankScalable(&comm, 2, rank, 2, ids, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
    auto out = allReduceFloats(comm, {1.0f}, ncclSum);
    EXPECT_EQ(out[0], 2.0f);
    EXPECT_EQ(ncclCommRevoke(comm, 1), ncclInvalidArgument);
    ASSERT_EQ(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT), ncclSuccess);
    float x = 0;
    EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidUsage);
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  });
}

// A call that makes a communicator and fails leaves NULL in the caller's handle, as NVIDIA's
// NCCL does: a caller that then destroys or aborts what it holds destroys nothing. The face
// left the caller's old value there (here a live communicator: destroying it twice).
TEST(NcclLifecycle, AFailedCreationLeavesANullHandle) {
  ncclComm_t live = nullptr;
  ASSERT_EQ(ncclCommInitAll(&live, 1, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = live;
  EXPECT_EQ(ncclCommInitRank(&comm, 2, id, 5), ncclInvalidArgument);  // a bad rank
  EXPECT_EQ(comm, nullptr);
  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  bad.magic = 0;
  comm = live;
  EXPECT_EQ(ncclCommInitRankConfig(&comm, 1, id, 0, &bad), ncclInvalidArgument);
  EXPECT_EQ(comm, nullptr);
  // A blocking creation that fails (an id no rendezvous can be found with): what it made is
  // aborted, and no handle of it reaches the caller.
  ncclUniqueId garbage;
  std::memset(&garbage, 0, sizeof(garbage));
  comm = live;
  EXPECT_NE(ncclCommInitRank(&comm, 1, garbage, 0), ncclSuccess);
  ASSERT_EQ(comm, nullptr);  // else the destroy below would destroy `live`, and the abort free it twice
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
  comm = live;
  EXPECT_EQ(ncclCommSplit(live, -5, 0, &comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(comm, nullptr);
  EXPECT_EQ(ncclCommDestroy(live), ncclSuccess);
}

// NVIDIA's NCCL answers a second ncclCommFinalize with ncclInvalidArgument; the face said
// ncclInvalidUsage (ccl's answer) without a real communicator and NVIDIA's with one.
TEST(NcclLifecycle, ASecondFinalizeIsAnInvalidArgument) {
  runRanks(2, [](int rank, ncclComm_t comm) {
    float a = 1.0f + rank, b = 0.0f;
    // Refused while this thread's group holds an operation of it, and possible after its end.
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(&a, &b, 1, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
    EXPECT_EQ(ncclCommFinalize(comm), ncclInvalidUsage);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(comm);
    EXPECT_EQ(b, 3.0f);
    ASSERT_EQ(ncclCommFinalize(comm), ncclSuccess) << ncclGetLastError(comm);
    EXPECT_EQ(ncclCommFinalize(comm), ncclInvalidArgument);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("already finalized"), std::string::npos)
        << ncclGetLastError(comm);
  });
}

// nccl.h: once revoked, a communicator may still be split, shrunk or destroyed (and queried),
// and finalizing it is invalid.
TEST(NcclLifecycle, ARevokedCommunicatorIsQueriedAndSplitNotFinalized) {
  runRanks(2, [](int rank, ncclComm_t comm) {
    ASSERT_EQ(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT), ncclSuccess) << ncclGetLastError(comm);
    int count = 0, me = -1;
    EXPECT_EQ(ncclCommCount(comm, &count), ncclSuccess) << ncclGetLastError(comm);
    EXPECT_EQ(ncclCommUserRank(comm, &me), ncclSuccess) << ncclGetLastError(comm);
    EXPECT_EQ(count, 2);
    EXPECT_EQ(me, rank);
    EXPECT_EQ(ncclCommFinalize(comm), ncclInvalidUsage);
    ncclComm_t fresh = nullptr;
    ASSERT_EQ(ncclCommSplit(comm, 0, rank, &fresh, nullptr), ncclSuccess) << ncclGetLastError(comm);
    auto out = allReduceFloats(fresh, {1.0f + rank}, ncclSum);
    EXPECT_EQ(out[0], 3.0f);
    EXPECT_EQ(ncclCommDestroy(fresh), ncclSuccess);
  });
}

// A destroy the open group still needs is refused, and the handle stays valid: the group's end
// runs its operation, and the destroy after it succeeds (it used to free the handle first).
TEST(NcclLifecycle, ADestroyRefusedInAGroupKeepsTheCommunicator) {
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitAll(&comm, 1, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  float a = 1.5f, b = 0.0f;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(&a, &b, 1, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(comm), ncclInvalidUsage);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  EXPECT_EQ(b, 1.5f);
  int count = 0;
  EXPECT_EQ(ncclCommCount(comm, &count), ncclSuccess) << ncclGetLastError(nullptr);
  EXPECT_EQ(count, 1);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess) << ncclGetLastError(nullptr);
}

TEST(NcclLifecycle, HostBuffersIgnoreTheStream) {
  runRanks(2, [](int rank, ncclComm_t comm) {
    // Any stream value is accepted with host buffers: the call completes before it returns.
    cudaStream_t stream = reinterpret_cast<cudaStream_t>(0x10);
    int v = rank + 1, out = 0;
    ASSERT_EQ(ncclAllReduce(&v, &out, 1, ncclInt32, ncclProd, comm, stream), ncclSuccess) << ncclGetLastError(comm);
    EXPECT_EQ(out, 2);
  });
}

TEST(NcclMemory, RegistrationAndWindowsOnHostBuffers) {
  runRanks(2, [](int, ncclComm_t comm) {
    std::vector<char> buf(4096);
    void* handle = nullptr;
    ASSERT_EQ(ncclCommRegister(comm, buf.data(), buf.size(), &handle), ncclSuccess);
    EXPECT_NE(handle, nullptr);
    EXPECT_EQ(ncclCommDeregister(comm, handle), ncclSuccess);
    EXPECT_EQ(ncclCommDeregister(comm, handle), ncclInvalidArgument);
    ncclWindow_t win = nullptr;
    ASSERT_EQ(ncclCommWindowRegister(comm, buf.data(), buf.size(), &win, NCCL_WIN_COLL_SYMMETRIC), ncclSuccess);
    EXPECT_EQ(ncclCommDeregister(comm, win), ncclInvalidArgument);  // a window is not a registration
    EXPECT_EQ(ncclCommWindowDeregister(comm, win), ncclSuccess);
  });
}

// The host functions of the device API, declared here as nccl_device/core.h does.
struct Team {
  int nRanks, rank, stride;
};
extern "C" Team ncclTeamWorld(ncclComm_t);
extern "C" int ncclTeamRankToWorld(ncclComm_t, Team, int);
extern "C" ncclResult_t ncclDevCommCreate(ncclComm_t, const void*, void*);

TEST(NcclDeviceApi, NeedsADeviceButTeamsAnswer) {
  runRanks(3, [](int rank, ncclComm_t comm) {
    char devComm[4096];
    EXPECT_EQ(ncclDevCommCreate(comm, nullptr, devComm), ncclInvalidUsage);
    Team world = ncclTeamWorld(comm);
    EXPECT_EQ(world.nRanks, 3);
    EXPECT_EQ(world.rank, rank);
    EXPECT_EQ(ncclTeamRankToWorld(comm, world, 2), 2);
  });
}

// Which NVIDIA library ncclMemAlloc reaches depends on CCL_NCCL_LIBRARY (set by ctest):
// ccl's own copy (the drop-in that serves this program, or libccl_nccl.so, another file of
// the same code) and a missing file are refused with a message; the real one answers (it
// finds no device here, so it fails, but it is the one that answers). Without a real
// library but with a device (CCLTEST_CUDART_STANDIN: the stand-in runtime reports one), the
// CUDA runtime's cudaMalloc serves, and ncclMemFree gives the memory back to it.
TEST(NcclRealLibrary, DeviceMemoryGoesToTheRealNcclOnly) {
  const char* configured = std::getenv("CCL_NCCL_LIBRARY");
  const std::string path = configured ? configured : "";
  void* ptr = nullptr;
  ncclResult_t r = ncclMemAlloc(&ptr, 1 << 20);
  const std::string message = ncclGetLastError(nullptr);
  if (std::getenv("CCLTEST_CUDART_STANDIN")) {
    ASSERT_NE(path.find("nonexistent"), std::string::npos) << "the stand-in runtime is tested without a real NCCL";
    EXPECT_EQ(r, ncclSuccess) << message;
    EXPECT_NE(ptr, nullptr);
    EXPECT_EQ(ncclMemFree(ptr), ncclSuccess) << ncclGetLastError(nullptr);
    return;
  }
  EXPECT_NE(r, ncclSuccess);  // no GPU on this machine
  if (path.find("dropin") != std::string::npos || path.find("libccl_nccl") != std::string::npos) {
    EXPECT_EQ(r, ncclInvalidUsage);
    EXPECT_NE(message.find("is ccl itself"), std::string::npos) << message;
  } else if (path.find("nonexistent") != std::string::npos) {
    EXPECT_EQ(r, ncclInvalidUsage);
    EXPECT_NE(message.find("cannot load"), std::string::npos) << message;
  } else {
    EXPECT_NE(message.find("the real NCCL's ncclMemAlloc failed"), std::string::npos) << message;
  }
  EXPECT_EQ(ncclMemFree(nullptr), ncclSuccess);
}

}  // namespace
}  // namespace nccl_test
