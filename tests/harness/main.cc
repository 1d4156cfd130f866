// SPDX-License-Identifier: BSD-3-Clause
// gtest main of the multi-rank tests: bounds the library's waits so a stuck collective
// becomes an error, and destroys the cached worlds after the last test.
#include <gtest/gtest.h>

#include <cstdlib>

#include "world.h"

int main(int argc, char** argv) {
  // A user-set CCL_TIMEOUT wins; 30 s is far above any collective of these tests and far
  // below the default, so a hang costs seconds, not minutes.
  setenv("CCL_TIMEOUT", "30", 0);
  ::testing::InitGoogleTest(&argc, argv);
  const int result = RUN_ALL_TESTS();
  ccltest::World::destroyCached();
  return result;
}
