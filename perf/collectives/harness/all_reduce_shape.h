// SPDX-License-Identifier: BSD-3-Clause
// Layout, bandwidth and check of an allreduce, shared by all_reduce_perf and the MPI
// baseline so that both measure and report the same way; subclasses only call.
#pragma once

#include "harness/collective.h"

namespace cclperf {

class AllReduceShape : public PerfCollective {
 public:
  AllReduceShape() : PerfCollective(ccl::coll::Coll::kAllReduce) {}
  double algbwBytes(size_t count, size_t typeSize, int) const override { return double(count * typeSize); }
  double busbwFactor(int n) const override { return 2.0 * (n - 1) / n; }

  void fillInput(const DataModel& m, RankInfo me, int, const TypedBuffer& send) const override {
    fillWith(send, [&](size_t i) { return m.input(me.rank, i); });
  }
  bool fillExpected(const DataModel& m, RankInfo, int, const TypedBuffer& out) const override {
    fillWith(out, [&](size_t i) { return m.reduced(i); });
    return true;
  }
};

}  // namespace cclperf
