// SPDX-License-Identifier: BSD-3-Clause
// The counters of a face communicator, logged at CCL_DEBUG=INFO when it is destroyed or
// aborted, so a program that only speaks NCCL can still see what compression did.
#pragma once

#include "ccl/ccl.h"

namespace ccl::nccl {

// One INFO line per kind of operation that had calls, read with cclCommGetStats:
//   NCCL face: stats <op> rank=R nranks=N calls=C compressed=K raw=B wire=W ratio=W/B codec_s=S
// (ratio is 1 when raw is 0); then, when there are any, one line of the calls the default
// codec left uncompressed, by reason, and one of the bytes sent across nodes:
//   NCCL face: uncompressed rank=R nranks=N not_listed=C small=C ... (cclUncompressedReasonName)
//   NCCL face: across nodes rank=R nranks=N raw=B wire=W
// Nothing is logged below INFO or when `comm` is NULL; a failure
// to read the counters is logged at WARN and never thrown, since the caller is tearing down.
void logStatsSummary(cclComm_t comm, int rank, int nranks);

}  // namespace ccl::nccl
