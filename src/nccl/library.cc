// SPDX-License-Identifier: BSD-3-Clause
// libccl_nccl.so is made of the face and the layer libraries. Its ccl communicators move the
// bytes of their device calls over the face's own real NCCL communicator (borrowed once it
// exists), so CCL_DEVICE_TRANSPORT=auto makes none of its own.
#include "api/comm.h"

namespace {
const bool kLent = [] {
  ccl::api::deviceLinksAreLent();
  return true;
}();
}  // namespace
