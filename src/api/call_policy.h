// SPDX-License-Identifier: BSD-3-Clause
// What a call gets from its communicator's policy (call_policy.cc): its codec, the algorithm
// (and codec) the cost model chooses for it, and its error-feedback state. api/collectives.cc
// prepares every collective with them.
#pragma once

#include <cstddef>

#include "api/call.h"
#include "api/comm.h"
#include "codecs/codec.h"
#include "collectives/plan/call_args.h"

namespace ccl::api {

// The codec a call uses: its own (an *Ex call), else the communicator's when the policy
// enables it for this collective; none below the size threshold. The low-rank codec runs
// send, recv and allreduce on host memory only: asked for explicitly elsewhere it is an
// error, as the communicator's default it leaves the call uncompressed; its explicit
// rows x cols must be the call's count, whatever the size. `why` gets the reason
// (cclUncompressedReason_t) the communicator's default codec was not applied, or -1.
codec::Params codecFor(cclComm_t comm, coll::Coll c, bool ex, const cclCompression_t* explicitCodec, size_t count,
                       cclDataType_t dtype, bool onDevice, int* why);

// The reason a call cannot take its codec: its type, or its reduction.
cclUncompressedReason_t notCompressible(coll::CollArgs a);

// The cost model's choice for this call's shape, made once per shape (in a cache like the
// plans'): under CCL_CODEC=auto (`codecToo`) the codec, none or one the user allowed, and
// the algorithm; else, when CCL_ALGO=auto, the algorithm for the codec the call has
// (coll::chooseAlgo: the model where it timed the codec's kernels, else the table's rules).
// Every rank has the same model and shape, so the same choice; the call digest checks it.
// Calls on device buffers are priced with the device's model (deviceCostModel: the same
// links, the device kit's kernels), in a cache of their own, and choose only the algorithm.
// Writes the choice into `a`; returns the predicted seconds (0 where the model does not
// price it).
double chooseByCost(cclComm_t comm, const Call& c, int opKind, bool codecToo, bool device, coll::CollArgs& a);

// The error-feedback state of a compressed call: the caller's handle, else the state kept
// per position in the step (AutoFeedback) when CCL_FEEDBACK asks for it; with its generation.
// The low-rank codec keeps its warm start in a handle of kind none too (ccl.h), without a
// residual: p says which.
// A call it refuses after taking a position of the step gets none (the position is given back).
AutoFeedback::Slot feedbackFor(const Call& c, int opKind, codec::Params& p);

// The step's position a call took (feedbackFor), given back to its communicator unless the
// call is accepted (keep()): a call refused after taking one (its plan, LoCo on device
// buffers) leaves the positions as they were, as it takes its tag's number only once accepted.
class TakenPosition {
 public:
  TakenPosition() = default;
  ~TakenPosition() {
    if (comm_) comm_->compression.autoFeedback.giveBack(taken_);
  }
  TakenPosition(const TakenPosition&) = delete;
  TakenPosition& operator=(const TakenPosition&) = delete;
  void hold(cclComm_t comm, const AutoFeedback::Taken& taken) {
    comm_ = comm;
    taken_ = taken;
  }
  void keep() { comm_ = nullptr; }

 private:
  cclComm_t comm_ = nullptr;
  AutoFeedback::Taken taken_;
};

}  // namespace ccl::api
