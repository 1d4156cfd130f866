// SPDX-License-Identifier: BSD-3-Clause
// Checks the tests' own reference of the data types, since every expected value rests on it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "dtype_ref.h"
#include "reference.h"

namespace ccltest {
namespace {

std::string dtypeName(const ::testing::TestParamInfo<cclDataType_t>& info) { return dtypeInfo(info.param).name; }

// Formats small enough to enumerate every code.
class NarrowFloatTest : public ::testing::TestWithParam<cclDataType_t> {};

TEST_P(NarrowFloatTest, CodesRoundTrip) {
  const DtypeInfo& d = dtypeInfo(GetParam());
  for (uint64_t code = 0; code <= sizeMask(d.size); ++code) {
    const double v = decodeFloat(d.type, code);
    if (std::isnan(v)) continue;
    ASSERT_EQ(encodeFloat(d.type, v), code) << d.name << " value " << v;
  }
}

TEST_P(NarrowFloatTest, OrderedCodeIsMonotonic) {
  const DtypeInfo& d = dtypeInfo(GetParam());
  std::vector<uint64_t> codes;
  for (uint64_t code = 0; code <= sizeMask(d.size); ++code)
    if (!std::isnan(decodeFloat(d.type, code))) codes.push_back(code);
  std::sort(codes.begin(), codes.end(),
            [&](uint64_t a, uint64_t b) { return decodeFloat(d.type, a) < decodeFloat(d.type, b); });
  for (size_t i = 1; i < codes.size(); ++i) {
    const double a = decodeFloat(d.type, codes[i - 1]), b = decodeFloat(d.type, codes[i]);
    if (a == b) continue;  // +0 and -0
    ASSERT_LT(orderedCode(d.type, codes[i - 1]), orderedCode(d.type, codes[i])) << a << " < " << b;
  }
}

INSTANTIATE_TEST_SUITE_P(DtypeRef, NarrowFloatTest,
                         ::testing::Values(cclFloat16, cclBfloat16, cclFloat8e4m3, cclFloat8e5m2), dtypeName);

class FloatTypeTest : public ::testing::TestWithParam<cclDataType_t> {};

TEST_P(FloatTypeTest, ExactIntegersAreExact) {
  const DtypeInfo& d = dtypeInfo(GetParam());
  const int64_t limit = static_cast<int64_t>(std::min(d.exactIntLimit, 4096.0));
  for (int64_t i = -limit; i <= limit; ++i)
    ASSERT_EQ(decodeFloat(d.type, encodeFloat(d.type, static_cast<double>(i))), static_cast<double>(i)) << d.name;
  if (d.size == 8) return;  // 2^53 + 1 is not a double either
  const double next = d.exactIntLimit + 1;
  EXPECT_NE(decodeFloat(d.type, encodeFloat(d.type, next)), next) << d.name << ": the limit is not tight";
}

INSTANTIATE_TEST_SUITE_P(DtypeRef, FloatTypeTest,
                         ::testing::Values(cclFloat16, cclFloat32, cclFloat64, cclBfloat16, cclFloat8e4m3,
                                           cclFloat8e5m2),
                         dtypeName);

TEST(DtypeRef, TableCoversEveryTypeInEnumOrder) {
  EXPECT_EQ(allDtypes().size(), static_cast<size_t>(cclNumTypes));
  for (int t = 0; t < cclNumTypes; ++t) EXPECT_EQ(dtypeInfo(static_cast<cclDataType_t>(t)).type, t);
}

TEST(DtypeRef, KnownEncodings) {
  EXPECT_EQ(encodeFloat(cclFloat16, 1.0), 0x3c00u);
  EXPECT_EQ(encodeFloat(cclFloat16, 65504.0), 0x7bffu);
  EXPECT_EQ(encodeFloat(cclFloat16, 65520.0), 0x7c00u);  // rounds up to inf
  EXPECT_EQ(encodeFloat(cclFloat16, std::ldexp(1.0, -24)), 0x0001u);
  EXPECT_EQ(encodeFloat(cclBfloat16, 1.0), 0x3f80u);
  EXPECT_EQ(encodeFloat(cclBfloat16, -2.0), 0xc000u);
  EXPECT_EQ(encodeFloat(cclFloat8e4m3, 448.0), 0x7eu);
  EXPECT_EQ(encodeFloat(cclFloat8e4m3, 1.0), 0x38u);
  EXPECT_EQ(encodeFloat(cclFloat8e4m3, std::ldexp(1.0, -9)), 0x01u);
  EXPECT_EQ(encodeFloat(cclFloat8e5m2, 57344.0), 0x7bu);
  EXPECT_EQ(encodeFloat(cclFloat8e5m2, 1.0), 0x3cu);
  EXPECT_EQ(encodeFloat(cclFloat8e5m2, std::ldexp(1.0, -16)), 0x01u);
  // Ties go to the even code: 1 + 2^-11 sits halfway between 1 and the next fp16.
  EXPECT_EQ(encodeFloat(cclFloat16, 1.0 + std::ldexp(1.0, -11)), 0x3c00u);
  EXPECT_EQ(encodeFloat(cclFloat16, 1.0 + 3 * std::ldexp(1.0, -11)), 0x3c02u);
  EXPECT_TRUE(std::isnan(decodeFloat(cclFloat8e4m3, 0x7f)));
  EXPECT_TRUE(std::isinf(decodeFloat(cclFloat8e5m2, 0x7c)));
}

#if defined(__FLT16_MAX__)
TEST(DtypeRef, Float16AgreesWithCompiler) {
  for (uint32_t i = 0; i < 200000; ++i) {
    const double v = std::ldexp(static_cast<double>(mixBits(1, i, 0) % 4000000) - 2000000.0, -static_cast<int>(i % 40));
    const _Float16 h = static_cast<_Float16>(v);
    uint16_t bits;
    std::memcpy(&bits, &h, sizeof(bits));
    ASSERT_EQ(encodeFloat(cclFloat16, v), bits) << v;
  }
}
#endif

TEST(DtypeRef, IntegerReferenceWraps) {
  const uint64_t in[] = {0x7f, 0x01};
  EXPECT_EQ(reduceReference(cclInt8, cclSum, in, 2), 0x80u);
  const uint64_t prod[] = {2, 2, 2, 2, 2, 2, 2, 2};
  EXPECT_EQ(reduceReference(cclUint8, cclProd, prod, 8), 0u);
  const uint64_t avg[] = {static_cast<uint64_t>(-7) & 0xff, 0};
  EXPECT_EQ(reduceReference(cclInt8, cclAvg, avg, 2), static_cast<uint64_t>(-3) & 0xff);
  const uint64_t mx[] = {0xff, 0x01};
  EXPECT_EQ(reduceReference(cclInt8, cclMax, mx, 2), 0x01u);
  EXPECT_EQ(reduceReference(cclUint8, cclMax, mx, 2), 0xffu);
}

}  // namespace
}  // namespace ccltest
