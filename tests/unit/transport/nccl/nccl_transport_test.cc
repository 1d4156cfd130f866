// SPDX-License-Identifier: BSD-3-Clause
// The NCCL transport and the stream executor over it, against a recording fake of the NCCL
// functions they call: the call sequence (unique id on rank 0 only, one communicator per
// rank, ncclGroupStart / sends and receives / ncclGroupEnd per wave, each wave after the
// communication stream waited for the caller's stream, the caller's stream waiting for the
// wave before using its bytes) is checked without a GPU. Also how the real library is
// loaded: never ccl's own face.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/algorithms/algorithms.h"
#include "collectives/exec/links/nccl_link.h"
#include "collectives/exec/stream_executor.h"
#include "common/error.h"
#include "rank_threads.h"
#include "scoped_env.h"
#include "transport/bootstrap/bootstrap.h"

namespace ccl::coll {
namespace {

namespace nccl = transport::nccl;

// What the fake saw, in order, from every rank.
struct Call {
  int rank;
  std::string what;  // "groupStart", "send", "recv", "groupEnd", "init", "destroy", "abort", "uniqueId", stream ops
  int peer = -1;
  size_t bytes = 0;
  const void* stream = nullptr;
  std::string id;  // init: the unique id's text
};

std::mutex gMutex;
std::vector<Call> gLog;
thread_local int tRank = -1;       // the rank this thread plays
std::atomic<int> gFailSendOf{-1};  // a send of this many bytes fails
std::atomic<bool> gFailUniqueId{false};
// Non-blocking communicators: ncclGroupEnd says ncclInProgress, and ncclCommGetAsyncError
// keeps saying it for this many more polls, then gAsyncAfter.
std::atomic<int> gPendingPolls{-1};
std::atomic<int> gAsyncAfter{0};
std::atomic<bool> gLogPolls{true};  // false: polls are not logged (a wait of a second polls millions of times)
std::atomic<int> gIds{0};

void log(int rank, std::string what, int peer = -1, size_t bytes = 0, const void* stream = nullptr,
         std::string id = {}) {
  std::lock_guard<std::mutex> lock(gMutex);
  gLog.push_back(Call{rank, std::move(what), peer, bytes, stream, std::move(id)});
}

int rankOf(nccl::Comm c) { return static_cast<int>(reinterpret_cast<uintptr_t>(c) - 0x1000); }

nccl::Functions fake() {
  nccl::Functions f;
  f.library = "recording fake";
  f.getUniqueId = [](nccl::UniqueId* id) {
    log(tRank, "uniqueId");
    if (gFailUniqueId) return 2;  // ncclSystemError
    std::memset(id, 0, sizeof(*id));
    std::snprintf(id->internal, sizeof(id->internal), "fake-id-%d", ++gIds);
    return 0;
  };
  f.commInitRank = [](nccl::Comm* comm, int nranks, nccl::UniqueId id, int rank) {
    log(rank, "init", nranks, 0, nullptr, id.internal);
    *comm = reinterpret_cast<nccl::Comm>(uintptr_t{0x1000} + static_cast<uintptr_t>(rank));
    return 0;
  };
  f.commDestroy = [](nccl::Comm c) {
    log(rankOf(c), "destroy");
    return 0;
  };
  f.commAbort = [](nccl::Comm c) {
    log(rankOf(c), "abort");
    return 0;
  };
  f.commGetAsyncError = [](nccl::Comm c, int* r) {
    if (gPendingPolls < 0) {
      *r = 0;
      return 0;
    }
    if (gLogPolls) log(rankOf(c), "asyncError");
    *r = gPendingPolls > 0 ? nccl::kInProgress : gAsyncAfter.load();
    if (gPendingPolls > 0) --gPendingPolls;
    return 0;
  };
  f.groupStart = [] {
    log(tRank, "groupStart");
    return 0;
  };
  f.groupEnd = [] {
    log(tRank, "groupEnd");
    return gPendingPolls >= 0 ? nccl::kInProgress : 0;
  };
  f.send = [](const void*, size_t n, int type, int peer, nccl::Comm c, nccl::Stream s) {
    EXPECT_EQ(type, nccl::kUint8);
    log(rankOf(c), "send", peer, n, s);
    return gFailSendOf.load() == static_cast<int>(n) ? 3 : 0;  // ncclInternalError
  };
  f.recv = [](void*, size_t n, int type, int peer, nccl::Comm c, nccl::Stream s) {
    EXPECT_EQ(type, nccl::kUint8);
    log(rankOf(c), "recv", peer, n, s);
    return 0;
  };
  f.getErrorString = [](int r) { return r == 3 ? "fake internal error" : "fake error"; };
  return f;
}

// What a rank's calls were, in order.
std::vector<std::string> whatOf(const std::vector<Call>& calls) {
  std::vector<std::string> seq;
  for (const Call& c : calls) seq.push_back(c.what);
  return seq;
}

std::vector<Call> callsOf(int rank) {
  std::lock_guard<std::mutex> lock(gMutex);
  std::vector<Call> out;
  for (const Call& c : gLog)
    if (c.rank == rank) out.push_back(c);
  return out;
}

// A stream that runs nothing and records what was asked of it, into the fake's log, so the
// order of stream operations and NCCL calls of one rank can be read together.
class RecordingStream final : public Stream {
 public:
  explicit RecordingStream(std::string name) : name_(std::move(name)) {}
  void enqueue(Step) override { log(tRank, "enqueue " + name_); }
  Event record() override {
    log(tRank, "record " + name_);
    return Event{this, ++tickets_};
  }
  void wait(const Event& e) override {
    log(tRank, "wait " + name_ + "<-" + static_cast<RecordingStream*>(e.stream)->name_);
  }
  void block(const Event&) override {}
  bool reached(const Event&) override { return false; }
  cclResult_t takeError(std::string*) override { return cclSuccess; }
  void* native() override { return this; }

 private:
  std::string name_;
  uint64_t tickets_ = 0;
};

class NcclTransport : public ::testing::Test {
 protected:
  void SetUp() override {
    std::lock_guard<std::mutex> lock(gMutex);
    gLog.clear();
    gFailSendOf = -1;
    gFailUniqueId = false;
    gPendingPolls = -1;
    gAsyncAfter = 0;
  }

  // Runs body(rank, transport) on n rank threads joined by a real bootstrap.
  void run(int n, const std::function<void(int, nccl::Transport&)>& body) {
    cclUniqueId id;
    bootstrap::createUniqueId(&id);
    ccltest::expectNoneThrew(ccltest::runRanks(n, [&](int r) {
      tRank = r;
      auto bs = bootstrap::Bootstrap::connect(id, r, n, std::chrono::seconds(20));
      nccl::Transport t(fake(), *bs);
      body(r, t);
    }));
  }
};

TEST_F(NcclTransport, RankZeroMakesTheIdAndEveryRankItsCommunicator) {
  run(3, [](int, nccl::Transport&) {});
  int ids = 0;
  std::string first;
  for (int r = 0; r < 3; ++r) {
    const auto calls = callsOf(r);
    for (const Call& c : calls) {
      if (c.what == "uniqueId") {
        EXPECT_EQ(r, 0) << "only rank 0 makes the id";
        ++ids;
      }
      if (c.what == "init") {
        EXPECT_EQ(c.peer, 3) << "nranks";
        if (first.empty()) first = c.id;
        EXPECT_EQ(c.id, first) << "every rank joins rank 0's id";
        EXPECT_EQ(c.id.rfind("fake-id-", 0), 0u);
      }
    }
    ASSERT_FALSE(calls.empty());
    EXPECT_EQ(calls.back().what, "destroy");
  }
  EXPECT_EQ(ids, 1);
}

TEST_F(NcclTransport, AGroupIsStartSendsReceivesEndOnTheStream) {
  int stream = 0;
  run(2, [&](int r, nccl::Transport& t) {
    char a[64], b[64];
    const nccl::Op ops[] = {{true, 1 - r, a, 64}, {false, 1 - r, b, 48}};
    t.group(ops, &stream);
  });
  for (int r = 0; r < 2; ++r) {
    const auto calls = callsOf(r);
    std::vector<std::string> seq;
    for (const Call& c : calls)
      if (c.what != "init" && c.what != "uniqueId") seq.push_back(c.what);
    EXPECT_EQ(seq, (std::vector<std::string>{"groupStart", "send", "recv", "groupEnd", "destroy"}));
    for (const Call& c : calls) {
      if (c.what != "send" && c.what != "recv") continue;
      EXPECT_EQ(c.stream, &stream);
      EXPECT_EQ(c.peer, 1 - r);
      EXPECT_EQ(c.bytes, c.what == "send" ? 64u : 48u);
    }
  }
}

TEST_F(NcclTransport, AFailedPostStillEndsTheGroupAndNamesNcclsError) {
  gFailSendOf = 40;
  run(1, [](int, nccl::Transport& t) {
    char a[64];
    const nccl::Op ops[] = {{true, 0, a, 40}, {false, 0, a, 40}};
    try {
      t.group(ops, nullptr);
      ADD_FAILURE() << "a failed ncclSend must throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), cclSystemError);
      EXPECT_NE(std::string(e.what()).find("ncclSend"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("fake internal error"), std::string::npos) << e.what();
    }
    const nccl::Op bad[] = {{true, 5, a, 4}};
    EXPECT_THROW(t.group(bad, nullptr), Error);  // no rank 5
  });
  const auto calls = callsOf(0);
  EXPECT_EQ(whatOf(calls),
            (std::vector<std::string>{"uniqueId", "init", "groupStart", "send", "recv", "groupEnd", "destroy"}));
}

// A non-blocking communicator's ncclGroupEnd returns ncclInProgress before the transfers are
// on the stream: the group returns only once ncclCommGetAsyncError says they are, and an
// asynchronous error while waiting is the group's failure.
TEST_F(NcclTransport, ANonBlockingGroupReturnsOnceEnqueued) {
  gPendingPolls = 3;
  run(1, [](int, nccl::Transport& t) {
    char a[8];
    const nccl::Op ops[] = {{true, 0, a, 8}, {false, 0, a, 8}};
    t.group(ops, nullptr);
    EXPECT_EQ(gPendingPolls.load(), 0) << "returned while the communicator was still enqueuing";
    gPendingPolls = 2;
    gAsyncAfter = 2;  // ncclSystemError
    try {
      t.group(ops, nullptr);
      ADD_FAILURE() << "an asynchronous error while enqueuing must throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), cclSystemError);
      EXPECT_NE(std::string(e.what()).find("asynchronous"), std::string::npos) << e.what();
    }
    gPendingPolls = -1;
  });
  EXPECT_EQ(whatOf(callsOf(0)),
            (std::vector<std::string>{"uniqueId", "init", "groupStart", "send", "recv", "groupEnd", "asyncError",
                                      "asyncError", "asyncError", "asyncError", "groupStart", "send", "recv",
                                      "groupEnd", "asyncError", "asyncError", "asyncError", "destroy"}));
}

// A group that stays in progress (a peer that never posts its side) fails at CCL_TIMEOUT, as
// every blocking wait does, instead of spinning until an abort.
TEST_F(NcclTransport, AGroupThatStaysInProgressFailsAtTheTimeout) {
  ccltest::ScopedEnv timeout("CCL_TIMEOUT", "1");
  gPendingPolls = std::numeric_limits<int>::max();
  gLogPolls = false;
  run(1, [](int, nccl::Transport& t) {
    char a[8];
    const nccl::Op ops[] = {{true, 0, a, 8}};
    try {
      t.group(ops, nullptr);
      ADD_FAILURE() << "a group that never leaves ncclInProgress returned";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), cclSystemError);
      EXPECT_NE(std::string(e.what()).find("CCL_TIMEOUT"), std::string::npos) << e.what();
    }
  });
  gPendingPolls = -1;
  gLogPolls = true;
}

TEST_F(NcclTransport, NoIdOnRankZeroFailsEveryRankInsteadOfHanging) {
  gFailUniqueId = true;
  cclUniqueId id;
  bootstrap::createUniqueId(&id);
  const auto errors = ccltest::runRanks(3, [&](int r) {
    tRank = r;
    auto bs = bootstrap::Bootstrap::connect(id, r, 3, std::chrono::seconds(20));
    nccl::Transport t(fake(), *bs);
  });
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(errors[r]) << "rank " << r << " made a communicator without an id";
}

TEST_F(NcclTransport, AbortedCommunicatorIsAbortedNotDestroyed) {
  run(1, [](int, nccl::Transport& t) {
    t.abort();
    t.abort();  // once
    char a[4];
    const nccl::Op ops[] = {{true, 0, a, 4}};
    EXPECT_THROW(t.group(ops, nullptr), Error);
  });
  EXPECT_EQ(whatOf(callsOf(0)), (std::vector<std::string>{"uniqueId", "init", "abort"}));
}

// The stream executor over NCCL: per wave, the communication stream waits for the caller's
// stream, then one group; the caller's stream waits for the group before the steps that
// read what it received; every transfer is on the communication stream; the two ends post
// the same sizes in the same order, which NCCL requires.
TEST_F(NcclTransport, StreamExecutorPostsEachWaveAsOneGroupAfterTheCallersStream) {
  const int n = 3;
  auto argsOf = [&](int r) {
    CollArgs a;
    a.rank = r;
    a.nranks = n;
    a.count = 3000;
    a.chunkBytes = 4096;
    a.codec = codec::defaultParams(cclCodecInt8);
    return a;
  };
  std::vector<size_t> waves(n);
  std::vector<const void*> commHandle(n);
  run(n, [&](int r, nccl::Transport& t) {
    auto plan = std::make_shared<const Plan>(planCollective(Coll::kAllReduce, argsOf(r)));
    auto sched = std::make_shared<const Schedule>(
        scheduleWaves([&](int q) { return planCollective(Coll::kAllReduce, argsOf(q)); }, n, r));
    waves[r] = sched->waves.size();
    std::vector<float> in(3000, 1.0f), out(3000);
    std::vector<std::byte> scratch(plan->scratchBytes);
    RecordingStream caller("caller"), comm("comm");
    commHandle[r] = comm.native();
    NcclLink link(t);
    HostKernels kernels;
    executeOnStream(StreamJob{plan, sched, Buffers{in.data(), out.data(), scratch.data(), nullptr}, 0, 1, nullptr, {}},
                    link, kernels, caller, comm);
  });
  std::vector<std::vector<std::vector<std::pair<int, size_t>>>> sends(n), recvs(n);  // [rank][group] = (peer, bytes)
  for (int r = 0; r < n; ++r) {
    const auto calls = callsOf(r);
    ASSERT_GT(waves[r], 1u);
    size_t groups = 0;
    bool inGroup = false;
    std::string previous;
    bool callerWaitedForThisGroup = true;
    for (const Call& c : calls) {
      if (c.what == "groupStart") {
        EXPECT_FALSE(inGroup);
        EXPECT_EQ(previous, "wait comm<-caller") << "rank " << r << " group " << groups;
        EXPECT_TRUE(callerWaitedForThisGroup) << "the caller must wait for each group before the next";
        inGroup = true;
        sends[r].emplace_back();
        recvs[r].emplace_back();
      } else if (c.what == "groupEnd") {
        EXPECT_TRUE(inGroup);
        inGroup = false;
        ++groups;
        callerWaitedForThisGroup = false;
      } else if (c.what == "send" || c.what == "recv") {
        EXPECT_TRUE(inGroup) << "a transfer outside a group";
        EXPECT_EQ(c.stream, commHandle[r]) << "transfers go on the communication stream";
        (c.what == "send" ? sends : recvs)[r].back().push_back({c.peer, c.bytes});
      } else if (c.what == "wait caller<-comm") {
        callerWaitedForThisGroup = true;
      } else if (c.what == "enqueue caller" && !callerWaitedForThisGroup && groups > 0) {
        // Steps that overlap the group may run, but none reads what it receives: checked by
        // the byte tests; here, only that the wait comes before the call ends.
      }
      previous = c.what;
    }
    EXPECT_EQ(groups, waves[r]) << "one group per wave";
    EXPECT_TRUE(callerWaitedForThisGroup) << "the call ends with the caller joined to the last group";
    EXPECT_EQ(calls.back().what, "destroy");
  }
  // Group g of rank a sends to b exactly what group g of rank b receives from a, in order.
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      for (size_t g = 0; g < sends[a].size(); ++g) {
        std::vector<size_t> out, in;
        for (auto [peer, bytes] : sends[a][g])
          if (peer == b) out.push_back(bytes);
        for (auto [peer, bytes] : recvs[b][g])
          if (peer == a) in.push_back(bytes);
        EXPECT_EQ(out, in) << a << " -> " << b << " group " << g;
      }
}

TEST(NcclLoad, RefusesCclsOwnFaceAndMissingLibraries) {
  try {
    nccl::load("/nonexistent/libnccl.so.2");
    ADD_FAILURE() << "loaded a missing library";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclSystemError);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/libnccl.so.2"), std::string::npos);
  }
  if (std::string(CCL_TEST_FACE_LIBRARY).empty()) GTEST_SKIP() << "this build has no NCCL face";
  try {
    nccl::load(CCL_TEST_FACE_LIBRARY);
    ADD_FAILURE() << "loaded ccl's own face as the real NCCL";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("ccl's own NCCL face"), std::string::npos) << e.what();
  }
}

TEST(NcclLoad, FindsEveryFunctionInNvidiasLibrary) {
  const std::string path = CCL_TEST_NVIDIA_NCCL;
  if (path.empty() || !std::filesystem::exists(path)) GTEST_SKIP() << "no NVIDIA NCCL library at '" << path << "'";
  const nccl::Functions f = nccl::load(path);
  EXPECT_TRUE(f.getUniqueId && f.commInitRank && f.commDestroy && f.commAbort && f.commGetAsyncError && f.groupStart &&
              f.groupEnd && f.send && f.recv && f.getErrorString);
  EXPECT_STREQ(f.getErrorString(0), "no error");  // NVIDIA's text for ncclSuccess
}

}  // namespace
}  // namespace ccl::coll
