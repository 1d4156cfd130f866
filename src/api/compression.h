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

// CCL_FEEDBACK's value (none, ef or residual, loco; any case); throws like parseCompressList.
cclFeedbackKind_t parseFeedbackKind(const std::string& value);

// The policy from the environment (CCL_CODEC, CCL_CODEC_*, CCL_COMPRESS, CCL_FEEDBACK, ...),
// with `codec` (may be NULL) in place of CCL_CODEC and its parameters.
Policy policyFromEnv(const cclCompression_t* codec);

// The codec of the steps inside a node (hierarchical algorithms): `codec` (may be NULL) or
// else CCL_CODEC_INTRA with the CCL_CODEC_* parameters. The rest of the policy (sizes,
// collectives, feedback) is the communicator's, as for its default codec.
codec::Params intraCodecFromEnv(const cclCompression_t* codec);

// Feedback kept per (buffer, count, operation) for calls that pass no handle.
class AutoFeedback {
 public:
  cclFeedback* get(const void* buffer, size_t count, int op, const Policy& policy);

 private:
  std::map<std::tuple<const void*, size_t, int>, std::unique_ptr<cclFeedback>> states_;
};

}  // namespace ccl::api
