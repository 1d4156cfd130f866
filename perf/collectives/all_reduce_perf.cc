// SPDX-License-Identifier: BSD-3-Clause
// all_reduce_perf: cclAllReduce, measured and checked as nccl-tests does.
#include "harness/all_reduce_shape.h"
#include "harness/ccl_backend.h"

namespace {

class AllReducePerf final : public cclperf::AllReduceShape {
 public:
  void run(cclperf::RankComm& comm, const cclperf::CallArgs& a) const override {
    cclperf::CclRankComm& cc = cclperf::cclRankOf(comm);
    const cclComm_t c = cc.get();
    if (cc.compression()) {
      cclperf::cclCheck(
          cclAllReduceEx(a.send, a.recv, a.count, a.type, a.op, c, a.stream, cc.compression(), cc.nextFeedback()),
          "cclAllReduceEx", c);
      return;
    }
    cclperf::cclCheck(cclAllReduce(a.send, a.recv, a.count, a.type, a.op, c, a.stream), "cclAllReduce", c);
  }
};

}  // namespace

int main(int argc, char** argv) { return cclperf::runCclPerf(argc, argv, AllReducePerf{}); }
