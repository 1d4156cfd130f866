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

// A creation whose communicator the caller never sees (ncclCommSplit with NCCL_SPLIT_NOCOLOR):
// the outermost group end waits for it, whatever the mode, then destroys it.
void addDiscarded(ncclComm_t comm);

// Whether this thread's open group holds `comm`: a compressed device call kept for its end,
// or its creation.
bool holds(ncclComm_t comm);

// Drops what this thread's open group holds of `comm` (it is being aborted).
void forget(ncclComm_t comm);

// A call of this thread's open group failed (its error already recorded): as in NCCL, the
// outermost group end then runs none of ccl's operations nor the device calls kept for it,
// and returns `code`. What already went to NVIDIA's open group still runs at its end: NVIDIA's
// NCCL offers no way to take an operation back. Outside a group: nothing.
void fail(ncclResult_t code);

// Notes a host operation queued in ccl's group (ncclGroupSimulateEnd refuses those).
void noteHostOp();

// Runs `prepare` (what writes the input of a host operation of `comm` from the caller's
// buffers: PreMulSum's scaling) when the operation runs: at once outside a group, else at the
// outermost group end, before ccl's operations run, since NCCL reads a collective's input
// (and a device-residence scalar) when it runs. One that throws fails the group.
void whenRun(ncclComm_t comm, std::function<void()> prepare);

// Inside a group: keeps `enqueue` (a compressed device call on `comm`) for the outermost
// group end, which runs it after the real NCCL group has been ended, having waited for
// comm's real communicator when that end said ncclInProgress; returns true. Outside a
// group: false, and nothing is kept.
bool defer(ncclComm_t comm, std::function<void()> enqueue);

}  // namespace ccl::nccl::group
