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
#include "collectives/plan/collective_info.h"
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
  // An nccl*Config call's configuration (may be NULL), and the codec its ccl option chose.
  const ncclCollConfig_t* config = nullptr;
  bool hasCodec = false;
  cclCompression_t codec{};
};

// Checks an nccl*Config call's `config` as NVIDIA's library does (NULL is no configuration;
// a size below 2.31's, another magic, forceAlgSelection other than 0 or 1 or a CTAPolicy
// outside 0..3 is ncclInvalidArgument) and reads ccl's options from its vendor list
// (CCL_NCCL_VENDOR_ID in ccl.h) into call.hasCodec and call.codec.
void readCollConfig(CollCall& call);

// Reads the policy variables once (a bad value throws Error(cclInvalidArgument) naming it)
// and logs one INFO line saying what will be lossy: called at every communicator init.
void announcePolicy();

// That line.
std::string describePolicy();

}  // namespace ccl::nccl
