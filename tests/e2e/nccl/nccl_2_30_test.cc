// SPDX-License-Identifier: BSD-3-Clause
// The functions NCCL 2.29-2.30 added that PyTorch 2.15 imports: grow, suspend/resume, memory
// stats, window queries, one-sided puts and signals. This program links NVIDIA's 2.28 library,
// which lacks them, so it finds them at run time in whichever libnccl serves it (ccl, as the
// drop-in or preloaded), as a program written for several NCCL versions does.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <stdexcept>
#include <string>
#include <vector>

#include "nccl/nccl_2_30.h"
#include "nccl_test_util.h"

namespace nccl_test {
namespace {

struct Api {
  decltype(&ncclCommGetUniqueId) commGetUniqueId;
  decltype(&ncclCommGrow) commGrow;
  decltype(&ncclCommSuspend) commSuspend;
  decltype(&ncclCommResume) commResume;
  decltype(&ncclCommMemStats) commMemStats;
  decltype(&ncclWinGetUserPtr) winGetUserPtr;
  decltype(&ncclGetLsaMultimemDevicePointer) getLsaMultimemDevicePointer;
  decltype(&ncclGetPeerDevicePointer) getPeerDevicePointer;
  decltype(&ncclPutSignal) putSignal;
  decltype(&ncclSignal) signal;
  decltype(&ncclWaitSignal) waitSignal;
};

class Nccl230 : public ::testing::Test {
 protected:
  void SetUp() override {
    find(api.commGetUniqueId, "ncclCommGetUniqueId");
    find(api.commGrow, "ncclCommGrow");
    find(api.commSuspend, "ncclCommSuspend");
    find(api.commResume, "ncclCommResume");
    find(api.commMemStats, "ncclCommMemStats");
    find(api.winGetUserPtr, "ncclWinGetUserPtr");
    find(api.getLsaMultimemDevicePointer, "ncclGetLsaMultimemDevicePointer");
    find(api.getPeerDevicePointer, "ncclGetPeerDevicePointer");
    find(api.putSignal, "ncclPutSignal");
    find(api.signal, "ncclSignal");
    find(api.waitSignal, "ncclWaitSignal");
    ASSERT_TRUE(missing.empty()) << "the loaded libnccl does not export:" << missing;
  }

  template <class F>
  void find(F& fn, const char* name) {
    fn = reinterpret_cast<F>(dlsym(RTLD_DEFAULT, name));
    if (!fn) missing += std::string(" ") + name;
  }

  Api api{};
  std::string missing;
};

// What the face recorded for the last failure, which must name the function.
void expectMessage(const char* fn, const char* part) {
  const std::string message = ncclGetLastError(nullptr);
  EXPECT_NE(message.find(fn), std::string::npos) << message;
  EXPECT_NE(message.find(part), std::string::npos) << message;
}

TEST_F(Nccl230, VersionIsTheAbisAndNotOlderThanTheHeaders) {
  int v = 0;
  ASSERT_EQ(ncclGetVersion(&v), ncclSuccess);
  EXPECT_EQ(v, CCL_NCCL_ABI_VERSION_CODE);
  EXPECT_EQ(v, NCCL_VERSION(2, 32, CCL_NCCL_ABI_PATCH));  // 2.31-2.32 included (nccl_2_32.h)
  EXPECT_GE(v, NCCL_VERSION_CODE);                        // the headers this program was built with
}

// Ranks 0 and 1 hold a communicator; rank 0 makes the grow id and hands it to a third, new
// rank out of band (here a future); all three make the grown communicator.
TEST_F(Nccl230, GrowFromTwoToThreeRanksThenAllReduce) {
  ncclUniqueId first;
  ASSERT_EQ(ncclGetUniqueId(&first), ncclSuccess);
  std::promise<ncclUniqueId> made;
  std::shared_future<ncclUniqueId> handed = made.get_future().share();
  runThreads(3, [&](int rank) {
    ncclComm_t comm = nullptr, grown = nullptr;
    if (rank < 2) {
      ASSERT_EQ(ncclCommInitRank(&comm, 2, first, rank), ncclSuccess) << ncclGetLastError(nullptr);
      ncclUniqueId id;
      const ncclUniqueId* passed = nullptr;
      if (rank == 0) {
        ncclResult_t r = api.commGetUniqueId(comm, &id);
        if (r == ncclSuccess)
          made.set_value(id);
        else  // the new rank must not wait for an id that will never come
          made.set_exception(std::make_exception_ptr(std::runtime_error("rank 0 made no grow id")));
        ASSERT_EQ(r, ncclSuccess) << ncclGetLastError(comm);
        passed = &id;
      }
      ASSERT_EQ(api.commGrow(comm, 3, passed, -1, &grown, nullptr), ncclSuccess) << ncclGetLastError(comm);
    } else {
      ASSERT_EQ(handed.wait_for(std::chrono::seconds(60)), std::future_status::ready);
      ncclUniqueId id = handed.get();
      ASSERT_EQ(api.commGrow(nullptr, 3, &id, 2, &grown, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
    }
    int count = 0, grownRank = -1;
    ASSERT_EQ(ncclCommCount(grown, &count), ncclSuccess);
    ASSERT_EQ(ncclCommUserRank(grown, &grownRank), ncclSuccess);
    EXPECT_EQ(count, 3);
    EXPECT_EQ(grownRank, rank);  // existing ranks keep theirs
    int32_t mine = rank + 1, sum = 0;
    ASSERT_EQ(ncclAllReduce(&mine, &sum, 1, ncclInt32, ncclSum, grown, nullptr), ncclSuccess)
        << ncclGetLastError(grown);
    EXPECT_EQ(sum, 6);
    if (comm) {  // the communicator grown from stays usable
      ASSERT_EQ(ncclAllReduce(&mine, &sum, 1, ncclInt32, ncclSum, comm, nullptr), ncclSuccess);
      EXPECT_EQ(sum, 3);
      EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
    }
    EXPECT_EQ(ncclCommDestroy(grown), ncclSuccess);
  });
}

TEST_F(Nccl230, GrowNeedsTheRootsIdAndOneIdAtATime) {
  runRanks(2, [&](int rank, ncclComm_t comm) {
    ncclUniqueId id;
    if (rank == 0) {
      ASSERT_EQ(api.commGetUniqueId(comm, &id), ncclSuccess) << ncclGetLastError(comm);
      EXPECT_EQ(api.commGetUniqueId(comm, &id), ncclInvalidUsage);  // the first is not consumed yet
      expectMessage("ncclCommGetUniqueId", "not been consumed");
    }
    ncclComm_t grown = nullptr;
    EXPECT_EQ(api.commGrow(comm, 2, nullptr, -1, &grown, nullptr), ncclInvalidArgument);  // no new rank
    expectMessage("ncclCommGrow", "must exceed");
    EXPECT_EQ(api.commGrow(comm, 3, nullptr, 7, &grown, nullptr), ncclInvalidArgument);  // existing ranks pass -1
    expectMessage("ncclCommGrow", "rank -1");
    // Both existing ranks leave the id out: both learn it over the communicator and fail alike.
    EXPECT_EQ(api.commGrow(comm, 3, nullptr, -1, &grown, nullptr), ncclInvalidArgument);
    expectMessage("ncclCommGrow", "no existing rank passed the id");
    EXPECT_EQ(grown, nullptr);
  });
}

TEST_F(Nccl230, SuspendedHostCommunicatorTakesNoOperations) {
  runRanks(2, [&](int rank, ncclComm_t comm) {
    const ncclCommMemStat_t stats[] = {ncclStatGpuMemSuspend, ncclStatGpuMemSuspended, ncclStatGpuMemPersist,
                                       ncclStatGpuMemTotal};
    for (ncclCommMemStat_t s : stats) {
      uint64_t v = 99;
      ASSERT_EQ(api.commMemStats(comm, s, &v), ncclSuccess) << ncclGetLastError(comm);
      EXPECT_EQ(v, 0u) << "stat " << s;  // a host communicator holds no GPU memory
    }
    ASSERT_EQ(api.commSuspend(comm, NCCL_SUSPEND_MEM), ncclSuccess) << ncclGetLastError(comm);
    uint64_t suspended = 0;
    ASSERT_EQ(api.commMemStats(comm, ncclStatGpuMemSuspended, &suspended), ncclSuccess);
    EXPECT_EQ(suspended, 1u);
    float x = 1.0f + rank;
    EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidUsage);
    expectMessage("ncclAllReduce", "suspended");
    EXPECT_EQ(ncclSend(&x, 1, ncclFloat32, 1 - rank, comm, nullptr), ncclInvalidUsage);
    int count = 0;
    EXPECT_EQ(ncclCommCount(comm, &count), ncclSuccess);  // queries still answer
    ASSERT_EQ(api.commResume(comm), ncclSuccess) << ncclGetLastError(comm);
    ASSERT_EQ(api.commMemStats(comm, ncclStatGpuMemSuspended, &suspended), ncclSuccess);
    EXPECT_EQ(suspended, 0u);
    ASSERT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess) << ncclGetLastError(comm);
    EXPECT_EQ(x, 3.0f);
    EXPECT_EQ(api.commSuspend(comm, 0x10), ncclInvalidArgument);
    uint64_t v = 0;
    EXPECT_EQ(api.commMemStats(comm, static_cast<ncclCommMemStat_t>(99), &v), ncclInvalidArgument);
  });
}

TEST_F(Nccl230, DeviceOnlyFunctionsRefuseHostMemory) {
  runRanks(2, [&](int rank, ncclComm_t comm) {
    const int peer = 1 - rank;
    std::vector<float> buf(1024);
    ncclWindow_t win = nullptr;
    ASSERT_EQ(ncclCommWindowRegister(comm, buf.data(), buf.size() * sizeof(float), &win, NCCL_WIN_COLL_SYMMETRIC),
              ncclSuccess);
    void* user = nullptr;
    ASSERT_EQ(api.winGetUserPtr(comm, win, &user), ncclSuccess) << ncclGetLastError(comm);
    EXPECT_EQ(user, buf.data());  // a host window knows its buffer

    void* p = nullptr;
    EXPECT_EQ(api.getLsaMultimemDevicePointer(win, 0, &p), ncclInvalidUsage);
    expectMessage("ncclGetLsaMultimemDevicePointer", "host memory");
    EXPECT_EQ(api.getPeerDevicePointer(win, 0, peer, &p), ncclInvalidUsage);
    expectMessage("ncclGetPeerDevicePointer", "host memory");
    EXPECT_EQ(p, nullptr);
    EXPECT_EQ(api.putSignal(buf.data(), 4, ncclFloat32, peer, win, 0, 0, 0, 0, comm, nullptr), ncclInvalidUsage);
    expectMessage("ncclPutSignal", "host memory");
    EXPECT_EQ(api.signal(peer, 0, 0, 0, comm, nullptr), ncclInvalidUsage);
    expectMessage("ncclSignal", "NVIDIA's NCCL");
    ncclWaitSignalDesc_t desc{1, peer, 0, 0};
    EXPECT_EQ(api.waitSignal(1, &desc, comm, nullptr), ncclInvalidUsage);
    expectMessage("ncclWaitSignal", "NVIDIA's NCCL");

    ASSERT_EQ(ncclCommWindowDeregister(comm, win), ncclSuccess);
    EXPECT_EQ(api.getPeerDevicePointer(win, 0, peer, &p), ncclInvalidArgument);  // no longer a window
    expectMessage("ncclGetPeerDevicePointer", "not a live window");
    EXPECT_EQ(api.winGetUserPtr(comm, win, &user), ncclInvalidArgument);
  });
}

TEST_F(Nccl230, NullArgumentsAreErrorsNotCrashes) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t out = nullptr;
  void* p = nullptr;
  uint64_t v = 0;
  float x = 0;
  EXPECT_EQ(api.commGetUniqueId(nullptr, &id), ncclInvalidArgument);
  expectMessage("ncclCommGetUniqueId", "comm is NULL");
  EXPECT_EQ(api.commGrow(nullptr, 2, nullptr, 1, &out, nullptr), ncclInvalidArgument);
  expectMessage("ncclCommGrow", "must pass the id");
  EXPECT_EQ(api.commGrow(nullptr, 2, &id, 1, nullptr, nullptr), ncclInvalidArgument);
  expectMessage("ncclCommGrow", "newcomm is NULL");
  EXPECT_EQ(api.commSuspend(nullptr, NCCL_SUSPEND_MEM), ncclInvalidArgument);
  EXPECT_EQ(api.commResume(nullptr), ncclInvalidArgument);
  EXPECT_EQ(api.commMemStats(nullptr, ncclStatGpuMemTotal, &v), ncclInvalidArgument);
  EXPECT_EQ(api.winGetUserPtr(nullptr, nullptr, &p), ncclInvalidArgument);
  EXPECT_EQ(api.getLsaMultimemDevicePointer(nullptr, 0, &p), ncclInvalidArgument);
  expectMessage("ncclGetLsaMultimemDevicePointer", "NULL");
  EXPECT_EQ(api.getPeerDevicePointer(nullptr, 0, 0, &p), ncclInvalidArgument);
  EXPECT_EQ(api.putSignal(&x, 1, ncclFloat32, 0, nullptr, 0, 0, 0, 0, nullptr, nullptr), ncclInvalidArgument);
  EXPECT_EQ(api.signal(0, 0, 0, 0, nullptr, nullptr), ncclInvalidArgument);
  EXPECT_EQ(api.waitSignal(0, nullptr, nullptr, nullptr), ncclInvalidArgument);
  EXPECT_EQ(out, nullptr);

  runRanks(1, [&](int, ncclComm_t comm) {
    std::vector<char> buf(256);
    ncclWindow_t win = nullptr;
    ASSERT_EQ(ncclCommWindowRegister(comm, buf.data(), buf.size(), &win, 0), ncclSuccess);
    EXPECT_EQ(api.commGetUniqueId(comm, nullptr), ncclInvalidArgument);
    expectMessage("ncclCommGetUniqueId", "uniqueId is NULL");
    EXPECT_EQ(api.commGrow(comm, 2, nullptr, -1, nullptr, nullptr), ncclInvalidArgument);
    EXPECT_EQ(api.commMemStats(comm, ncclStatGpuMemTotal, nullptr), ncclInvalidArgument);
    expectMessage("ncclCommMemStats", "value is NULL");
    EXPECT_EQ(api.winGetUserPtr(comm, nullptr, &p), ncclInvalidArgument);
    EXPECT_EQ(api.winGetUserPtr(comm, win, nullptr), ncclInvalidArgument);
    EXPECT_EQ(api.getLsaMultimemDevicePointer(win, 0, nullptr), ncclInvalidArgument);
    EXPECT_EQ(api.getPeerDevicePointer(win, 0, 0, nullptr), ncclInvalidArgument);
    EXPECT_EQ(api.putSignal(nullptr, 4, ncclFloat32, 0, win, 0, 0, 0, 0, comm, nullptr), ncclInvalidArgument);
    expectMessage("ncclPutSignal", "localbuff is NULL");
    EXPECT_EQ(api.putSignal(buf.data(), 4, ncclFloat32, 0, nullptr, 0, 0, 0, 0, comm, nullptr), ncclInvalidArgument);
    EXPECT_EQ(api.waitSignal(1, nullptr, comm, nullptr), ncclInvalidArgument);
    expectMessage("ncclWaitSignal", "signalDescs is NULL");
    EXPECT_EQ(ncclCommWindowDeregister(comm, win), ncclSuccess);
  });
}

}  // namespace
}  // namespace nccl_test
