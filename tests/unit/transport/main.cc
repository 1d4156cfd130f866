// SPDX-License-Identifier: BSD-3-Clause
#include <gtest/gtest.h>

#include <cstdlib>

int main(int argc, char** argv) {
  // A broken rendezvous or transport fails within seconds instead of the 300 s default.
  setenv("CCL_TIMEOUT", "30", 0);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
