// SPDX-License-Identifier: BSD-3-Clause
// Staging memory that outlives the links of a device. Freeing pinned host memory
// (cudaFreeHost) waits for the whole device: a communicator destroyed or aborted while
// another one's stream on the same device waits for its peers would wait with it (PyTorch's
// watchdog aborts one communicator while another is stuck). So a link's staging, when it
// goes, is kept for the device's next link, and given back to the device only when no link
// of the device is left, where no stream of ccl's can be waiting.
#pragma once

#include "collectives/exec/links/transport_link.h"

namespace ccl::coll {

// `m` (a device's staging memory), as a link of device `device` takes it: allocations reuse
// blocks earlier links left, and frees keep the block, until the last link of the device
// (the last copy of what this returns) goes.
StagingMemory reusingStaging(StagingMemory m, int device);

}  // namespace ccl::coll
