// SPDX-License-Identifier: BSD-3-Clause
// The in-process transport: every rank of the communicator is a thread of this process, and
// a send copies its bytes into the receiver's mailbox at once. Needs no network and no UCX,
// so a build without UCX still runs every algorithm, and the tests that drive ranks as
// threads can run over it (CCL_TRANSPORT=local). Receives match per (source, tag) in posting
// order, whichever is tested first. Failure semantics follow the transport contract: abort()
// from any rank fails every pending and future request of every rank (cclRemoteError, or
// cclInvalidUsage after abortMismatch), and a rank that destroys its transport fails the
// receives still waiting for it (cclRemoteError).
#pragma once

#include <memory>

#include "transport/bootstrap/bootstrap.h"
#include "transport/transport.h"

namespace ccl::transport {

// The mailboxes one communicator's ranks share; created by its rank 0.
class Fabric;

// Collective over `bs`. Throws Error(cclInvalidUsage) on every rank when some rank is in
// another process.
std::unique_ptr<Transport> createLocalTransport(bootstrap::Bootstrap& bs);

// A transport over a fabric made for `size` ranks by the caller (plan tests, which run
// ranks as threads without a bootstrap): makeFabric once, then one transport per rank.
std::shared_ptr<Fabric> makeFabric(int size);
std::unique_ptr<Transport> createLocalTransport(std::shared_ptr<Fabric> fabric, int rank);

}  // namespace ccl::transport
