// Runs the perf collectives on ccl communicators, through the public C API only.
#pragma once

#include "ccl/ccl.h"
#include "harness/collective.h"
#include "harness/runner.h"

namespace cclperf {

// Throws with the library's own message when a ccl call fails.
void cclCheck(cclResult_t result, const char* call, cclComm_t comm = nullptr);

class CclRankComm final : public RankComm {
 public:
  explicit CclRankComm(cclComm_t comm) : comm_(comm) {}
  ~CclRankComm() override;
  CclRankComm(const CclRankComm&) = delete;
  CclRankComm& operator=(const CclRankComm&) = delete;

  cclComm_t get() const { return comm_; }
  void groupStart() override;
  void groupEnd() override;

 private:
  cclComm_t comm_;
};

// The ccl communicator of a rank handle made by the ccl backend.
cclComm_t cclCommOf(RankComm& comm);

// main() of every *_perf binary.
int runCclPerf(int argc, char** argv, const PerfCollective& collective);

}  // namespace cclperf
