// SPDX-License-Identifier: BSD-3-Clause
// Receives reduced as they arrive (StepKind::kRecvReduce, CollArgs::readInPlace): the ring's
// and the hierarchical allreduce's plans that read in place give the same bits as the plans
// that receive into scratch and reduce from there, over every way the host executor runs the
// step: a transport that hands messages over where it holds them (the shared-memory channel,
// the in-process one) and one that cannot (the step's landing in scratch).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "collectives/algorithms/algorithms.h"
#include "collectives/exec/compute_cost.h"
#include "collectives/exec/executor.h"
#include "collectives/plan/cost.h"
#include "collectives/plan/topology.h"
#include "common/dtype.h"
#include "forwarding_transport.h"
#include "rank_threads.h"
#include "shard.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/factory.h"
#include "transport/local/local_transport.h"

namespace ccl::coll {
namespace {

// The in-process transport, declining every receive in place (the base's irecvInPlace):
// the executor's other path.
class Declining final : public ccltest::ForwardingTransport {
 public:
  using ForwardingTransport::ForwardingTransport;
  const char* name() const override { return "declining"; }
};

enum class Via { kLocal, kDeclining, kShm };
const char* nameOf(Via v) { return v == Via::kLocal ? "local" : v == Via::kDeclining ? "landing" : "shm"; }

struct Ranks {
  int n;
  std::vector<std::vector<uint8_t>> send, recv;
};

// Runs build(rank) on n thread ranks over `via`, each rank's send and receive buffers from `run`.
void runOver(Via via, Ranks& run, const std::function<Plan(int)>& build) {
  const auto fabric = transport::makeFabric(run.n);
  cclUniqueId id;
  bootstrap::createUniqueId(&id);
  ccltest::expectNoneThrew(ccltest::runRanks(run.n, [&](int r) {
    std::unique_ptr<bootstrap::Bootstrap> bs;
    std::unique_ptr<transport::Transport> t;
    if (via == Via::kShm) {
      bs = bootstrap::Bootstrap::connect(id, r, run.n, std::chrono::milliseconds(30000));
      t = transport::createTransport("shm", *bs);
    } else {
      t = transport::createLocalTransport(fabric, r);
      if (via == Via::kDeclining) t = std::make_unique<Declining>(std::move(t));
    }
    const Plan plan = build(r);
    std::vector<std::byte> scratch(plan.scratchBytes);
    Job job;
    job.plan = &plan;
    job.buffers = {run.send[r].data(), run.recv[r].data(), scratch.data(), nullptr};
    job.transport = t.get();
    ExecOptions opt;
    opt.timeout = std::chrono::seconds(20);
    execute(std::span<const Job>(&job, 1), opt);
    if (bs) bs->barrier();  // no rank leaves the channel while a peer still reads from it
  }));
}

size_t countKind(const Plan& p, StepKind k) {
  return static_cast<size_t>(std::count_if(p.steps.begin(), p.steps.end(), [&](const Step& s) { return s.kind == k; }));
}

// Values whose float sums round differently in another order; small integers for int32.
Ranks randomRun(int n, cclDataType_t dtype, size_t count, unsigned seed) {
  Ranks run{n, {}, {}};
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  const size_t es = dataTypeSize(dtype);
  for (int r = 0; r < n; ++r) {
    std::vector<uint8_t> v(count * es);
    for (size_t i = 0; i < count; ++i) {
      const float x = d(gen) * std::ldexp(1.0f, static_cast<int>(gen() % 20) - 10);
      uint32_t bits;
      std::memcpy(&bits, &x, sizeof(bits));
      if (dtype == cclInt32) {
        const int32_t k = static_cast<int32_t>(gen() % 2001) - 1000;
        std::memcpy(&v[i * es], &k, es);
      } else if (dtype == cclBfloat16) {
        const uint16_t h = static_cast<uint16_t>(bits >> 16);
        std::memcpy(&v[i * es], &h, es);
      } else {
        std::memcpy(&v[i * es], &bits, es);
      }
    }
    run.send.push_back(std::move(v));
    run.recv.emplace_back(count * es, 0xee);
  }
  return run;
}

// The largest case's chunks span more than one of the shared-memory channel's fragments
// (64 KiB), the smaller cases' many chunks lap its ring. Under a sanitizer (several times
// slower) the largest case is smaller.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr size_t kLarge = 20000;
#else
constexpr size_t kLarge = 70000;
#endif

struct Shape {
  const char* name;
  std::vector<int> nodes;  // one entry: flat (ring); several: hierarchical
};

class ReadInPlace : public ::testing::TestWithParam<std::tuple<Shape, cclDataType_t, cclRedOp_t, bool>> {};

TEST_P(ReadInPlace, SameBitsAsReceivingIntoScratch) {
  const auto& [shape, dtype, op, inPlace] = GetParam();
  int n = 0;
  for (int s : shape.nodes) n += s;
  const Topology topo = Topology::blocks(shape.nodes);
  for (size_t count : {size_t{1}, size_t{1001}, kLarge}) {
    auto args = [&](int r, bool read) {
      CollArgs a;
      a.rank = r;
      a.nranks = n;
      a.count = count;
      a.dtype = dtype;
      a.op = op;
      a.inPlace = inPlace;
      // Small cases: many chunks, the receives of several in flight; the large: chunks of
      // several pieces each.
      a.chunkBytes = count == kLarge ? size_t{1} << 17 : 4096;
      a.algo = shape.nodes.size() > 1 ? Algo::kHier : Algo::kRing;
      a.topo = shape.nodes.size() > 1 ? &topo : nullptr;
      a.readInPlace = read;
      return a;
    };
    const Plan probe = planAllReduce(args(0, true));
    ASSERT_GT(countKind(probe, StepKind::kRecvReduce), 0u) << shape.name << " reads nothing in place";
    EXPECT_EQ(countKind(planAllReduce(args(0, false)), StepKind::kRecvReduce), 0u);

    Ranks want = randomRun(n, dtype, count, static_cast<unsigned>(count));
    if (inPlace) want.recv = want.send;
    runOver(Via::kLocal, want, [&](int r) { return planAllReduce(args(r, false)); });
    for (Via via : {Via::kLocal, Via::kDeclining, Via::kShm}) {
      Ranks got = randomRun(n, dtype, count, static_cast<unsigned>(count));
      if (inPlace) got.recv = got.send;
      runOver(via, got, [&](int r) { return planAllReduce(args(r, true)); });
      for (int r = 0; r < n; ++r)
        ASSERT_TRUE(got.recv[r] == want.recv[r])
            << shape.name << " over " << nameOf(via) << ", count " << count << ", rank " << r;
    }
  }
}

const Shape kShapes[] = {{"flat2", {2}}, {"flat3", {3}}, {"flat5", {5}}, {"nodes2x2", {2, 2}}, {"nodes3and2", {3, 2}}};

// Every shape x type x op x placement (in a sharded build, its shard: harness/shard.h).
std::vector<std::tuple<Shape, cclDataType_t, cclRedOp_t, bool>> readInPlaceCases() {
  std::vector<std::tuple<Shape, cclDataType_t, cclRedOp_t, bool>> all;
  for (const Shape& shape : kShapes)
    for (cclDataType_t dtype : {cclFloat32, cclBfloat16, cclInt32})
      for (cclRedOp_t op : {cclSum, cclMax, cclAvg})
        for (bool inPlace : {false, true}) all.emplace_back(shape, dtype, op, inPlace);
  return ccltest::Shard::fromEnv().of(all);
}

INSTANTIATE_TEST_SUITE_P(Plans, ReadInPlace, ::testing::ValuesIn(readInPlaceCases()), [](const auto& info) {
  return std::string(std::get<0>(info.param).name) + "_" + dataTypeName(std::get<1>(info.param)) + "_" +
         redOpName(std::get<2>(info.param)) + (std::get<3>(info.param) ? "_InPlace" : "_OutOfPlace");
});

// A receive read in place is priced by its own measured rate, where one is measured.
TEST(ReadInPlaceCost, PricedByTheMeasuredRate) {
  Plan p;
  p.dtype = cclFloat32;
  const StepId id = p.recvReduce(1, 0, {Buf::kRecv, 0}, {Buf::kSend, 0}, p.scratch(4096), 1024);
  ComputeCost c;
  c.reduce = 1e9;
  EXPECT_DOUBLE_EQ(c.seconds(p, p.steps[id]), 4096 / 1e9);  // untimed: as a reduce
  c.reduceFrom = 2e9;
  EXPECT_DOUBLE_EQ(c.seconds(p, p.steps[id]), 4096 / 2e9);
  const ComputeCost measured = measureComputeCost({});
  EXPECT_GT(measured.reduceFrom, 0);
}

}  // namespace
}  // namespace ccl::coll
