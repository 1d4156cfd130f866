// SPDX-License-Identifier: BSD-3-Clause
// reduce_perf: cclReduce to the root (-r); only the root's result is checked.
#include "harness/ccl_backend.h"

namespace {

using namespace cclperf;

class ReducePerf final : public PerfCollective {
 public:
  ReducePerf() : PerfCollective(ccl::coll::Coll::kReduce) {}
  double algbwBytes(size_t count, size_t typeSize, int) const override { return double(count * typeSize); }
  double busbwFactor(int) const override { return 1.0; }

  void run(RankComm& comm, const CallArgs& a) const override {
    cclCheck(cclReduce(a.send, a.recv, a.count, a.type, a.op, a.root, cclCommOf(comm), a.stream), "cclReduce",
             cclCommOf(comm));
  }
  void fillInput(const DataModel& m, RankInfo me, int, const TypedBuffer& send) const override {
    fillWith(send, [&](size_t i) { return m.input(me.rank, i); });
  }
  bool fillExpected(const DataModel& m, RankInfo me, int root, const TypedBuffer& out) const override {
    if (me.rank != root) return false;
    fillWith(out, [&](size_t i) { return m.reduced(i); });
    return true;
  }
};

}  // namespace

int main(int argc, char** argv) { return cclperf::runCclPerf(argc, argv, ReducePerf{}); }
