// SPDX-License-Identifier: BSD-3-Clause
// The link of a communicator's device calls (device_link.cc).
#pragma once

#include <memory>
#include <string>

#include "api/comm.h"
#include "collectives/plan/cost.h"

namespace ccl::api {

// The model device calls are priced with: `host`'s links, the device kit's kernels, and
// every stream at its bound over a link that cannot see lengths (NCCL's).
std::shared_ptr<const coll::CostModel> deviceModel(const coll::CostModel& host, const std::string& link);

// The link of the communicator's device calls (CCL_DEVICE_TRANSPORT, resolved) and, for
// "nccl", NVIDIA's NCCL loaded from CCL_NCCL_LIBRARY and a communicator of it made over
// ccl's bootstrap (null otherwise; comm.deviceLink is set). Collective over `comm`'s ranks.
std::unique_ptr<transport::nccl::Transport> deviceNccl(cclComm& comm);

}  // namespace ccl::api
