// SPDX-License-Identifier: BSD-3-Clause
// ccl's own API on device buffers: this version moves host memory only, so a device pointer
// (alone, or mixed with a host one) is a clear cclInvalidUsage, never a CPU read of device
// memory. Runs where a CUDA device exists; skipped, with the reason, elsewhere.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ccl/ccl.h"
#include "gpu_test_util.h"

namespace {

TEST(ApiDeviceBuffers, DevicePointersAreRefusedWithAMessage) {
  CCL_SKIP_WITHOUT_CUDA_DEVICE();
  cclComm_t comm = nullptr;
  int dev = 0;
  ASSERT_EQ(cclCommInitAll(&comm, 1, &dev), cclSuccess) << cclGetLastError(nullptr);
  ccl::codec::gputest::DeviceBuffer d(1024 * sizeof(float));
  std::vector<float> h(1024, 1.0f);
  EXPECT_EQ(cclAllReduce(d.get(), d.get(), 1024, cclFloat32, cclSum, comm, nullptr), cclInvalidUsage);
  EXPECT_NE(std::string(cclGetLastError(comm)).find("device memory"), std::string::npos) << cclGetLastError(comm);
  EXPECT_EQ(cclAllReduce(h.data(), d.get(), 1024, cclFloat32, cclSum, comm, nullptr), cclInvalidUsage);  // mixed
  EXPECT_EQ(cclSend(d.get(), 1024, cclFloat32, 0, comm, nullptr), cclInvalidUsage);
  EXPECT_EQ(cclAllReduce(h.data(), h.data(), 1024, cclFloat32, cclSum, comm, nullptr), cclSuccess)
      << "host buffers still work";
  EXPECT_EQ(cclCommDestroy(comm), cclSuccess);
}

}  // namespace
