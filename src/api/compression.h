// Compression policy of a communicator, error-feedback handles and per-operation counters.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "ccl/ccl.h"
#include "codecs/codec.h"

struct cclFeedback {
  cclFeedbackKind_t kind = cclFeedbackResidual;
  float beta = 0.5f;
  int resetPeriod = 0;

  // The fp32 residual the next call reads and updates, sized for `floats` values of an
  // operation of kind `op`; state kept for another shape is cleared first.
  float* prepare(int op, size_t floats);
  // After the call: LoCo folds the new error into its moving average and stores it in 8 bits.
  void finish();

 private:
  std::vector<float> residual_;
  std::vector<float> previous_;        // LoCo: the averaged error the call started from
  std::vector<unsigned char> stored_;  // LoCo: the averaged error as an int8 stream
  size_t storedBytes_ = 0;
  uint64_t calls_ = 0;
  int op_ = -1;
};

namespace ccl::api {

struct Policy {
  codec::Params codec;  // codec none: compression off
  size_t minBytes = 0;
  uint32_t enabled = 0;  // bit per cclOpKind_t
  cclFeedbackKind_t autoFeedback = cclFeedbackNone;
  float locoBeta = 0.5f;
  int locoReset = 0;
};

// The policy from the environment (CCL_CODEC, CCL_CODEC_*, CCL_COMPRESS, CCL_FEEDBACK, ...),
// with `codec` (may be NULL) in place of CCL_CODEC and its parameters.
Policy policyFromEnv(const cclCompression_t* codec);

// Feedback kept per (buffer, count, operation) for calls that pass no handle.
class AutoFeedback {
 public:
  cclFeedback* get(const void* buffer, size_t count, int op, const Policy& policy);

 private:
  std::map<std::tuple<const void*, size_t, int>, std::unique_ptr<cclFeedback>> states_;
};

}  // namespace ccl::api
