// SPDX-License-Identifier: BSD-3-Clause
// Which averages scale their inputs first, and what their plans look like: one division, of
// the input, before every other step; none after; the caller's send buffer never written.
// What the plans compute is checked through the C API (tests/e2e/collectives/average_test.cc)
// and by the stream executor's matrix (fp16 averages).
#include <gtest/gtest.h>

#include <string>

#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/scaled_average.h"
#include "common/dtype.h"

namespace ccl::coll {
namespace {

CollArgs argsOf(cclDataType_t dtype, cclRedOp_t op, int rank, int nranks, bool inPlace, Algo algo) {
  CollArgs a;
  a.rank = rank;
  a.nranks = nranks;
  a.count = 1000;
  a.dtype = dtype;
  a.op = op;
  a.inPlace = inPlace;
  a.chunkBytes = 512;
  a.algo = algo;
  return a;
}

size_t divisions(const Plan& p) {
  size_t n = 0;
  for (const Step& s : p.steps) n += s.kind == StepKind::kDivide || s.kind == StepKind::kDivideFloat || s.divide;
  return n;
}

bool writesSend(const Plan& p) {
  for (const Step& s : p.steps)
    if (s.kind != StepKind::kSend && s.dst.buf == Buf::kSend) return true;
  return false;
}

TEST(ScaledAverage, OnlyUncompressedAveragesOfNarrowFloatsOfSeveralRanks) {
  const std::vector<AlgoEntry> rows(algorithmTable().begin(), algorithmTable().end());
  for (const AlgoEntry& e : rows) {
    if (!collInfo(e.coll).reduction) continue;
    for (int t = 0; t < cclNumTypes; ++t) {
      const auto dtype = static_cast<cclDataType_t>(t);
      for (cclRedOp_t op : {cclSum, cclAvg, cclMax})
        for (int n : {1, 3}) {
          CollArgs a = argsOf(dtype, op, 0, n, false, e.algo);
          if (e.compressed) a.codec = codec::defaultParams(cclCodecInt8);
          const bool expected = op == cclAvg && n > 1 && !e.compressed &&
                                (dtype == cclFloat16 || dtype == cclFloat8e4m3 || dtype == cclFloat8e5m2);
          EXPECT_EQ(scalesInputs(e, e.coll, a), expected)
              << collInfo(e.coll).name << " " << algoName(e.algo) << " " << dataTypeName(dtype) << " n=" << n;
        }
    }
  }
}

TEST(ScaledAverage, ThePlanDividesTheInputOnceBeforeAnythingElse) {
  for (Coll c : {Coll::kAllReduce, Coll::kReduce, Coll::kReduceScatter})
    for (Algo algo : {Algo::kAuto, Algo::kRing, Algo::kTree, Algo::kDirect})
      for (int n : {2, 3, 4, 8})
        for (bool inPlace : {false, true})
          for (int r = 0; r < n; ++r) {
            const CollArgs a = argsOf(cclFloat16, cclAvg, r, n, inPlace, algo);
            const std::string where = std::string(collInfo(c).name) + " " + algoName(algo) + " n=" + std::to_string(n) +
                                      (inPlace ? " in place" : "") + " rank " + std::to_string(r);
            const Plan scaled = planCollective(c, a);
            ASSERT_FALSE(scaled.steps.empty()) << where;
            EXPECT_EQ(divisions(scaled), 1u) << where;
            const Step& first = scaled.steps[0];
            EXPECT_EQ(first.kind, StepKind::kDivide) << where;
            EXPECT_EQ(first.numDeps, 0u) << where;
            // The input it reads: the caller's send buffer, or out of place the receive buffer
            // in place (where the receive buffer holds it).
            EXPECT_EQ(first.src.buf, inPlace ? (c == Coll::kReduceScatter ? Buf::kSend : Buf::kRecv) : Buf::kSend)
                << where;
            EXPECT_EQ(first.count, bufferCounts(c, a.count, static_cast<size_t>(n), r == a.root).send) << where;
            // Every other step waits for it, directly or through its dependencies.
            for (size_t i = 1; i < scaled.steps.size(); ++i)
              EXPECT_TRUE(scaled.steps[i].numDeps > 0) << where << ": step " << i << " runs before the division";
            if (!inPlace) {
              EXPECT_FALSE(writesSend(scaled)) << where;
            }
            // The same call of bf16 divides its sum instead, and only at the end.
            CollArgs wide = a;
            wide.dtype = cclBfloat16;
            const Plan divided = planCollective(c, wide);
            if (c != Coll::kReduce || r == a.root)
              EXPECT_GE(divisions(divided), 1u) << where;
            else
              EXPECT_EQ(divisions(divided), 0u) << where;
            if (!divided.steps.empty()) {
              EXPECT_NE(divided.steps[0].kind, StepKind::kDivide) << where;
            }
          }
}

TEST(ScaledAverage, DroppedDivisionsPassTheirWaitsOn) {
  Plan p;
  const StepId a = p.copy({Buf::kRecv, 0}, {Buf::kSend, 0}, 8);
  const StepId b = p.copy({Buf::kRecv, 8}, {Buf::kSend, 8}, 8);
  const StepId d = p.divide({Buf::kRecv, 0}, 4, {a, b});
  p.send(1, 0, {Buf::kRecv, 0}, 16, {d});
  p.divide({Buf::kRecv, 0}, 4, {d});
  const Plan q = withoutDivisions(p);
  ASSERT_EQ(q.steps.size(), 3u);
  EXPECT_EQ(q.steps[2].kind, StepKind::kSend);
  ASSERT_EQ(q.steps[2].numDeps, 2u);
  EXPECT_EQ(q.deps[q.steps[2].firstDep], a);
  EXPECT_EQ(q.deps[q.steps[2].firstDep + 1], b);
}

}  // namespace
}  // namespace ccl::coll
