// SPDX-License-Identifier: BSD-3-Clause
// The call digest (Job::signature): a job ends successfully only once its rank has seen
// every rank's digest, not only its ring neighbour's. With three ranks, one of which called
// otherwise, the rank whose neighbour called as it did used to finish with a result that
// mixed the two calls whenever the ranks that saw the difference were slow to say so.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collectives/algorithms/algorithms.h"
#include "collectives/exec/executor.h"
#include "common/error.h"
#include "common/tags.h"
#include "forwarding_transport.h"
#include "rank_threads.h"
#include "transport/local/local_transport.h"

namespace ccl::coll {
namespace {

bool isSignature(uint64_t tag) {
  return ((tag & 0xffffffffu) >> tags::kStepShift) == (tags::kSignatureTag >> tags::kStepShift);
}

// A receive of a digest that completes only once `open` is set: a rank that is slow to look
// at its neighbour's digest.
class HeldRequest final : public transport::Request {
 public:
  HeldRequest(std::unique_ptr<transport::Request> r, const std::atomic<bool>& open) : r_(std::move(r)), open_(open) {}
  bool test() override { return open_.load() && r_->test(); }
  size_t receivedBytes() const override { return r_->receivedBytes(); }

 private:
  std::unique_ptr<transport::Request> r_;
  const std::atomic<bool>& open_;
};

class HoldingDigests final : public ccltest::ForwardingTransport {
 public:
  HoldingDigests(std::unique_ptr<transport::Transport> t, const std::atomic<bool>& open)
      : ForwardingTransport(std::move(t)), open_(open) {}
  const char* name() const override { return "holding-digests"; }
  std::unique_ptr<transport::Request> irecv(int peer, uint64_t tag, void* buf, size_t bytes) override {
    auto r = ForwardingTransport::irecv(peer, tag, buf, bytes);
    if (!isSignature(tag)) return r;
    return std::make_unique<HeldRequest>(std::move(r), open_);
  }

 private:
  const std::atomic<bool>& open_;
};

// Rank 1 calls otherwise (another digest); ranks 1 and 2, which see it in their previous
// rank's digest, look only once rank 0 has ended, or after a second (rank 0 waits for them).
TEST(CallDigest, NoRankEndsWithoutEveryRanksDigest) {
  for (int n : {3, 4, 5}) {
    const auto fabric = transport::makeFabric(n);
    std::atomic<bool> open{false};
    std::vector<std::string> outcome(static_cast<size_t>(n));
    const size_t count = 4096;
    ccltest::expectNoneThrew(ccltest::runRanks(n, [&](int r) {
      std::unique_ptr<transport::Transport> t = transport::createLocalTransport(fabric, r);
      if (r != 0) t = std::make_unique<HoldingDigests>(std::move(t), open);
      CollArgs a;
      a.rank = r;
      a.nranks = n;
      a.count = count;
      a.dtype = cclFloat32;
      a.op = cclSum;
      a.algo = Algo::kRing;
      const Plan plan = planAllReduce(a);
      std::vector<float> send(count, float(r + 1)), recv(count, 0.f);
      std::vector<std::byte> scratch(plan.scratchBytes);
      Job job;
      job.plan = &plan;
      job.buffers = {send.data(), recv.data(), scratch.data(), nullptr};
      job.transport = t.get();
      job.signature = r == 1 ? 0x2b : 0x2a;
      ExecOptions opt;
      opt.timeout = std::chrono::seconds(20);
      std::thread opener;
      if (r == 0) {
        opener = std::thread([&] {
          for (int i = 0; i < 100 && !open.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
          open.store(true);
        });
      }
      try {
        execute(std::span<const Job>(&job, 1), opt);
        outcome[static_cast<size_t>(r)] = "success";
      } catch (const Error& e) {
        outcome[static_cast<size_t>(r)] = std::string("failed: ") + e.what();
      }
      if (r == 0) {
        open.store(true);
        opener.join();
      }
    }));
    for (int r = 0; r < n; ++r)
      EXPECT_NE(outcome[static_cast<size_t>(r)], "success")
          << n << " ranks: rank " << r << " ended a call that rank 1 made otherwise";
  }
}

}  // namespace
}  // namespace ccl::coll
