// SPDX-License-Identifier: BSD-3-Clause
// A failure of one rank's own in the middle of a collective (a step that throws on that rank:
// an internal error, memory it cannot get), not a peer's or the network's: every rank's call
// fails at once with an error that names the failed rank, instead of the peers waiting for
// the messages it will never send until the communicator's timeout; nobody takes the failed
// rank, which is alive, for lost; and the ranks go on on a communicator shrunk to all of them.
// The failure is injected through the executor's test hook (coll::stepFault): nothing else
// makes one rank fail alone in the middle of a call. It links the api layer, not libccl, to
// reach that hook and the communicator's state.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "api/comm.h"
#include "ccl/ccl.h"
#include "collectives/exec/executor.h"
#include "common/error.h"
#include "rank_threads.h"
#include "scoped_env.h"
#include "transport/factory.h"

namespace ccl {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kRanks = 4;
constexpr int kVictim = 1;
// The communicators' timeout: a peer that waits for it has missed the failure.
constexpr int kTimeoutMs = 60000;
// Far below kTimeoutMs and far above what telling the peers takes (milliseconds), so that
// only a peer that waits for its timeout misses it, however loaded the machine.
constexpr auto kPrompt = std::chrono::seconds(30);

enum class Fault { kInternalError, kOutOfMemory };

// The injected failure, armed for one call: the victim's step number `steps` throws.
std::atomic<int> gVictim{-1};
std::atomic<int> gStepsBefore{0};
std::atomic<Fault> gFault{Fault::kInternalError};

void failTheVictim(const coll::Job& job, const coll::Step&) {
  if (job.transport->rank() != gVictim.load()) return;
  if (gStepsBefore.fetch_sub(1) != 0) return;  // once: later steps find it negative
  if (gFault.load() == Fault::kOutOfMemory) throw std::bad_alloc();
  throw Error(cclInternalError, "injected failure of a step");
}

// Installs the hook for one test (the inits and the shrink run with none).
class InjectedFault {
 public:
  InjectedFault(Fault fault, int stepsBefore) {
    gFault.store(fault);
    gStepsBefore.store(stepsBefore);
    gVictim.store(kVictim);
    coll::stepFault.store(&failTheVictim);
  }
  ~InjectedFault() { disarm(); }
  static void disarm() {
    coll::stepFault.store(nullptr);
    gVictim.store(-1);
  }
};

struct Param {
  const char* transport;
  Fault fault;
};

std::string paramName(const ::testing::TestParamInfo<Param>& p) {
  return std::string(p.param.transport) + (p.param.fault == Fault::kOutOfMemory ? "_OutOfMemory" : "_InternalError");
}

class LocalFailure : public ::testing::TestWithParam<Param> {};

struct Outcome {
  cclResult_t result = cclSuccess;
  std::string message;
  double seconds = 0;
};

TEST_P(LocalFailure, FailsEveryRanksCallPromptlyAndNobodyIsLost) {
  const Param p = GetParam();
  if ((", " + transport::availableTransports() + ", ").find(std::string(", ") + p.transport + ", ") ==
      std::string::npos)
    GTEST_SKIP() << "this build has no " << p.transport << " transport";
  ccltest::ScopedEnv transport("CCL_TRANSPORT", p.transport);
  // Uncompressed, whatever the environment says: the failure is this rank's, not a codec's.
  ccltest::ScopedEnv codec("CCL_CODEC", "none");
  cclUniqueId id{};
  ASSERT_EQ(cclGetUniqueId(&id), cclSuccess);
  ccltest::RankThreads threads(kRanks);
  std::vector<cclComm_t> comms(kRanks, nullptr);
  ccltest::expectNoneThrew(threads.run([&](int r) {
    cclConfig_t config = CCL_CONFIG_INITIALIZER;
    config.timeoutMs = kTimeoutMs;
    ASSERT_EQ(cclCommInitRankConfig(&comms[static_cast<size_t>(r)], kRanks, id, r, &config), cclSuccess);
  }));
  for (cclComm_t c : comms) ASSERT_NE(c, nullptr);

  // A large all-reduce: the victim fails after it has started steps of its own (sends and
  // receives posted), while its peers wait for its messages.
  const size_t count = size_t{1} << 20;
  std::vector<Outcome> outcomes(kRanks);
  {
    const InjectedFault fault(p.fault, 3);
    ccltest::expectNoneThrew(threads.run([&](int r) {
      std::vector<float> in(count, 1.f), out(count, 0.f);
      const auto start = Clock::now();
      Outcome& o = outcomes[static_cast<size_t>(r)];
      o.result = cclAllReduce(in.data(), out.data(), count, cclFloat32, cclSum, comms[static_cast<size_t>(r)], nullptr);
      o.seconds = std::chrono::duration<double>(Clock::now() - start).count();
      o.message = cclGetLastError(nullptr);
    }));
  }
  for (int r = 0; r < kRanks; ++r) {
    const Outcome& o = outcomes[static_cast<size_t>(r)];
    std::printf("rank %d: %s after %.3f s: '%s'\n", r, cclGetErrorString(o.result), o.seconds, o.message.c_str());
    EXPECT_LT(o.seconds, std::chrono::duration<double>(kPrompt).count())
        << "rank " << r << " waited for its timeout instead of learning of rank " << kVictim << "'s failure";
    if (r == kVictim) {
      // Its own error, which says that the others' calls fail too.
      EXPECT_EQ(o.result, p.fault == Fault::kOutOfMemory ? cclSystemError : cclInternalError) << o.message;
      EXPECT_NE(o.message.find(p.fault == Fault::kOutOfMemory ? "out of memory" : "injected failure"),
                std::string::npos)
          << o.message;
      EXPECT_NE(o.message.find("the communicator is aborted"), std::string::npos) << o.message;
    } else {
      // The peers': a remote error naming the victim as the rank that aborted, not as a lost
      // one.
      EXPECT_EQ(o.result, cclRemoteError) << "rank " << r << ": " << o.message;
      EXPECT_NE(o.message.find("rank " + std::to_string(kVictim) + " aborted the communicator"), std::string::npos)
          << "rank " << r << ": " << o.message;
    }
    EXPECT_EQ(o.message.find("is gone"), std::string::npos) << "rank " << r << ": " << o.message;
    EXPECT_EQ(o.message.find("sends no pulses"), std::string::npos) << "rank " << r << ": " << o.message;
  }

  // The victim is alive: past a period of the watcher (api/watch.h), no rank has found it lost.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  for (int r = 0; r < kRanks; ++r) {
    cclResult_t async = cclSuccess;
    ASSERT_EQ(cclCommGetAsyncError(comms[static_cast<size_t>(r)], &async), cclSuccess);
    EXPECT_EQ(async, outcomes[static_cast<size_t>(r)].result) << "rank " << r;
    EXPECT_EQ(comms[static_cast<size_t>(r)]->life.lostRank.load(), -1)
        << "rank " << r << " took rank " << comms[static_cast<size_t>(r)]->life.lostRank.load() << " for lost";
  }

  // Every rank goes on: the failed communicator shrunk to all of its ranks passes a call.
  ccltest::expectNoneThrew(threads.run([&](int r) {
    cclComm_t& comm = comms[static_cast<size_t>(r)];
    cclComm_t next = nullptr;
    ASSERT_EQ(cclCommShrink(comm, nullptr, 0, &next, nullptr, CCL_SHRINK_DEFAULT), cclSuccess)
        << "rank " << r << ": " << cclGetLastError(nullptr);
    EXPECT_EQ(cclCommDestroy(comm), cclSuccess) << "rank " << r << ": " << cclGetLastError(nullptr);
    comm = next;
    std::vector<float> in(count, float(r + 1)), out(count, 0.f);
    ASSERT_EQ(cclAllReduce(in.data(), out.data(), count, cclFloat32, cclSum, comm, nullptr), cclSuccess)
        << "rank " << r << ": " << cclGetLastError(nullptr);
    const float expected = kRanks * (kRanks + 1) / 2;
    EXPECT_EQ(out.front(), expected);
    EXPECT_EQ(out.back(), expected);
    EXPECT_EQ(cclCommDestroy(comm), cclSuccess);
    comm = nullptr;
  }));
}

INSTANTIATE_TEST_SUITE_P(Transports, LocalFailure,
                         ::testing::Values(Param{"shm", Fault::kInternalError}, Param{"ucx", Fault::kInternalError},
                                           Param{"local", Fault::kInternalError}, Param{"shm", Fault::kOutOfMemory}),
                         paramName);

}  // namespace
}  // namespace ccl
