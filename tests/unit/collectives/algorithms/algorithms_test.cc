// SPDX-License-Identifier: BSD-3-Clause
// Every algorithm's plans, run by the host executor over an in-process transport, against a
// serial reference: all rank counts 1..8, awkward counts, small chunks (deep pipelines),
// forced algorithms, in place and out of place.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "collectives/algorithms/algorithms.h"
#include "collectives/exec/element_ops.h"
#include "collectives/exec/executor.h"
#include "common/dtype.h"
#include "common/floatconv.h"
#include "plan_runner.h"
#include "shard.h"

namespace ccl::coll {
namespace {

using Data = std::vector<int32_t>;

void runAll(int n, const std::function<Plan(int)>& build, std::vector<Data>& send, std::vector<Data>& recv,
            bool inPlace) {
  testing::runPlans(n, build, [&](int r) {
    return testing::RankBuffers{inPlace ? static_cast<const void*>(recv[r].data()) : send[r].data(), recv[r].data()};
  });
}

int32_t value(int rank, size_t i) { return static_cast<int32_t>((i * 7 + rank * 13) % 23) - 11; }

struct Case {
  int n;
  size_t count;
  size_t chunkBytes;
  Algo algo;
  bool inPlace;
};

std::vector<Case> cases() {
  std::vector<Case> v;
  for (int n = 1; n <= 8; ++n)
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{100}, size_t{1001}})
      for (size_t chunk : {size_t{64}, size_t{1} << 18})
        for (Algo algo : {Algo::kAuto, Algo::kRing, Algo::kTree, Algo::kDirect})
          for (bool inPlace : {false, true}) v.push_back({n, count, chunk, algo, inPlace});
  return v;
}

CollArgs argsFor(const Case& c, int rank, cclRedOp_t op = cclSum, int root = 0) {
  CollArgs a;
  a.rank = rank;
  a.nranks = c.n;
  a.count = c.count;
  a.dtype = cclInt32;
  a.op = op;
  a.root = root;
  a.inPlace = c.inPlace;
  a.chunkBytes = c.chunkBytes;
  a.algo = c.algo;
  return a;
}

class PlanTest : public ::testing::TestWithParam<Case> {};

TEST_P(PlanTest, AllReduce) {
  const Case c = GetParam();
  for (cclRedOp_t op : {cclSum, cclMax, cclAvg}) {
    std::vector<Data> send(c.n, Data(c.count)), recv(c.n, Data(c.count));
    for (int r = 0; r < c.n; ++r)
      for (size_t i = 0; i < c.count; ++i) (c.inPlace ? recv : send)[r][i] = value(r, i);
    runAll(
        c.n, [&](int r) { return planAllReduce(argsFor(c, r, op)); }, send, recv, c.inPlace);
    for (size_t i = 0; i < c.count; ++i) {
      int32_t want = op == cclMax ? value(0, i) : 0;
      for (int r = 0; r < c.n; ++r) want = op == cclMax ? std::max(want, value(r, i)) : want + value(r, i);
      if (op == cclAvg) want /= c.n;
      for (int r = 0; r < c.n; ++r) ASSERT_EQ(recv[r][i], want) << "op " << op << " rank " << r << " i " << i;
    }
  }
}

TEST_P(PlanTest, ReduceScatterAndAllGather) {
  const Case c = GetParam();
  std::vector<Data> send(c.n, Data(c.count * c.n)), recv(c.n, Data(c.count * c.n));
  for (int r = 0; r < c.n; ++r)
    for (size_t i = 0; i < c.count * c.n; ++i) send[r][i] = value(r, i);
  std::vector<Data> rsIn = send;
  // Reduce-scatter, out of place only here (in place is exercised by the API tests).
  runAll(
      c.n,
      [&](int r) {
        auto a = argsFor(c, r);
        a.inPlace = false;
        return planReduceScatter(a);
      },
      rsIn, recv, false);
  for (int r = 0; r < c.n; ++r)
    for (size_t i = 0; i < c.count; ++i) {
      int32_t want = 0;
      for (int k = 0; k < c.n; ++k) want += value(k, r * c.count + i);
      ASSERT_EQ(recv[r][i], want) << "reduce-scatter rank " << r << " i " << i;
    }
  // Allgather: rank r contributes block r of its input.
  std::vector<Data> agIn(c.n, Data(c.count)), agOut(c.n, Data(c.count * c.n));
  for (int r = 0; r < c.n; ++r)
    for (size_t i = 0; i < c.count; ++i) {
      agIn[r][i] = value(r, i);
      if (c.inPlace) agOut[r][r * c.count + i] = value(r, i);
    }
  runAll(
      c.n, [&](int r) { return planAllGather(argsFor(c, r)); }, agIn, agOut, false);
  for (int r = 0; r < c.n; ++r)
    for (int k = 0; k < c.n; ++k)
      for (size_t i = 0; i < c.count; ++i) ASSERT_EQ(agOut[r][k * c.count + i], value(k, i)) << r << " " << k;
}

TEST_P(PlanTest, BroadcastAndReduce) {
  const Case c = GetParam();
  for (int root : {0, c.n - 1, c.n / 2}) {
    std::vector<Data> send(c.n, Data(c.count)), recv(c.n, Data(c.count));
    for (int r = 0; r < c.n; ++r)
      for (size_t i = 0; i < c.count; ++i) (c.inPlace && r == root ? recv : send)[r][i] = value(r, i);
    runAll(
        c.n, [&](int r) { return planBroadcast(argsFor(c, r, cclSum, root)); }, send, recv, c.inPlace);
    for (int r = 0; r < c.n; ++r)
      for (size_t i = 0; i < c.count; ++i) ASSERT_EQ(recv[r][i], value(root, i)) << "bcast rank " << r;

    std::vector<Data> rin(c.n, Data(c.count)), rout(c.n, Data(c.count));
    for (int r = 0; r < c.n; ++r)
      for (size_t i = 0; i < c.count; ++i) rin[r][i] = rout[r][i] = value(r, i);
    runAll(
        c.n, [&](int r) { return planReduce(argsFor(c, r, cclSum, root)); }, rin, rout, c.inPlace);
    for (size_t i = 0; i < c.count; ++i) {
      int32_t want = 0;
      for (int r = 0; r < c.n; ++r) want += value(r, i);
      ASSERT_EQ(rout[root][i], want) << "reduce root " << root << " i " << i;
    }
  }
}

TEST_P(PlanTest, AlltoAllGatherScatter) {
  const Case c = GetParam();
  const size_t total = c.count * c.n;
  std::vector<Data> send(c.n, Data(total)), recv(c.n, Data(total));
  for (int r = 0; r < c.n; ++r)
    for (size_t i = 0; i < total; ++i) (c.inPlace ? recv : send)[r][i] = value(r, i);
  runAll(
      c.n, [&](int r) { return planAlltoAll(argsFor(c, r)); }, send, recv, c.inPlace);
  for (int r = 0; r < c.n; ++r)
    for (int k = 0; k < c.n; ++k)
      for (size_t i = 0; i < c.count; ++i)
        ASSERT_EQ(recv[r][k * c.count + i], value(k, r * c.count + i)) << "alltoall " << r << " " << k;

  const int root = c.n / 2;
  std::vector<Data> gin(c.n, Data(c.count)), gout(c.n, Data(total));
  for (int r = 0; r < c.n; ++r)
    for (size_t i = 0; i < c.count; ++i) gin[r][i] = value(r, i);
  runAll(
      c.n,
      [&](int r) {
        auto a = argsFor(c, r, cclSum, root);
        a.inPlace = false;
        return planGather(a);
      },
      gin, gout, false);
  for (int k = 0; k < c.n; ++k)
    for (size_t i = 0; i < c.count; ++i) ASSERT_EQ(gout[root][k * c.count + i], value(k, i)) << "gather";

  std::vector<Data> sin(c.n, Data(total)), sout(c.n, Data(c.count));
  for (size_t i = 0; i < total; ++i) sin[root][i] = value(root, i);
  runAll(
      c.n,
      [&](int r) {
        auto a = argsFor(c, r, cclSum, root);
        a.inPlace = false;
        return planScatter(a);
      },
      sin, sout, false);
  for (int r = 0; r < c.n; ++r)
    for (size_t i = 0; i < c.count; ++i) ASSERT_EQ(sout[r][i], value(root, r * c.count + i)) << "scatter";
}

std::string caseName(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return "n" + std::to_string(c.n) + "_count" + std::to_string(c.count) + "_chunk" + std::to_string(c.chunkBytes) +
         "_" + algoName(c.algo) + (c.inPlace ? "_inplace" : "_outofplace");
}

INSTANTIATE_TEST_SUITE_P(Algorithms, PlanTest, ::testing::ValuesIn(ccltest::Shard::fromEnv().of(cases())), caseName);

TEST(PlanShape, RingPipelinesChunks) {
  CollArgs a;
  a.nranks = 4;
  a.count = 1 << 16;
  a.chunkBytes = 4096;
  a.algo = Algo::kRing;
  Plan p = planAllReduce(a);
  size_t sends = 0;
  for (const Step& s : p.steps) sends += s.kind == StepKind::kSend;
  // 2(n-1) hops of one segment (64 KiB) cut in 4 KiB chunks.
  EXPECT_EQ(sends, 2u * 3u * 16u);
}

}  // namespace
}  // namespace ccl::coll

namespace ccl::coll {
namespace {

// A send to oneself and its receive as one plan: b's steps follow a's, every dependency,
// length slot and scratch reference moved past a's, none out of range.
TEST(MergePlans, MovesDependenciesSlotsAndScratch) {
  CollArgs a;
  a.count = 5000;
  a.codec = codec::defaultParams(cclCodecInt8);
  const Plan send = planCompressedSend(a, 0, 0), recv = planCompressedRecv(a, 0, 0);
  const Plan m = mergePlans(send, recv);
  ASSERT_EQ(m.steps.size(), send.steps.size() + recv.steps.size());
  EXPECT_EQ(m.lengthSlots, send.lengthSlots + recv.lengthSlots);
  EXPECT_GE(m.scratchBytes, send.scratchBytes + recv.scratchBytes);
  for (size_t i = 0; i < m.steps.size(); ++i) {
    const Step& s = m.steps[i];
    for (uint32_t d = 0; d < s.numDeps; ++d) EXPECT_LT(m.deps[s.firstDep + d], i) << "step " << i;
    if (s.slot != kNoSlot) {
      EXPECT_LT(s.slot, m.lengthSlots);
    }
    for (const Ref& r : {s.dst, s.src, s.src2}) {
      if (r.buf == Buf::kScratch) {
        EXPECT_LE(r.offset, m.scratchBytes);
      }
    }
    if (i >= send.steps.size()) {
      const Step& o = recv.steps[i - send.steps.size()];
      EXPECT_EQ(s.kind, o.kind);
      if (o.slot != kNoSlot) {
        EXPECT_EQ(s.slot, o.slot + send.lengthSlots);
      }
      if (o.dst.buf == Buf::kScratch) {
        EXPECT_GE(s.dst.offset, send.scratchBytes);
      }
    }
  }
  CollArgs other = a;
  other.codec = codec::defaultParams(cclCodecInt4);
  EXPECT_THROW(mergePlans(send, planCompressedRecv(other, 0, 0)), Error);
}

}  // namespace
}  // namespace ccl::coll

namespace ccl::coll {
namespace {

// Max and min are commutative in every floating type: a NaN on either side gives NaN (both
// orders, the same bits), two zeros give +0 (max) or -0 (min) in either order. Integers
// compare as before.
TEST(ElementOps, MaxMinAreCommutativeWithNanAndZeros) {
  const float nan = std::nanf(""), big = 3.0f;
  for (float x : {nan, big, -big}) {
    const float mx1 = elem::MaxOp{}(nan, x), mx2 = elem::MaxOp{}(x, nan);
    const float mn1 = elem::MinOp{}(nan, x), mn2 = elem::MinOp{}(x, nan);
    EXPECT_TRUE(std::isnan(mx1) && std::isnan(mx2) && std::isnan(mn1) && std::isnan(mn2)) << x;
    EXPECT_EQ(fp::floatBits(mx1), fp::floatBits(mx2));
    EXPECT_EQ(fp::floatBits(mn1), fp::floatBits(mn2));
  }
  EXPECT_TRUE(std::isnan(elem::MaxOp{}(1.0, std::nan(""))));
  EXPECT_TRUE(std::isnan(elem::MinOp{}(std::nan(""), 1.0)));
  EXPECT_FALSE(std::signbit(elem::MaxOp{}(0.0f, -0.0f)));
  EXPECT_FALSE(std::signbit(elem::MaxOp{}(-0.0f, 0.0f)));
  EXPECT_TRUE(std::signbit(elem::MaxOp{}(-0.0f, -0.0f)));
  EXPECT_TRUE(std::signbit(elem::MinOp{}(0.0f, -0.0f)));
  EXPECT_TRUE(std::signbit(elem::MinOp{}(-0.0f, 0.0f)));
  EXPECT_FALSE(std::signbit(elem::MinOp{}(0.0f, 0.0f)));
  EXPECT_FALSE(std::signbit(elem::MaxOp{}(-0.0, 0.0)));
  EXPECT_TRUE(std::signbit(elem::MinOp{}(0.0, -0.0)));
  EXPECT_EQ(elem::MaxOp{}(int8_t{-1}, int8_t{1}), 1);
  EXPECT_EQ(elem::MinOp{}(uint8_t{255}, uint8_t{1}), 1);
  EXPECT_EQ(elem::MaxOp{}(int64_t{-5}, int64_t{-7}), -5);
}

// Max and min with a NaN on one rank, whichever rank, through every algorithm of the
// reductions (a tree combines in a different order on each rank; a ring, a chain and a direct
// reduce put rank 0's value on the left): every rank (the root of a reduce) gets NaN there,
// all ranks the same bytes, and the other elements, zeros of both signs included, the
// reduction's value. In every floating type (16-bit and fp8 reduce in fp32 and round back).
TEST(PlanNan, MaxMinPropagateNanFromAnyRank) {
  constexpr size_t kCount = 9, kNanAt = 2, kZeroAt = 4;
  for (cclDataType_t dtype : {cclFloat32, cclFloat64, cclFloat16, cclBfloat16, cclFloat8e4m3, cclFloat8e5m2}) {
    elem::dispatchType(dtype, [&](auto tr) {
      using Tr = decltype(tr);
      using S = typename Tr::Storage;
      using C = typename Tr::Compute;
      auto input = [](int r, size_t i) { return static_cast<float>(static_cast<int>((i * 5 + r * 3) % 7) - 3); };
      for (Coll coll : {Coll::kAllReduce, Coll::kReduce, Coll::kReduceScatter})
        for (cclRedOp_t op : {cclMax, cclMin})
          for (Algo algo : {Algo::kRing, Algo::kTree, Algo::kDirect})
            for (int n = 2; n <= 4; ++n)
              for (int nanRank = 0; nanRank < n; ++nanRank) {
                const int root = coll == Coll::kReduce ? n - 1 - nanRank % 2 : 0;
                const size_t blocks = coll == Coll::kReduceScatter ? static_cast<size_t>(n) : 1;
                std::vector<std::vector<S>> send(n, std::vector<S>(kCount * blocks)), recv(n, std::vector<S>(kCount));
                for (int r = 0; r < n; ++r)
                  for (size_t j = 0; j < kCount * blocks; ++j) {
                    const size_t i = j % kCount;  // each block of a reduce-scatter alike
                    float v = input(r, i);
                    if (i == kNanAt && r == nanRank) v = std::nanf("");
                    if (i == kZeroAt) v = r % 2 ? -0.0f : 0.0f;
                    send[r][j] = Tr::store(static_cast<C>(v));
                  }
                testing::runPlans(
                    n,
                    [&](int r) {
                      CollArgs a;
                      a.rank = r;
                      a.nranks = n;
                      a.count = kCount;
                      a.dtype = dtype;
                      a.op = op;
                      a.root = root;
                      a.algo = algo;
                      return planCollective(coll, a);
                    },
                    [&](int r) {
                      return testing::RankBuffers{send[r].data(), recv[r].data()};
                    });
                const std::string what = std::string(dataTypeName(dtype)) + (op == cclMax ? " max" : " min") + " " +
                                         algoName(algo) + " " + collInfo(coll).name + " n " + std::to_string(n) +
                                         " NaN on rank " + std::to_string(nanRank);
                for (int r = 0; r < n; ++r) {
                  if (coll == Coll::kReduce && r != root) continue;
                  const std::vector<S>& got = recv[r];
                  EXPECT_TRUE(std::isnan(static_cast<double>(Tr::load(got[kNanAt])))) << what << " rank " << r;
                  const float zero = static_cast<float>(Tr::load(got[kZeroAt]));
                  EXPECT_TRUE(zero == 0.0f && std::signbit(zero) == (op == cclMin)) << what << " rank " << r;
                  for (size_t i = 0; i < kCount; ++i) {
                    if (i == kNanAt || i == kZeroAt) continue;
                    float want = input(0, i);
                    for (int k = 1; k < n; ++k)
                      want = op == cclMax ? std::max(want, input(k, i)) : std::min(want, input(k, i));
                    EXPECT_EQ(static_cast<float>(Tr::load(got[i])), want) << what << " rank " << r << " at " << i;
                  }
                  if (coll != Coll::kReduce) {
                    EXPECT_EQ(std::memcmp(got.data(), recv[0].data(), kCount * sizeof(S)), 0) << what << " rank " << r;
                  }
                }
              }
    });
  }
}

}  // namespace
}  // namespace ccl::coll
