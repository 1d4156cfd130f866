// SPDX-License-Identifier: BSD-3-Clause
// Compression policy of a communicator, error-feedback handles and per-operation counters.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "ccl/ccl.h"
#include "codecs/codec.h"
#include "codecs/feedback.h"

// A feedback handle is the codecs' feedback state (codecs/feedback.h) behind the C type.
struct cclFeedback : ccl::codec::FeedbackState {
  using FeedbackState::FeedbackState;
  // Tells this handle apart from one made later at the same address: device calls keep
  // their residual in the communicator's device state, keyed by it.
  const uint64_t serial = nextSerial();
  // Set once a device call used it: its error then lives in device memory.
  std::atomic<bool> onDevice{false};
  // One of AutoFeedback's (CCL_FEEDBACK), not a caller's handle.
  bool automatic = false;

 private:
  static uint64_t nextSerial();
};

namespace ccl::api {

struct Policy {
  codec::Params codec;  // codec none: compression off
  // CCL_CODEC=auto[:LIST]: the codecs of LIST (with the CCL_CODEC_* parameters) the cost
  // model may choose per call, besides none; `codec` is then none.
  bool autoChoice = false;
  std::vector<codec::Params> allowed;
  size_t minBytes = 0;
  uint32_t enabled = 0;  // bit per cclOpKind_t
  cclFeedbackKind_t autoFeedback = cclFeedbackNone;
  float locoBeta = 0.5f;
  int locoReset = 0;
};

// CCL_COMPRESS's value as a bit per cclOpKind_t: collective names as collInfo spells them
// (any case), "sendrecv" (send and recv), "all" or "none", comma-separated. Throws
// Error(cclInvalidArgument) for an unknown name or one that is never compressed.
uint32_t parseCompressList(const std::string& list);

// The codec `name` (as cclCodecName spells it) with the CCL_CODEC_* parameters, as a caller's
// struct would give it; throws Error(cclInvalidArgument) naming `what` for an unknown name.
cclCompression_t compressionNamed(const std::string& name, const char* what);

// CCL_FEEDBACK's value (none, ef or residual, loco; any case); throws like parseCompressList.
cclFeedbackKind_t parseFeedbackKind(const std::string& value);

// The policy from the environment (CCL_CODEC, CCL_CODEC_*, CCL_COMPRESS, CCL_FEEDBACK, ...),
// with `codec` (may be NULL) in place of CCL_CODEC and its parameters.
Policy policyFromEnv(const cclCompression_t* codec);

// The codec of the steps inside a node (hierarchical algorithms): `codec` (may be NULL) or
// else CCL_CODEC_INTRA with the CCL_CODEC_* parameters. The rest of the policy (sizes,
// collectives, feedback) is the communicator's, as for its default codec.
codec::Params intraCodecFromEnv(const cclCompression_t* codec);

// Feedback for calls that pass no handle (CCL_FEEDBACK): one state per position in the
// training step's sequence of such calls, the order DDP's buckets and FSDP's layers repeat
// every step. A call is known by its identity (operation, count, type, buffer).
// - The step's length is learned: the calls of the first step take positions 0, 1, ...
//   until a call repeats the first one's identity, which starts the second step.
// - From then on the k-th call of a step takes position k (mod the length). It keeps that
//   position's state only if its identity is the one the position had in the last step;
//   otherwise the position starts afresh (a new generation: a zero residual). A bucket
//   rebuild, a reordering, or another tensor at an address an earlier one had, so never
//   receives another tensor's residual.
// - Two steps in a row in which no call kept its state (the step's length changed) start the
//   learning again.
// Calls of one step with the same identity (one buffer reused for several tensors of one
// size) cannot be told apart in the first step: the second starts a step of length one; pass
// feedback handles (cclFeedback_t) to tell them apart. At most kMaxPositions positions are
// kept: the states are bounded by one step's tensors, and freed with the communicator.
//
// A call that takes a position and then does not run (refused, or its group refused at
// cclGroupEnd) gives it back (giveBack, latest first), as it gives back its tag's number: its
// peers' calls and its own later ones then keep the positions, so the residuals, they had.
class AutoFeedback {
  struct Identity {
    const void* buffer;
    size_t count;
    int dtype;
    int op;
    bool operator==(const Identity&) const = default;
  };

 public:
  static constexpr size_t kMaxPositions = 1024;
  // What one get() changed, for giveBack: the counters before it and the position it took
  // (appended by it, or that position's identity and generation before it).
  struct Taken {
    bool any = false;  // false: no position was taken (a caller's handle, or no feedback)
    bool appended = false;
    size_t at = 0;
    Identity id{};
    uint64_t generation = 0;
    size_t next = 0, length = 0, kept = 0;
    int barrenSteps = 0;
  };
  struct Slot {
    cclFeedback* state = nullptr;
    uint64_t generation = 0;  // FeedbackState::prepare's: new when the position's tensor changed
    Taken taken{};            // what get() changed, for giveBack
  };
  Slot get(const void* buffer, size_t count, cclDataType_t dtype, int op, const Policy& policy);
  // Undoes the get() that returned `taken`, as if it had never been made. Positions are given
  // back latest first (the gets made after it already given back). A Taken of no position, or
  // one the state no longer has (moved to a shrunk communicator meanwhile), changes nothing.
  void giveBack(const Taken& taken);
  // Positions kept (at most the longest step seen, and kMaxPositions).
  size_t positions() const { return sequence_.size(); }
  // The step's length once learned; 0 while learning.
  size_t stepLength() const { return length_; }

 private:
  struct Entry {
    Identity id;
    std::unique_ptr<cclFeedback> state;
    uint64_t generation = 0;
  };
  std::vector<Entry> sequence_;
  size_t next_ = 0;      // the next call's position
  size_t length_ = 0;    // the step's length; 0: learning it
  size_t kept_ = 0;      // calls of the current step that kept their state
  int barrenSteps_ = 0;  // steps in a row in which no call kept its state
};

}  // namespace ccl::api
