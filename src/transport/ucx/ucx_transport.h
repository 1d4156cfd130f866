// SPDX-License-Identifier: BSD-3-Clause
// UCX transport: UCP tag send/recv on one worker per communicator, peer-failure error
// handling, worker addresses exchanged through the bootstrap.
#pragma once

#include <memory>

#include "transport/bootstrap/bootstrap.h"
#include "transport/transport.h"

namespace ccl::transport {

// Collective over `bs`: creates this rank's worker and endpoints to every rank, and
// exchanges one message with each so connections exist before the first collective.
// `bs` is used only during the call. Throws ccl::Error(cclSystemError) when UCX cannot be
// initialised (also in a fork()ed child of a process that had already used UCX).
//
// Failure detection: peers on other hosts use UCP_ERR_HANDLING_MODE_PEER. Peers on this
// host do not by default (CCL_UCX_ERR_MODE=auto), because UCX 1.13's shared-memory
// transports lack peer-failure support and UCX would fall back to TCP; instead progress()
// notices within ~100 ms when a peer's process has exited.
//
// Destroying the transport flushes and closes the endpoints (bounded wait); call it after
// a bootstrap barrier so no peer still expects messages from this rank.
std::unique_ptr<Transport> createUcxTransport(bootstrap::Bootstrap& bs);

// Whether this build has the UCX transport (CCL_ENABLE_UCX). Without it, the function
// above is ucx_absent.cc's, which throws.
extern const bool kUcxBuilt;

}  // namespace ccl::transport
