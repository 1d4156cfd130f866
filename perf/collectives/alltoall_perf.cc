// SPDX-License-Identifier: BSD-3-Clause
// alltoall_perf: cclAlltoAll; block j of rank i lands as block i of rank j.
#include "harness/ccl_backend.h"

namespace {

using namespace cclperf;

class AlltoAllPerf final : public PerfCollective {
 public:
  AlltoAllPerf() : PerfCollective(ccl::coll::Coll::kAlltoAll) {}
  double algbwBytes(size_t count, size_t typeSize, int n) const override { return double(count * typeSize) * n; }
  double busbwFactor(int n) const override { return double(n - 1) / n; }

  void run(RankComm& comm, const CallArgs& a) const override {
    CclRankComm& cc = cclRankOf(comm);
    if (cc.compression()) {
      cclCheck(cclAlltoAllEx(a.send, a.recv, a.count, a.type, cc.get(), a.stream, cc.compression()), "cclAlltoAllEx",
               cc.get());
      return;
    }
    cclCheck(cclAlltoAll(a.send, a.recv, a.count, a.type, cc.get(), a.stream), "cclAlltoAll", cc.get());
  }
  void fillInput(const DataModel& m, RankInfo me, int, const TypedBuffer& send) const override {
    fillWith(send, [&](size_t i) { return m.input(me.rank, i); });
  }
  bool fillExpected(const DataModel& m, RankInfo me, int, const TypedBuffer& out) const override {
    const size_t c = out.count / size_t(me.nranks);
    // Block `src` of my result is block `me` of rank src's input.
    fillWith(out, [&](size_t i) { return m.input(int(i / c), size_t(me.rank) * c + i % c); });
    return true;
  }
};

}  // namespace

int main(int argc, char** argv) { return cclperf::runCclPerf(argc, argv, AlltoAllPerf{}); }
