// SPDX-License-Identifier: BSD-3-Clause
// A call as an NCCL program made it, and what the face says once about compression. The
// policy itself (CCL_CODEC, CCL_COMPRESS, CCL_CODEC_MIN_BYTES, CCL_FEEDBACK, ...) is ccl's
// communicator policy: host buffers go to ccl's communicator, which applies it; for device
// buffers the face asks that communicator (api::offerDevice) whether it would compress the
// call, and runs it there if so, else on NVIDIA's NCCL as it is.
#pragma once

#include <cstddef>
#include <string>

#include "ccl/ccl.h"
#include "collectives/collective_info.h"
#include "nccl/nccl_abi.h"

namespace ccl::nccl {

using coll::Coll;

// One call as the application made it, with the face's communicator.
struct CollCall {
  Coll kind;
  const char* fn;
  const void* send;
  void* recv;
  size_t count;
  ncclDataType_t dtype;
  ncclRedOp_t op;  // reductions only
  int root;        // rooted collectives only
  ncclComm_t comm;
  cudaStream_t stream;
};

// Reads the policy variables once (a bad value throws Error(cclInvalidArgument) naming it)
// and logs one INFO line saying what will be lossy: called at every communicator init.
void announcePolicy();

// That line.
std::string describePolicy();

}  // namespace ccl::nccl
