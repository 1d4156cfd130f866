// SPDX-License-Identifier: BSD-3-Clause
// cclCodecErrorBound takes any quantizations >= 0 and composes the bound one round trip at a
// time. A count near INT_MAX must not mean two billion steps (tens of seconds per call,
// minutes under the sanitizers): the composition reaches a fixed point or +inf within a few
// hundred thousand, where it stops with the same result (ctest's TIMEOUT catches a call
// that does not).
#include <gtest/gtest.h>

#include <climits>
#include <cmath>

#include "ccl/ccl.h"

namespace {

double bound(cclCodec_t codec, double absValue, double absMax, int quantizations) {
  cclCompression_t c = CCL_COMPRESSION_INITIALIZER;
  c.codec = codec;
  double b = -1;
  EXPECT_EQ(cclCodecErrorBound(&c, absValue, absMax, quantizations, &b), cclSuccess) << cclGetLastError(nullptr);
  return b;
}

TEST(ErrorBound, HugeRoundTripCountsGiveTheLimitOfTheComposition) {
  for (int k = 0; k < cclCodecCount(); ++k) {
    const auto codec = static_cast<cclCodec_t>(k);
    for (const double x : {0.0, 5e-324, 1e-300, 1.0, 1e300}) {
      const double many = bound(codec, x, x, 1 << 22);  // past the fixed point of every codec
      for (const int q : {INT_MAX, INT_MAX - 1, 1 << 30})
        EXPECT_EQ(bound(codec, x, x, q), many) << cclCodecName(codec) << " |x| " << x << " quantizations " << q;
      // A bound never shrinks with more round trips.
      EXPECT_GE(many, bound(codec, x, x, 1000)) << cclCodecName(codec) << " |x| " << x;
    }
  }
}

TEST(ErrorBound, FewRoundTripsKeepTheirFiniteBound) {
  // The early stop must not change what ordinary counts give: a quantizer's bound grows
  // with each round trip and stays finite for a few.
  const double one = bound(cclCodecInt8, 1.0, 1.0, 1), two = bound(cclCodecInt8, 1.0, 1.0, 2);
  EXPECT_GT(one, 0.0);
  EXPECT_GT(two, one);
  EXPECT_TRUE(std::isfinite(bound(cclCodecFp8E4m3, 1.0, 1.0, 8)));
}

}  // namespace
