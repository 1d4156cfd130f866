// SPDX-License-Identifier: BSD-3-Clause
// The process-wide UCP context shared by every communicator's worker, and the mapping of
// UCS status codes onto ccl errors.
#pragma once

#include <ucp/api/ucp.h>

#include <string>

#include "ccl/ccl.h"

namespace ccl::transport::ucx {

// Created on first use (thread-safe), with the tag feature and workers that may run on
// different threads. Throws Error(cclSystemError) when UCX cannot be initialised, or in a
// fork()ed child of a process that had already initialised it.
ucp_context_h processContext();

// True when the process context has a shared-memory transport (posix or sysv) among its
// resources, i.e. UCX_TLS allows one.
bool hasSharedMemory();

// cclRemoteError for a failed or unreachable peer, cclInvalidUsage for a truncated message,
// cclSystemError otherwise.
cclResult_t resultOf(ucs_status_t status);

// Throws Error(cclSystemError, what + UCX's description) unless status is UCS_OK.
void checkStatus(ucs_status_t status, const std::string& what);

}  // namespace ccl::transport::ucx
