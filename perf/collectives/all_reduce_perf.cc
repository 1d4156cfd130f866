// all_reduce_perf: cclAllReduce, measured and checked as nccl-tests does.
#include "harness/all_reduce_shape.h"
#include "harness/ccl_backend.h"

namespace {

class AllReducePerf final : public cclperf::AllReduceShape {
 public:
  void run(cclperf::RankComm& comm, const cclperf::CallArgs& a) const override {
    const cclComm_t c = cclperf::cclCommOf(comm);
    cclperf::cclCheck(cclAllReduce(a.send, a.recv, a.count, a.type, a.op, c, nullptr), "cclAllReduce", c);
  }
};

}  // namespace

int main(int argc, char** argv) { return cclperf::runCclPerf(argc, argv, AllReducePerf{}); }
