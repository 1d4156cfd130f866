// UCX transport: UCP tag send/recv on one worker per communicator, peer-failure error
// handling, worker addresses exchanged through the bootstrap.
#pragma once

#include <memory>

#include "transport/bootstrap/bootstrap.h"
#include "transport/transport.h"

namespace ccl::transport {

// Collective over `bs`: creates this rank's worker and endpoints to every rank.
// Throws ccl::Error(cclSystemError) when UCX cannot be initialised.
std::unique_ptr<Transport> createUcxTransport(bootstrap::Bootstrap& bs);

}  // namespace ccl::transport
