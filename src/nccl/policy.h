// SPDX-License-Identifier: BSD-3-Clause
// The compression policy as the NCCL face sees it, from the environment (CCL_CODEC,
// CCL_CODEC_MIN_BYTES, CCL_COMPRESS, CCL_FEEDBACK). Host buffers are compressed by ccl's own
// communicator policy, which reads the same variables; the face only reports it. Device
// buffers go to NVIDIA's NCCL, uncompressed unless a compressed runner is installed
// (setCompressedRunner): the hook where ccl's stream executor, with the real NCCL
// communicator as transport, plugs in.
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

struct Policy {
  cclCodec_t codec = cclCodecNone;  // none under CCL_CODEC=auto
  // CCL_CODEC=auto[:LIST]: ccl's communicators choose per call for host buffers; device
  // buffers then go to NVIDIA's NCCL uncompressed. `allowed` names LIST's codecs.
  bool autoChoice = false;
  std::string allowed;
  size_t minBytes = 0;
  unsigned enabled = 0;  // bit per cclOpKind_t, as the api layer's policy
  cclFeedbackKind_t feedback = cclFeedbackNone;
  bool enables(Coll c) const { return (enabled >> coll::collInfo(c).op) & 1u; }
};

// Parses the policy variables; throws Error(cclInvalidArgument) naming a bad value.
Policy parsePolicy();

// The process's policy, parsed at the first communicator init, which also logs one INFO
// line saying what will be compressed.
const Policy& policy();

// Runs a device-buffer `call` compressed; returns false to decline (the call then goes to
// NVIDIA's NCCL uncompressed).
using CompressedRunner = bool (*)(const CollCall& call, const Policy& policy);
void setCompressedRunner(CompressedRunner runner);

// True when the policy asks for compression of `call` (size, type, collective).
bool wantsCompression(const CollCall& call, size_t bytes);

// Offers a device-buffer `call` to the compressed runner when the policy wants it; false
// when it ran nothing.
bool tryCompressed(const CollCall& call, size_t bytes);

// A line describing `p` for the log.
std::string describePolicy(const Policy& p);

}  // namespace ccl::nccl
