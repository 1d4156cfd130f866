// SPDX-License-Identifier: BSD-3-Clause
// scatter_perf: cclScatter of the root's (-r) blocks, block r to rank r.
#include "harness/ccl_backend.h"

namespace {

using namespace cclperf;

class ScatterPerf final : public PerfCollective {
 public:
  ScatterPerf() : PerfCollective(ccl::coll::Coll::kScatter) {}
  double algbwBytes(size_t count, size_t typeSize, int n) const override { return double(count * typeSize) * n; }
  double busbwFactor(int n) const override { return double(n - 1) / n; }

  void run(RankComm& comm, const CallArgs& a) const override {
    cclCheck(cclScatter(a.send, a.recv, a.count, a.type, a.root, cclCommOf(comm), a.stream), "cclScatter",
             cclCommOf(comm));
  }
  void fillInput(const DataModel& m, RankInfo me, int, const TypedBuffer& send) const override {
    fillWith(send, [&](size_t i) { return m.input(me.rank, i); });
  }
  bool fillExpected(const DataModel& m, RankInfo me, int root, const TypedBuffer& out) const override {
    const size_t first = size_t(me.rank) * out.count;
    fillWith(out, [&](size_t j) { return m.input(root, first + j); });
    return true;
  }
};

}  // namespace

int main(int argc, char** argv) { return cclperf::runCclPerf(argc, argv, ScatterPerf{}); }
