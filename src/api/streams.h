// SPDX-License-Identifier: BSD-3-Clause
// Host streams as cclStream_t handles (cclHostStreamCreate): the handle is the address of a
// coll::HostStream that ccl made, recognised by a registry of live ones, so any other
// pointer (a CUDA stream) is told apart without being dereferenced.
#pragma once

#include <memory>

#include "ccl/ccl.h"
#include "collectives/exec/stream.h"

namespace ccl::api {

// The live host stream `stream` is (cclHostStreamCreate); nullptr for NULL or any other
// pointer (a CUDA stream), which is never dereferenced.
coll::Stream* findHostStream(cclStream_t stream);

// True when `stream` is a live host stream (cclHostStreamCreate).
bool isHostStream(cclStream_t stream);

// A reference to the live host stream `s` (nullptr once cclHostStreamDestroy took it from
// the registry; `s` is compared, never dereferenced): an open group holds one for its calls,
// so that a destroy from another thread before the group's end frees nothing that end reads
// (it refuses the group).
std::shared_ptr<coll::Stream> holdHostStream(const coll::Stream* s);

}  // namespace ccl::api
