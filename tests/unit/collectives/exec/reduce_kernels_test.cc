// SPDX-License-Identifier: BSD-3-Clause
// The fp16 and bf16 loops of reduce_kernels.cc with AVX2 and F16C (reduce_kernels_x86.h)
// against the portable loops on the same CPU, bit for bit: every code, as either operand of a
// sum, divided, widened; fp32 values around every rounding boundary of the type narrowed; NaNs
// with payloads, infinities, subnormals; counts that leave a tail for the portable loop; in place.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codecs/x86.h"
#include "collectives/exec/reduce_kernels.h"

namespace ccl::coll {
namespace {

namespace x86 = codec::detail::x86;

// Runs f once with the x86 loops and once without; returns both results.
template <class T, class F>
std::pair<std::vector<T>, std::vector<T>> bothWays(F&& f) {
  std::pair<std::vector<T>, std::vector<T>> out;
  out.first = f();
  x86::allowed.store(false);
  out.second = f();
  x86::allowed.store(true);
  return out;
}

class HalfLoops : public ::testing::TestWithParam<cclDataType_t> {
 protected:
  void SetUp() override {
    if (!x86::cpuHasThem()) GTEST_SKIP() << "this CPU has no AVX2 and F16C: only the portable loops run here";
  }
};

// Every 16-bit code, in order.
std::vector<uint16_t> everyCode() {
  std::vector<uint16_t> v(65536);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint16_t>(i);
  return v;
}

// Every code again, in another order (an odd multiplier is a permutation mod 2^16).
std::vector<uint16_t> shuffled(uint32_t mul, uint32_t add) {
  std::vector<uint16_t> v(65536);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint16_t>(i * mul + add);
  return v;
}

// fp32 values around every rounding boundary of `type`: each code's value and the midpoints
// to its neighbour, one fp32 ulp either side; NaNs with payloads and random bits besides.
std::vector<float> aroundEveryBoundary(cclDataType_t type) {
  std::vector<float> v;
  std::vector<uint16_t> codes = everyCode();
  std::vector<float> values(codes.size());
  x86::allowed.store(false);
  widenToFloat(values.data(), codes.data(), codes.size(), type);
  x86::allowed.store(true);
  auto bits = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  };
  auto fromBits = [](uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  };
  for (size_t c = 0; c + 1 < values.size(); ++c) {
    const float x = values[c], y = values[c + 1];
    if (x != x || y != y) continue;
    const float mid = x + (y - x) / 2;
    for (float f : {x, mid})
      for (int d = -1; d <= 1; ++d) v.push_back(fromBits(bits(f) + static_cast<uint32_t>(d)));
  }
  for (uint32_t payload : {0x1u, 0x2000u, 0x3fffffu, 0x400000u, 0x401234u})
    for (uint32_t sign : {0u, 0x80000000u}) v.push_back(fromBits(sign | 0x7f800000u | payload));
  for (float f : {65504.0f, 65519.996f, 65520.0f, 1e10f, 6e-8f, 5.96e-8f, 2.98e-8f, 2.99e-8f, 1e-40f})
    for (float s : {1.0f, -1.0f}) v.push_back(s * f);
  std::mt19937 rng(5);
  for (int i = 0; i < (1 << 20); ++i) v.push_back(fromBits(static_cast<uint32_t>(rng())));
  v.resize(v.size() - v.size() % 8 + 5);  // a tail the portable loop does
  return v;
}

TEST_P(HalfLoops, SumsOfEveryCodeAreThePortableOnes) {
  const cclDataType_t type = GetParam();
  const std::vector<uint16_t> a = everyCode();
  for (auto [mul, add] : {std::pair{1u, 0u}, std::pair{40503u, 12345u}, std::pair{257u, 3u}}) {
    const std::vector<uint16_t> b = shuffled(mul, add);
    for (cclRedOp_t op : {cclSum, cclAvg, cclMax}) {
      auto [fast, portable] = bothWays<uint16_t>([&] {
        std::vector<uint16_t> d(a.size() - 3);  // a tail of 5
        reduce(d.data(), a.data(), b.data(), d.size(), type, op);
        return d;
      });
      ASSERT_EQ(fast, portable) << "op " << op << " b = " << mul << " i + " << add;
    }
  }
  // In place: the result over its first operand.
  auto [fast, portable] = bothWays<uint16_t>([&] {
    std::vector<uint16_t> d = a;
    const std::vector<uint16_t> b = shuffled(40503u, 7u);
    reduce(d.data(), d.data(), b.data(), d.size(), type, cclSum);
    return d;
  });
  EXPECT_EQ(fast, portable);
}

TEST_P(HalfLoops, WideSumsDivisionsAndWideningOfEveryCodeAreThePortableOnes) {
  const cclDataType_t type = GetParam();
  const std::vector<uint16_t> codes = everyCode();
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 3000.0f);
  std::vector<float> acc(codes.size());
  for (float& x : acc) x = normal(rng);
  auto [wideFast, widePortable] = bothWays<float>([&] {
    std::vector<float> d(codes.size() - 1);
    reduceWide(d.data(), acc.data(), codes.data(), d.size(), type, cclSum);
    return d;
  });
  EXPECT_EQ(0, std::memcmp(wideFast.data(), widePortable.data(), wideFast.size() * 4));
  for (int divisor : {1, 2, 3, 7, 8}) {
    auto [fast, portable] = bothWays<uint16_t>([&] {
      std::vector<uint16_t> d(codes.size() - 6);
      divide(d.data(), codes.data(), d.size(), type, divisor);
      return d;
    });
    ASSERT_EQ(fast, portable) << "divided by " << divisor;
  }
  auto [inPlaceFast, inPlacePortable] = bothWays<uint16_t>([&] {
    std::vector<uint16_t> d = codes;
    divide(d.data(), d.data(), d.size(), type, 3);
    return d;
  });
  EXPECT_EQ(inPlaceFast, inPlacePortable);
  auto [fast, portable] = bothWays<float>([&] {
    std::vector<float> d(codes.size() - 2);
    widenToFloat(d.data(), codes.data(), d.size(), type);
    return d;
  });
  EXPECT_EQ(0, std::memcmp(fast.data(), portable.data(), fast.size() * 4)) << "NaNs included, bit for bit";
}

TEST_P(HalfLoops, NarrowingAroundEveryRoundingBoundaryIsThePortableOne) {
  const cclDataType_t type = GetParam();
  const std::vector<float> values = aroundEveryBoundary(type);
  for (int divisor : {1, 3, 8}) {
    auto [fast, portable] = bothWays<uint16_t>([&] {
      std::vector<uint16_t> d(values.size());
      narrowFromFloat(d.data(), values.data(), d.size(), type, divisor);
      return d;
    });
    size_t wrong = 0, first = 0;
    for (size_t i = 0; i < fast.size(); ++i)
      if (fast[i] != portable[i] && wrong++ == 0) first = i;
    EXPECT_EQ(wrong, 0u) << "divided by " << divisor << ", first at " << first << " (" << values[first]
                         << "): " << fast[first] << " vs " << portable[first];
  }
}

INSTANTIATE_TEST_SUITE_P(Types, HalfLoops, ::testing::Values(cclFloat16, cclBfloat16),
                         [](const ::testing::TestParamInfo<cclDataType_t>& p) {
                           return p.param == cclFloat16 ? std::string("fp16") : std::string("bf16");
                         });

}  // namespace
}  // namespace ccl::coll
