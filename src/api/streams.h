// SPDX-License-Identifier: BSD-3-Clause
// Host streams as cclStream_t handles (cclHostStreamCreate): the handle is the address of a
// coll::HostStream that ccl made, recognised by a registry of live ones, so any other
// pointer (a CUDA stream) is told apart without being dereferenced.
#pragma once

#include "ccl/ccl.h"
#include "collectives/exec/stream.h"

namespace ccl::api {

// The live host stream `stream` is (cclHostStreamCreate); nullptr for NULL or any other
// pointer (a CUDA stream), which is never dereferenced.
coll::Stream* findHostStream(cclStream_t stream);

// True when `stream` is a live host stream (cclHostStreamCreate).
bool isHostStream(cclStream_t stream);

}  // namespace ccl::api
