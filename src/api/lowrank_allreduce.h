// SPDX-License-Identifier: BSD-3-Clause
// The PowerSGD allreduce (codec powersgd, Vogels et al. 2019): each rank projects its matrix
// M_i onto the shared Q, the ranks sum P = sum M_i Q with an uncompressed fp32 allreduce,
// every rank orthonormalises the same P, projects back Q_i = M_i^T P, and a second allreduce
// sums Q = sum Q_i; the result is P Q^T (divided by the rank count for cclAvg). With error
// feedback each rank keeps M_i - P Q_i^T and the summed Q warm-starts the next call, so the
// ranks' Q stay identical. Not a plan: the two allreduces have work between them, so it runs
// at once and never inside a group (collectives.cc refuses that).
#pragma once

#include <cstddef>

#include "api/compression.h"
#include "ccl/ccl.h"
#include "collectives/algorithms.h"

namespace ccl::api {

struct LowRankCall {
  cclComm_t comm;
  const void* send;
  void* recv;
  size_t count;
  cclDataType_t dtype;
  cclRedOp_t op;  // cclSum or cclAvg
  codec::Params codec;
  cclFeedback* feedback;  // residual kind, or null
};

// Runs the call; `args` are those of the uncompressed allreduce of the same buffer, whose
// bytes the statistics count as raw. The communicator's allreduce counters see one
// compressed call whose wire bytes are what the two small allreduces sent.
void lowRankAllReduce(const LowRankCall& c, const coll::CollArgs& args);

// An uncompressed fp32 sum over `comm`, run now (collectives.cc).
void allReduceFloats(cclComm_t comm, float* buf, size_t count);

}  // namespace ccl::api
