// SPDX-License-Identifier: BSD-3-Clause
// Runs the perf collectives on ccl communicators, through the public C API only.
#pragma once

#include <vector>

#include "ccl/ccl.h"
#include "harness/collective.h"
#include "harness/runner.h"

namespace cclperf {

// Throws with the library's own message when a ccl call fails.
void cclCheck(cclResult_t result, const char* call, cclComm_t comm = nullptr);

class CclRankComm final : public RankComm {
 public:
  // With a codec (z.active()), every call passes it explicitly through the *Ex variant,
  // so no communicator policy or environment variable can turn it off. `callsPerGroup`
  // (-m) feedback handles are made up front, so none is created inside a timed loop.
  CclRankComm(cclComm_t comm, const CodecOptions& z, int callsPerGroup = 1);
  ~CclRankComm() override;
  CclRankComm(const CclRankComm&) = delete;
  CclRankComm& operator=(const CclRankComm&) = delete;

  cclComm_t get() const { return comm_; }
  // NULL when -Z is none: the binaries then call the plain (non-Ex) functions.
  const cclCompression_t* compression() const { return compressed_ ? &compression_ : nullptr; }
  // The error-feedback handle of the call about to be made (NULL without --feedback); call
  // it once per call. The library refuses one handle given to two calls of a group, so the
  // i-th call of a -m group gets handle i, as a user gives each tensor of a group its own;
  // a call outside a group gets handle 0.
  cclFeedback_t nextFeedback();
  void groupStart() override;
  void groupEnd() override;
  bool wireCounters(double* raw, double* wire) override;
  bool commandCounters(double* commands, double* hostFunctions) override;

 private:
  cclComm_t comm_;
  bool compressed_;
  cclCompression_t compression_;
  std::vector<cclFeedback_t> feedback_;  // empty without --feedback
  bool inGroup_ = false;
  size_t nextInGroup_ = 0;  // the handle of the group's next call
};

// The ccl handle of a rank made by the ccl backend.
CclRankComm& cclRankOf(RankComm& comm);
// The ccl communicator of a rank handle made by the ccl backend.
cclComm_t cclCommOf(RankComm& comm);

// main() of every *_perf binary.
int runCclPerf(int argc, char** argv, const PerfCollective& collective);

}  // namespace cclperf
