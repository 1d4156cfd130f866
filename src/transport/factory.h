// SPDX-License-Identifier: BSD-3-Clause
// Makes a communicator's transport. The kinds a build has are listed in one table
// (factory.cc); CCL_TRANSPORT picks one by name, and "auto" takes the first the build has.
// Adding a transport: a folder of its own, a create function, one row in the table.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "transport/bootstrap/bootstrap.h"
#include "transport/transport.h"

namespace ccl::transport {

// Collective over `bs`: the transport `name` names ("auto", "ucx", "local", "shm"). `hostId`
// is this rank's host identity as the communicator has it (common/host_id.h: its config's,
// CCL_HOST_ID or the host's hash), which tells the shared-memory channel its host's ranks;
// 0: the transport resolves it from the environment. Throws Error(cclInvalidArgument) for an
// unknown name or one this build lacks.
std::unique_ptr<Transport> createTransport(const std::string& name, bootstrap::Bootstrap& bs, uint64_t hostId = 0);

// The names this build can make, comma-separated, in the order "auto" tries them.
std::string availableTransports();

}  // namespace ccl::transport
