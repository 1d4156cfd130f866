// SPDX-License-Identifier: BSD-3-Clause
// The exact checks of the perf binaries are only as good as their inputs: every input,
// every partial result (in any rank order) and every expected value must be exact in the
// element type, and the "unwritten" fill must never equal a valid result.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "harness/data_model.h"
#include "harness/datatypes.h"

namespace cclperf {
namespace {

constexpr cclRedOp_t kOps[] = {cclSum, cclProd, cclMax, cclMin, cclAvg};

bool exactIn(cclDataType_t type, double value) {
  uint64_t storage = 0;
  const TypedBuffer buf{&storage, 1, type};
  try {
    storeElement(buf, 0, value);
  } catch (const std::logic_error&) {
    return false;
  }
  return loadElement(buf, 0) == value;
}

double combine(cclRedOp_t op, double a, double b) {
  switch (op) {
    case cclProd:
      return a * b;
    case cclMax:
      return std::max(a, b);
    case cclMin:
      return std::min(a, b);
    default:
      return a + b;
  }
}

TEST(DataTypes, EveryIntegerUpToTheLimitRoundTrips) {
  for (const auto& info : allDataTypes()) {
    const int64_t last = std::min<int64_t>(info.exactLimit, 5000);
    for (int64_t v = 0; v <= last; ++v) ASSERT_TRUE(exactIn(info.type, double(v))) << info.name << " " << v;
    EXPECT_TRUE(exactIn(info.type, double(info.exactLimit))) << info.name;
  }
}

TEST(DataTypes, MinifloatEncoderRejectsInexactValues) {
  EXPECT_THROW(encodeMinifloat(17.0, 4, 3), std::logic_error);  // e4m3 holds 16 and 18, not 17
  EXPECT_THROW(encodeMinifloat(9.0, 5, 2), std::logic_error);
  EXPECT_THROW(encodeMinifloat(2049.0, 5, 10), std::logic_error);
}

TEST(DataTypes, PoisonNeverEqualsAValidValue) {
  for (const auto& info : allDataTypes()) {
    uint64_t storage = 0;
    const TypedBuffer buf{&storage, 1, info.type};
    poison(buf);
    const double v = loadElement(buf, 0);
    EXPECT_FALSE(v >= 0 && v <= double(info.exactLimit)) << info.name << " poison reads as " << v;
  }
}

TEST(DataTypes, ParsesNamesAliasesAndAll) {
  EXPECT_EQ(parseDataTypes("float"), std::vector<cclDataType_t>{cclFloat32});
  EXPECT_EQ(parseDataTypes("bf16"), std::vector<cclDataType_t>{cclBfloat16});
  EXPECT_EQ(parseDataTypes("all").size(), size_t(cclNumTypes));
  EXPECT_THROW(parseDataTypes("float128"), std::invalid_argument);
}

// Partial results of a reduction in rank order and in reverse order (ring and tree
// algorithms combine in other orders, but always over subsets whose results are bounded
// by the full result for these non-negative inputs).
void expectExactReduction(cclDataType_t type, cclRedOp_t op, int nranks) {
  const DataModel model(type, true, op, nranks, 7);
  const double limit = double(dataTypeInfo(type).exactLimit);
  for (size_t i = 0; i < 500; ++i) {
    std::vector<double> in;
    for (int r = 0; r < nranks; ++r) in.push_back(model.input(r, i));
    for (int pass = 0; pass < 2; ++pass) {
      double acc = in[0];
      for (size_t r = 1; r < in.size(); ++r) {
        acc = combine(op, acc, in[r]);
        ASSERT_TRUE(acc <= limit && exactIn(type, acc)) << dataTypeInfo(type).name << " n=" << nranks;
      }
      std::reverse(in.begin(), in.end());
    }
    for (double v : in) {
      ASSERT_TRUE(exactIn(type, v));
      if (op == cclAvg) {
        ASSERT_TRUE(exactIn(type, v / nranks));  // divide-then-sum algorithms
      }
    }
    ASSERT_TRUE(exactIn(type, model.reduced(i)));
  }
}

TEST(DataModel, ReductionsStayExactForEveryTypeOpAndRankCount) {
  for (const auto& info : allDataTypes()) {
    for (cclRedOp_t op : kOps) {
      for (int n = 1; n <= 16; ++n) expectExactReduction(info.type, op, n);
    }
  }
}

TEST(DataModel, InputsDifferAcrossRanksAndElements) {
  const DataModel model(cclFloat32, true, cclSum, 4, 1);
  int distinctRanks = 0;
  for (size_t i = 0; i < 100; ++i) distinctRanks += model.input(0, i) != model.input(1, i);
  EXPECT_GT(distinctRanks, 50);
  const DataModel otherSeed(cclFloat32, true, cclSum, 4, 2);
  int distinctSeeds = 0;
  for (size_t i = 0; i < 100; ++i) distinctSeeds += model.input(0, i) != otherSeed.input(0, i);
  EXPECT_GT(distinctSeeds, 50);
}

}  // namespace
}  // namespace cclperf
