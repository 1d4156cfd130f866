// SPDX-License-Identifier: BSD-3-Clause
// Runs one plan per rank, each on its own thread (ccltest::runRanks), over the library's
// in-process transport.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "collectives/exec/executor.h"
#include "rank_threads.h"
#include "transport/local/local_transport.h"

namespace ccl::testing {

struct RankBuffers {
  const void* send = nullptr;
  void* recv = nullptr;
  float* feedback = nullptr;
};

inline void runPlans(int n, const std::function<coll::Plan(int)>& build, const std::function<RankBuffers(int)>& buffers,
                     uint64_t callSeed = 0) {
  const auto fabric = transport::makeFabric(n);
  ccltest::expectNoneThrew(ccltest::runRanks(n, [&](int r) {
    coll::Plan plan = build(r);
    std::vector<std::byte> scratch(plan.scratchBytes);
    const auto t = transport::createLocalTransport(fabric, r);
    RankBuffers b = buffers(r);
    coll::Job job;
    job.plan = &plan;
    job.buffers = {b.send, b.recv, scratch.data(), b.feedback};
    job.transport = t.get();
    job.callSeed = callSeed;
    coll::ExecOptions opt;
    opt.timeout = std::chrono::seconds(20);
    coll::execute(std::span<const coll::Job>(&job, 1), opt);
  }));
}

}  // namespace ccl::testing
