// SPDX-License-Identifier: BSD-3-Clause
// What a build without UCX (CCL_ENABLE_UCX=OFF) links in place of the UCX transport.
#include "common/error.h"
#include "transport/ucx/ucx_transport.h"

namespace ccl::transport {

const bool kUcxBuilt = false;

std::unique_ptr<Transport> createUcxTransport(bootstrap::Bootstrap&) {
  throw Error(cclInvalidArgument, "this build has no UCX transport (CCL_ENABLE_UCX=OFF)");
}

}  // namespace ccl::transport
