// SPDX-License-Identifier: BSD-3-Clause
// The shared-memory channel (CCL_TRANSPORT=shm): ranks of one host (one host identity,
// common/host_id.h) exchange messages through single-producer single-consumer rings
// (shm/ring.h), one per ordered pair, in segments each rank creates for its incoming rings
// and its peers map (shm/segment.h). A send copies its bytes into the peer's ring, the
// receive copies them out; no tag matching across the wire, no request handed to another
// thread, no system call on the way. Messages larger than a fragment go as fragments; a
// message nobody waits for yet is copied aside, so a ring never blocks on a receive posted
// late. Pairs on different hosts (or that could not map each other's segment) go through
// UCX, made only when some pair needs it.
//
// Faults: a peer that exits is found within 100 ms of a wait on it (its pid, checked while
// requests to or from it are pending) and its requests fail with cclRemoteError naming it;
// abort() marks this rank's ends of every ring, so peers' requests fail promptly
// (cclInvalidUsage after abortMismatch); a peer that destroyed its transport fails the
// receives still waiting for it once its ring is drained. Segments are unlinked as soon as
// every rank of the host has mapped them.
#pragma once

#include <cstdint>
#include <memory>

#include "transport/bootstrap/bootstrap.h"
#include "transport/transport.h"

namespace ccl::transport {

// Collective over `bs`; the ranks of one `hostId` (0: host::resolve's) share memory. Throws
// Error(cclInvalidUsage) when ranks of several hosts need a transport between them and this
// build has no UCX.
std::unique_ptr<Transport> createShmTransport(bootstrap::Bootstrap& bs, uint64_t hostId);

}  // namespace ccl::transport
