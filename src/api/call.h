// SPDX-License-Identifier: BSD-3-Clause
// A collective as the application called it, the one description every entry builds: the
// exported ccl*/ccl*Ex calls (api/collectives.cc) and the NCCL face, which maps NCCL's types
// onto it and asks offerDevice where a call on device buffers is best served.
#pragma once

#include <cstddef>

#include "ccl/ccl.h"
#include "collectives/plan/collective_info.h"

namespace ccl::api {

struct Call {
  coll::Coll kind;
  const char* fn;
  const void* send;
  void* recv;
  size_t count;
  cclDataType_t dtype;
  cclRedOp_t op;  // reductions only
  int root;       // rooted only
  cclComm_t comm;
  cclStream_t stream;
  bool ex = false;  // an *Ex call: compression and feedback below override the policy
  const cclCompression_t* compression = nullptr;
  cclFeedback_t feedback = nullptr;
};

// Whether `c`, a collective on device buffers, would run compressed on its communicator,
// decided as its run decides (the policy, the codec's types, the topology, the plan's bound
// on the communicator's device link), without running or counting it. For a caller that has
// a faster way to run it uncompressed (the NCCL face: NVIDIA's own kernels). A call that
// moves nothing (count 0) is not compressed. Throws what the call would throw for bad
// arguments.
struct DeviceOffer {
  bool compressed = false;
  int why = -1;  // when not compressed: the cclUncompressedReason_t, or -1 (no default codec)
};
DeviceOffer offerDevice(const Call& c);

// True when `comm` has a device (cclCommCuDevice), so calls on device buffers can run on it.
bool hasDevice(cclComm_t comm);
// True when `comm` has a default codec (CCL_CODEC, cclCommSetCompression, CCL_CODEC=auto):
// the calls it leaves uncompressed are counted by reason (cclStats_t.uncompressed).
bool hasDefaultCodec(cclComm_t comm);

}  // namespace ccl::api
