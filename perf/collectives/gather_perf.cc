// SPDX-License-Identifier: BSD-3-Clause
// gather_perf: cclGather of every rank's block to the root (-r).
#include "harness/ccl_backend.h"

namespace {

using namespace cclperf;

class GatherPerf final : public PerfCollective {
 public:
  GatherPerf() : PerfCollective(ccl::coll::Coll::kGather) {}
  double algbwBytes(size_t count, size_t typeSize, int n) const override { return double(count * typeSize) * n; }
  double busbwFactor(int n) const override { return double(n - 1) / n; }

  void run(RankComm& comm, const CallArgs& a) const override {
    cclCheck(cclGather(a.send, a.recv, a.count, a.type, a.root, cclCommOf(comm), a.stream), "cclGather",
             cclCommOf(comm));
  }
  void fillInput(const DataModel& m, RankInfo me, int, const TypedBuffer& send) const override {
    const size_t first = size_t(me.rank) * send.count;
    fillWith(send, [&](size_t j) { return m.input(me.rank, first + j); });
  }
  bool fillExpected(const DataModel& m, RankInfo me, int root, const TypedBuffer& out) const override {
    if (me.rank != root) return false;
    const size_t c = out.count / size_t(me.nranks);
    fillWith(out, [&](size_t i) { return m.input(int(i / c), i); });
    return true;
  }
};

}  // namespace

int main(int argc, char** argv) { return cclperf::runCclPerf(argc, argv, GatherPerf{}); }
