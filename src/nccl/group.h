// SPDX-License-Identifier: BSD-3-Clause
// NCCL group semantics on top of ccl's: ncclGroupStart/End open and close a ccl group (host
// operations run together at the outermost end), a real NCCL group is opened on first use
// for device operations, communicators created inside the group are awaited at its end,
// and scratch buffers of queued operations live until then.
#pragma once

#include <functional>
#include <memory>

#include "nccl/nccl_abi.h"

namespace ccl::nccl::group {

bool active();

// Keeps `buffer` alive until the outermost group end (or drops it now outside a group).
void keep(std::shared_ptr<void> buffer);

// Before a device operation: opens the real NCCL group if this group has none yet.
void enterReal();

// A communicator whose creation the outermost group end waits for (or not, if non-blocking).
void addCreation(ncclComm_t comm);

// Notes a host operation queued in ccl's group (ncclGroupSimulateEnd refuses those).
void noteHostOp();

// Inside a group: keeps `enqueue` (a compressed device call on `comm`) for the outermost
// group end, which runs it after the real NCCL group has been ended, having waited for
// comm's real communicator when that end said ncclInProgress; returns true. Outside a
// group: false, and nothing is kept.
bool defer(ncclComm_t comm, std::function<void()> enqueue);

}  // namespace ccl::nccl::group
