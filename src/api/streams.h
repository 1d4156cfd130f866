// SPDX-License-Identifier: BSD-3-Clause
// Host streams as cclStream_t handles (cclHostStreamCreate): the handle is the address of a
// coll::HostStream that ccl made, recognised by a registry of live ones, so any other
// pointer (a CUDA stream) is told apart without being dereferenced.
#pragma once

#include "ccl/ccl.h"
#include "collectives/stream.h"

namespace ccl::api {

// The host stream behind `stream`; nullptr for NULL. Throws cclInvalidUsage for a pointer
// that is not a live host stream (a CUDA stream given for host buffers).
coll::Stream* hostStream(cclStream_t stream);

// True when `stream` is a live host stream (cclHostStreamCreate).
bool isHostStream(cclStream_t stream);

}  // namespace ccl::api
