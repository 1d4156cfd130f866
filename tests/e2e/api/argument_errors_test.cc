// SPDX-License-Identifier: BSD-3-Clause
// Bad input gets the documented error code, leaves output parameters alone, and
// cclGetLastError names the argument at fault (for this thread and for the communicator).
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "raw_enum_calls.h"
#include "scoped_env.h"
#include "world.h"

namespace ccltest {
namespace {

// Calls `call` and expects `code` with a last-error message that mentions `argument`.
void expectError(cclResult_t code, const char* argument, const std::string& what, cclComm_t comm,
                 const std::function<cclResult_t()>& call) {
  const cclResult_t r = call();
  EXPECT_EQ(r, code) << what << " -> " << describeResult(r);
  const std::string message = cclGetLastError(nullptr);
  EXPECT_NE(message.find(argument), std::string::npos)
      << what << ": cclGetLastError(NULL) = '" << message << "' does not mention '" << argument << "'";
  if (comm) {
    const std::string commMessage = cclGetLastError(comm);
    EXPECT_NE(commMessage.find(argument), std::string::npos)
        << what << ": cclGetLastError(comm) = '" << commMessage << "' does not mention '" << argument << "'";
  }
}

// One call per collective, with every argument valid unless the test overrides it.
struct Args {
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 4;
  int type = cclFloat32;  // ints: the tests pass values outside the enums
  int op = cclSum;
  int root = 0;
  cclComm_t comm = nullptr;
};

struct NamedCall {
  const char* name;
  std::function<cclResult_t(const Args&)> call;
  bool reduces;
  bool rooted;
  bool sends;     // reads sendbuff (on the root for rooted calls)
  bool receives;  // writes recvbuff (on the root for Reduce and Gather)
};

const std::vector<NamedCall>& calls() {
  static const std::vector<NamedCall> all = {
      {"cclAllReduce", [](const Args& a) { return rawAllReduce(a.send, a.recv, a.count, a.type, a.op, a.comm); }, true,
       false, true, true},
      {"cclBroadcast", [](const Args& a) { return rawBroadcast(a.send, a.recv, a.count, a.type, a.root, a.comm); },
       false, true, true, true},
      {"cclBcast", [](const Args& a) { return rawBcast(a.recv, a.count, a.type, a.root, a.comm); }, false, true, false,
       true},
      {"cclReduce", [](const Args& a) { return rawReduce(a.send, a.recv, a.count, a.type, a.op, a.root, a.comm); },
       true, true, true, true},
      {"cclAllGather", [](const Args& a) { return rawAllGather(a.send, a.recv, a.count, a.type, a.comm); }, false,
       false, true, true},
      {"cclReduceScatter",
       [](const Args& a) { return rawReduceScatter(a.send, a.recv, a.count, a.type, a.op, a.comm); }, true, false, true,
       true},
      {"cclAlltoAll", [](const Args& a) { return rawAlltoAll(a.send, a.recv, a.count, a.type, a.comm); }, false, false,
       true, true},
      {"cclGather", [](const Args& a) { return rawGather(a.send, a.recv, a.count, a.type, a.root, a.comm); }, false,
       true, true, true},
      {"cclScatter", [](const Args& a) { return rawScatter(a.send, a.recv, a.count, a.type, a.root, a.comm); }, false,
       true, true, true},
      {"cclSend", [](const Args& a) { return rawSend(a.send, a.count, a.type, a.root, a.comm); }, false, true, true,
       false},
      {"cclRecv", [](const Args& a) { return rawRecv(a.recv, a.count, a.type, a.root, a.comm); }, false, true, false,
       true},
  };
  return all;
}

// The tests run on one rank of a one-rank world (every check fails before any
// communication), in its rank thread, since the last error is per thread.
template <typename Fn>
void onOneRank(Fn fn) {
  World& w = World::get(1);
  ASSERT_TRUE(w.ready());
  w.run([&](int, cclComm_t comm) {
    std::vector<float> send(64, 1.f), recv(64, 0.f);
    Args base;
    base.send = send.data();
    base.recv = recv.data();
    base.comm = comm;
    fn(base, comm);
  });
}

TEST(ArgumentErrors, NullBuffersWithPositiveCount) {
  onOneRank([](const Args& base, cclComm_t comm) {
    for (const NamedCall& c : calls()) {
      if (c.sends) {
        Args a = base;
        a.send = nullptr;
        expectError(cclInvalidArgument, "sendbuff", std::string(c.name) + " with sendbuff NULL", comm,
                    [&] { return c.call(a); });
      }
      if (c.receives) {
        Args a = base;
        a.recv = nullptr;
        expectError(cclInvalidArgument, c.sends ? "recvbuff" : "buff", std::string(c.name) + " with recvbuff NULL",
                    comm, [&] { return c.call(a); });
      }
    }
  });
}

TEST(ArgumentErrors, InvalidDataType) {
  onOneRank([](const Args& base, cclComm_t comm) {
    for (const NamedCall& c : calls()) {
      for (int bad : {99, -1, static_cast<int>(cclNumTypes)}) {
        Args a = base;
        a.type = bad;
        expectError(cclInvalidArgument, "datatype", std::string(c.name) + " with datatype " + std::to_string(bad), comm,
                    [&] { return c.call(a); });
      }
    }
  });
}

TEST(ArgumentErrors, InvalidReductionOp) {
  onOneRank([](const Args& base, cclComm_t comm) {
    for (const NamedCall& c : calls()) {
      if (!c.reduces) continue;
      for (int bad : {77, -1, static_cast<int>(cclNumOps)}) {
        Args a = base;
        a.op = bad;
        expectError(cclInvalidArgument, "op", std::string(c.name) + " with op " + std::to_string(bad), comm,
                    [&] { return c.call(a); });
      }
    }
  });
}

TEST(ArgumentErrors, RootOrPeerOutOfRange) {
  onOneRank([](const Args& base, cclComm_t comm) {
    for (const NamedCall& c : calls()) {
      if (!c.rooted) continue;
      const bool p2p = std::string(c.name) == "cclSend" || std::string(c.name) == "cclRecv";
      for (int bad : {1, -1, 1000}) {
        Args a = base;
        a.root = bad;
        expectError(cclInvalidArgument, p2p ? "peer" : "root",
                    std::string(c.name) + (p2p ? " to peer " : " with root ") + std::to_string(bad), comm,
                    [&] { return c.call(a); });
      }
    }
  });
}

TEST(ArgumentErrors, NullCommunicator) {
  std::vector<float> send(8), recv(8);
  for (const NamedCall& c : calls()) {
    Args a;
    a.send = send.data();
    a.recv = recv.data();
    expectError(cclInvalidArgument, "comm", std::string(c.name) + " with comm NULL", nullptr,
                [&] { return c.call(a); });
  }
  int value = 12345;
  expectError(cclInvalidArgument, "comm", "cclCommCount(NULL)", nullptr, [&] { return cclCommCount(nullptr, &value); });
  expectError(cclInvalidArgument, "comm", "cclCommUserRank(NULL)", nullptr,
              [&] { return cclCommUserRank(nullptr, &value); });
  expectError(cclInvalidArgument, "comm", "cclCommCuDevice(NULL)", nullptr,
              [&] { return cclCommCuDevice(nullptr, &value); });
  EXPECT_EQ(value, 12345) << "an output parameter was written by a failing call";
  cclResult_t async = cclInProgress;
  expectError(cclInvalidArgument, "comm", "cclCommGetAsyncError(NULL)", nullptr,
              [&] { return cclCommGetAsyncError(nullptr, &async); });
  EXPECT_EQ(async, cclInProgress) << "an output parameter was written by a failing call";
  expectError(cclInvalidArgument, "comm", "cclCommFinalize(NULL)", nullptr, [] { return cclCommFinalize(nullptr); });
}

TEST(ArgumentErrors, NullOutputPointers) {
  onOneRank([](const Args&, cclComm_t comm) {
    expectError(cclInvalidArgument, "count", "cclCommCount(comm, NULL)", comm,
                [&] { return cclCommCount(comm, nullptr); });
    expectError(cclInvalidArgument, "rank", "cclCommUserRank(comm, NULL)", comm,
                [&] { return cclCommUserRank(comm, nullptr); });
    expectError(cclInvalidArgument, "device", "cclCommCuDevice(comm, NULL)", comm,
                [&] { return cclCommCuDevice(comm, nullptr); });
    expectError(cclInvalidArgument, "newcomm", "cclCommSplit(comm, 0, 0, NULL)", comm,
                [&] { return cclCommSplit(comm, 0, 0, nullptr, nullptr); });
  });
  expectError(cclInvalidArgument, "version", "cclGetVersion(NULL)", nullptr, [] { return cclGetVersion(nullptr); });
  expectError(cclInvalidArgument, "uniqueId", "cclGetUniqueId(NULL)", nullptr, [] { return cclGetUniqueId(nullptr); });
}

// count * element size (times nranks for the gathering calls) does not fit in size_t.
// Buffers that overlap outside the in-place layout are refused (before any communication);
// the in-place layouts themselves still run.
TEST(ArgumentErrors, OverlappingBuffersOutsideTheInPlaceLayout) {
  onOneRank([](const Args& base, cclComm_t comm) {
    float* buf = static_cast<float*>(base.recv);
    for (const NamedCall& c : calls()) {
      if (!c.sends || !c.receives) continue;
      Args a = base;
      a.send = buf + 1;  // shares all but one element with recv
      a.recv = buf;
      expectError(cclInvalidArgument, "overlap", std::string(c.name) + " with overlapping buffers", comm,
                  [&] { return c.call(a); });
      a.send = buf;  // on one rank, every collective's in-place layout
      EXPECT_EQ(c.call(a), cclSuccess) << c.name << " in place: " << cclGetLastError(comm);
    }
  });
  World& w = World::get(2);
  ASSERT_TRUE(w.ready());
  w.run([](int rank, cclComm_t comm) {
    std::vector<float> recv(8, 1.0f);
    // Rank 1's block of an in-place allgather starts at recv + 4; recv + 0 overlaps it wrongly.
    EXPECT_EQ(cclAllGather(recv.data() + 4 * rank, recv.data(), 4, cclFloat32, comm, nullptr), cclSuccess);
    expectError(cclInvalidArgument, "overlap", "cclAllGather with sendbuff at another rank's block", comm,
                [&] { return cclAllGather(recv.data() + 4 * (1 - rank), recv.data(), 4, cclFloat32, comm, nullptr); });
    expectError(cclInvalidArgument, "overlap", "cclReduceScatter with recvbuff at another rank's block", comm, [&] {
      return cclReduceScatter(recv.data(), recv.data() + 4 * (1 - rank), 4, cclFloat32, cclSum, comm, nullptr);
    });
  });
}

TEST(ArgumentErrors, CountTimesSizeOverflows) {
  onOneRank([](const Args& base, cclComm_t comm) {
    for (const NamedCall& c : calls()) {
      for (size_t count : {SIZE_MAX, SIZE_MAX / 4 + 1, SIZE_MAX / 2}) {
        Args a = base;
        a.count = count;
        expectError(cclInvalidArgument, "count", std::string(c.name) + " with count " + std::to_string(count), comm,
                    [&] { return c.call(a); });
      }
    }
  });
}

// With two ranks, sendcount * nranks * 4 overflows although sendcount * 4 does not.
TEST(ArgumentErrors, GatheredSizeOverflows) {
  World& w = World::get(2);
  ASSERT_TRUE(w.ready());
  w.run([](int, cclComm_t comm) {
    std::vector<float> send(8), recv(16);
    const size_t count = SIZE_MAX / 4 / 2 + 1;
    expectError(cclInvalidArgument, "count", "cclAllGather with sendcount*nranks overflowing", comm,
                [&] { return cclAllGather(send.data(), recv.data(), count, cclFloat32, comm, nullptr); });
    expectError(cclInvalidArgument, "count", "cclReduceScatter with recvcount*nranks overflowing", comm,
                [&] { return cclReduceScatter(send.data(), recv.data(), count, cclFloat32, cclSum, comm, nullptr); });
    expectError(cclInvalidArgument, "count", "cclAlltoAll with count*nranks overflowing", comm,
                [&] { return cclAlltoAll(send.data(), recv.data(), count, cclFloat32, comm, nullptr); });
  });
}

TEST(ArgumentErrors, InitRankWithBadRankOrSize) {
  cclUniqueId id{};
  ASSERT_CCL_OK(cclGetUniqueId(&id));
  const cclComm_t stale = reinterpret_cast<cclComm_t>(0x1234);
  struct Bad {
    int nranks, rank;
    const char* argument;
  };
  // 100,000 ranks: more than message tags can number (87,381: common/tags.h), refused before any
  // connection.
  for (Bad b : {Bad{0, 0, "nranks"}, Bad{-3, 0, "nranks"}, Bad{100000, 0, "nranks"}, Bad{2, 2, "rank"},
                Bad{2, -1, "rank"}, Bad{1, 5, "rank"}}) {
    cclComm_t comm = stale;
    runWithDeadline(
        [&] {
          expectError(cclInvalidArgument, b.argument,
                      std::string("cclCommInitRank(nranks ") + std::to_string(b.nranks) + ", rank " +
                          std::to_string(b.rank) + ")",
                      nullptr, [&] { return cclCommInitRank(&comm, b.nranks, id, b.rank); });
        },
        "cclCommInitRank with bad arguments");
    EXPECT_EQ(comm, nullptr) << "a failing cclCommInitRank leaves NULL (ccl.h), not the variable's old value";
  }
  runWithDeadline(
      [&] {
        expectError(cclInvalidArgument, "comm", "cclCommInitRank(NULL, ...)", nullptr,
                    [&] { return cclCommInitRank(nullptr, 1, id, 0); });
        std::vector<cclComm_t> comms(2, stale);
        expectError(cclInvalidArgument, "ndev", "cclCommInitAll(ndev 0)", nullptr,
                    [&] { return cclCommInitAll(comms.data(), 0, nullptr); });
        expectError(cclInvalidArgument, "comm", "cclCommInitAll(NULL, 2)", nullptr,
                    [&] { return cclCommInitAll(nullptr, 2, nullptr); });
        EXPECT_EQ(comms[0], stale) << "ndev 0: no array to clear";
      },
      "cclCommInitRank/InitAll with bad arguments");
}

TEST(ArgumentErrors, ConfigWithWrongMagicOrSize) {
  runWithDeadline(
      [] {
        cclUniqueId id{};
        ASSERT_CCL_OK(cclGetUniqueId(&id));
        cclConfig_t config = CCL_CONFIG_INITIALIZER;
        config.magic = 0xdeadbeef;
        cclComm_t comm = nullptr;
        expectError(cclInvalidArgument, "magic", "cclCommInitRankConfig with a wrong magic", nullptr,
                    [&] { return cclCommInitRankConfig(&comm, 1, id, 0, &config); });
        EXPECT_EQ(comm, nullptr);
        config = CCL_CONFIG_INITIALIZER;
        config.size = 3;  // shorter than the fields every config has
        expectError(cclInvalidArgument, "size", "cclCommInitRankConfig with size 3", nullptr,
                    [&] { return cclCommInitRankConfig(&comm, 1, id, 0, &config); });
        EXPECT_EQ(comm, nullptr);
      },
      "cclCommInitRankConfig with bad configs");
}

// A CCL_TIMEOUT beyond what config->timeoutMs (an int of milliseconds) holds is refused with a
// message naming it; before, 3,000,000 s overflowed into "must be positive", and 9.3e9 s
// overflowed the rendezvous service's deadline, which then ended at once.
TEST(ArgumentErrors, ATimeoutTooLargeIsRefusedByName) {
  for (const char* seconds : {"3000000", "9300000000"}) {
    ScopedEnv timeout("CCL_TIMEOUT", seconds);
    runWithDeadline(
        [&] {
          cclUniqueId id{};
          ASSERT_CCL_OK(cclGetUniqueId(&id));
          cclComm_t comm = nullptr;
          const std::string setting = std::string("CCL_TIMEOUT=") + seconds;
          expectError(cclInvalidArgument, setting.c_str(), "cclCommInitRank with " + setting, nullptr,
                      [&] { return cclCommInitRank(&comm, 1, id, 0); });
          EXPECT_EQ(comm, nullptr);
        },
        "cclCommInitRank with a CCL_TIMEOUT too large");
  }
}

}  // namespace
}  // namespace ccltest
