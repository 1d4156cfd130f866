// Runs one plan per rank, each on its own thread, over the in-process transport.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "collectives/executor.h"
#include "local_transport.h"

namespace ccl::testing {

struct RankBuffers {
  const void* send = nullptr;
  void* recv = nullptr;
  float* feedback = nullptr;
};

inline void runPlans(int n, const std::function<coll::Plan(int)>& build, const std::function<RankBuffers(int)>& buffers,
                     uint64_t callSeed = 0) {
  Fabric fabric;
  std::vector<std::thread> threads;
  std::vector<std::string> errors(n);
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        coll::Plan plan = build(r);
        std::vector<std::byte> scratch(plan.scratchBytes);
        LocalTransport t(fabric, r, n);
        RankBuffers b = buffers(r);
        coll::Job job;
        job.plan = &plan;
        job.buffers = {b.send, b.recv, scratch.data(), b.feedback};
        job.transport = &t;
        job.callSeed = callSeed;
        coll::ExecOptions opt;
        opt.timeout = std::chrono::seconds(20);
        coll::execute(std::span<const coll::Job>(&job, 1), opt);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

}  // namespace ccl::testing
