// SPDX-License-Identifier: BSD-3-Clause
// The shards of a matrix: disjoint, together every case once, none empty.
#include "shard.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "scoped_env.h"

namespace ccltest {
namespace {

TEST(Shard, ThreeShardsCoverEveryCaseOnce) {
  std::vector<int> all(100);
  std::iota(all.begin(), all.end(), 0);
  std::vector<int> seen(all.size(), 0);
  for (const char* s : {"0/3", "1/3", "2/3"}) {
    ScopedEnv env("CCL_TEST_SHARD", s);
    Shard shard = Shard::fromEnv();
    EXPECT_EQ(shard.count(), 3u);
    const std::vector<int> kept = shard.of(all);
    EXPECT_GE(kept.size(), 33u);
    EXPECT_LE(kept.size(), 34u);
    for (int c : kept) ++seen[c];
  }
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], 1) << "case " << i;
}

TEST(Shard, UnsetRunsEverythingAndASmallMatrixKeepsACase) {
  ScopedEnv unset("CCL_TEST_SHARD", nullptr);
  Shard whole = Shard::fromEnv();
  EXPECT_EQ(whole.count(), 1u);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(whole.next());
  ScopedEnv env("CCL_TEST_SHARD", "2/3");
  EXPECT_EQ(Shard::fromEnv().of(std::vector<int>{7}), std::vector<int>{7});
}

TEST(Shard, AMalformedShardStopsTheTest) {
  ScopedEnv env("CCL_TEST_SHARD", "3/3");
  EXPECT_DEATH(Shard::fromEnv(), "INDEX < COUNT");
}

}  // namespace
}  // namespace ccltest
