// SPDX-License-Identifier: BSD-3-Clause
// reduce_scatter_perf: cclReduceScatter; rank r receives the reduction of block r.
#include "harness/ccl_backend.h"

namespace {

using namespace cclperf;

class ReduceScatterPerf final : public PerfCollective {
 public:
  ReduceScatterPerf() : PerfCollective(ccl::coll::Coll::kReduceScatter) {}
  double algbwBytes(size_t count, size_t typeSize, int n) const override { return double(count * typeSize) * n; }
  double busbwFactor(int n) const override { return double(n - 1) / n; }

  void run(RankComm& comm, const CallArgs& a) const override {
    CclRankComm& cc = cclRankOf(comm);
    if (cc.compression()) {
      cclCheck(cclReduceScatterEx(a.send, a.recv, a.count, a.type, a.op, cc.get(), a.stream, cc.compression(),
                                  cc.nextFeedback()),
               "cclReduceScatterEx", cc.get());
      return;
    }
    cclCheck(cclReduceScatter(a.send, a.recv, a.count, a.type, a.op, cc.get(), a.stream), "cclReduceScatter", cc.get());
  }
  void fillInput(const DataModel& m, RankInfo me, int, const TypedBuffer& send) const override {
    fillWith(send, [&](size_t i) { return m.input(me.rank, i); });
  }
  bool fillExpected(const DataModel& m, RankInfo me, int, const TypedBuffer& out) const override {
    const size_t first = size_t(me.rank) * out.count;
    fillWith(out, [&](size_t i) { return m.reduced(first + i); });
    return true;
  }
};

}  // namespace

int main(int argc, char** argv) { return cclperf::runCclPerf(argc, argv, ReduceScatterPerf{}); }
