// SPDX-License-Identifier: BSD-3-Clause
// Version, error strings, communicator queries and the finalize/destroy life cycle.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <thread>
#include <vector>

#include "raw_enum_calls.h"
#include "world.h"

namespace ccltest {
namespace {

TEST(Lifecycle, VersionIsTheHeaderVersion) {
  int version = -1;
  ASSERT_CCL_OK(cclGetVersion(&version));
  EXPECT_EQ(version, CCL_VERSION_CODE);
  EXPECT_EQ(CCL_VERSION_CODE, CCL_MAJOR * 10000 + CCL_MINOR * 100 + CCL_PATCH);
}

TEST(Lifecycle, ErrorStringsForEveryCode) {
  std::set<std::string> distinct;
  for (int code = cclSuccess; code < cclNumResults; ++code) {
    const char* s = cclGetErrorString(static_cast<cclResult_t>(code));
    ASSERT_NE(s, nullptr) << code;
    EXPECT_GT(std::string(s).size(), 0u) << code;
    distinct.insert(s);
  }
  EXPECT_EQ(distinct.size(), static_cast<size_t>(cclNumResults)) << "two codes share a message";
  for (int code : {-1, static_cast<int>(cclNumResults), 99}) {
    const char* s = rawErrorString(code);
    ASSERT_NE(s, nullptr) << code;
    EXPECT_EQ(distinct.count(s), 0u) << "unknown code " << code << " reads like a known one: " << s;
  }
}

TEST(Lifecycle, LastErrorIsEmptyOnAThreadWithoutFailures) {
  std::string message = "unset";
  std::thread([&] { message = cclGetLastError(nullptr); }).join();
  EXPECT_EQ(message, "");
}

TEST(Lifecycle, LastErrorIsPerThread) {
  EXPECT_EQ(cclGetVersion(nullptr), cclInvalidArgument);
  const std::string mine = cclGetLastError(nullptr);
  EXPECT_NE(mine, "");
  std::string other = "unset";
  std::thread([&] { other = cclGetLastError(nullptr); }).join();
  EXPECT_EQ(other, "") << "another thread's failure leaked into a fresh thread";
}

TEST(Lifecycle, CountRankAndDeviceOfEveryRank) {
  for (int n : {1, 3, 8}) {
    World& w = World::get(n);
    ASSERT_TRUE(w.ready());
    w.run([n](int rank, cclComm_t comm) {
      int count = -1, me = -1, device = 12345;
      EXPECT_CCL_OK(cclCommCount(comm, &count));
      EXPECT_CCL_OK(cclCommUserRank(comm, &me));
      EXPECT_CCL_OK(cclCommCuDevice(comm, &device));
      EXPECT_EQ(count, n);
      EXPECT_EQ(me, rank);
      EXPECT_EQ(device, -1) << "a host communicator has no CUDA device";
      cclResult_t async = cclInternalError;
      EXPECT_CCL_OK(cclCommGetAsyncError(comm, &async));
      EXPECT_EQ(async, cclSuccess);
    });
  }
}

TEST(Lifecycle, ValidConfigIsAccepted) {
  cclConfig_t config = CCL_CONFIG_INITIALIZER;
  config.commName = "lifecycle-config";
  config.timeoutMs = 20000;
  World w(2, &config);
  ASSERT_TRUE(w.ready());
  w.run([](int rank, cclComm_t comm) {
    int32_t in = rank + 1, out = 0;
    EXPECT_CCL_OK(cclAllReduce(&in, &out, 1, cclInt32, cclSum, comm, nullptr));
    EXPECT_EQ(out, 3);
  });
}

// A caller built against a shorter config (only size, magic and version) keeps working.
TEST(Lifecycle, ShorterConfigFromAnOlderCallerIsAccepted) {
  cclConfig_t config = CCL_CONFIG_INITIALIZER;
  config.size = offsetof(cclConfig_t, blocking);
  config.blocking = 12345;  // beyond `size`: must not be read
  World w(2, &config);
  ASSERT_TRUE(w.ready());
  w.run([](int rank, cclComm_t comm) {
    int32_t in = rank + 1, out = 0;
    EXPECT_CCL_OK(cclAllReduce(&in, &out, 1, cclInt32, cclSum, comm, nullptr));
    EXPECT_EQ(out, 3);
  });
}

// A failed creation leaves NULL where the caller keeps its handle, never the value the
// variable held before (another communicator, which a cleanup would destroy twice).
TEST(Lifecycle, AFailedCreationLeavesANullHandle) {
  World& w = World::get(2);
  ASSERT_TRUE(w.ready());
  cclComm_t stale = w.comm(0);
  cclUniqueId id{};  // zeroed: malformed, refused at once
  cclComm_t comm = stale;
  EXPECT_EQ(cclCommInitRank(&comm, 2, id, 0), cclInvalidArgument);
  EXPECT_EQ(comm, nullptr);
  comm = stale;
  cclConfig_t bad = CCL_CONFIG_INITIALIZER;
  bad.blocking = 7;
  EXPECT_EQ(cclCommInitRankConfig(&comm, 2, id, 0, &bad), cclInvalidArgument);
  EXPECT_EQ(comm, nullptr);
  w.run([&](int rank, cclComm_t parent) {
    cclComm_t child = stale;
    EXPECT_EQ(cclCommSplit(parent, -5, rank, &child, nullptr), cclInvalidArgument);
    EXPECT_EQ(child, nullptr);
  });
}

TEST(Lifecycle, CollectiveAfterFinalizeIsInvalidUsage) {
  World w(2);
  ASSERT_TRUE(w.ready());
  w.run([](int rank, cclComm_t comm) {
    int32_t in = rank, out = -1;
    EXPECT_CCL_OK(cclAllReduce(&in, &out, 1, cclInt32, cclSum, comm, nullptr));
    EXPECT_CCL_OK(cclCommFinalize(comm));
    const cclResult_t r = cclAllReduce(&in, &out, 1, cclInt32, cclSum, comm, nullptr);
    EXPECT_EQ(r, cclInvalidUsage) << "allreduce after cclCommFinalize -> " << describeResult(r);
    EXPECT_NE(std::string(cclGetLastError(nullptr)), "");
    const cclResult_t s = cclSend(&in, 1, cclInt32, 1 - rank, comm, nullptr);
    EXPECT_EQ(s, cclInvalidUsage) << "send after cclCommFinalize -> " << describeResult(s);
  });
  // ~World destroys the finalized communicators, which must succeed.
}

TEST(Lifecycle, GroupEndWithoutStartIsInvalidUsage) {
  runWithDeadline(
      [] {
        const cclResult_t r = cclGroupEnd();
        EXPECT_EQ(r, cclInvalidUsage) << describeResult(r);
        EXPECT_CCL_OK(cclGroupStart());
        EXPECT_CCL_OK(cclGroupEnd());
      },
      "unbalanced cclGroupEnd");
}

TEST(Lifecycle, InvalidCallInsideGroupFailsTheGroup) {
  World& w = World::get(2);
  ASSERT_TRUE(w.ready());
  w.run([](int rank, cclComm_t comm) {
    int32_t in = rank, out = -1;
    EXPECT_CCL_OK(cclGroupStart());
    const cclResult_t bad = rawAllReduce(&in, &out, 1, 99, cclSum, comm);
    EXPECT_EQ(bad, cclInvalidArgument) << "validated when called: " << describeResult(bad);
    const cclResult_t end = cclGroupEnd();
    EXPECT_NE(end, cclSuccess) << "cclGroupEnd returns the first error of the group";
  });
}

}  // namespace
}  // namespace ccltest
