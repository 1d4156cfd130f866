// SPDX-License-Identifier: BSD-3-Clause
// all_gather_perf: cclAllGather; every rank receives every rank's block, by rank.
#include "harness/ccl_backend.h"

namespace {

using namespace cclperf;

class AllGatherPerf final : public PerfCollective {
 public:
  AllGatherPerf() : PerfCollective(ccl::coll::Coll::kAllGather) {}
  double algbwBytes(size_t count, size_t typeSize, int n) const override { return double(count * typeSize) * n; }
  double busbwFactor(int n) const override { return double(n - 1) / n; }

  void run(RankComm& comm, const CallArgs& a) const override {
    CclRankComm& cc = cclRankOf(comm);
    if (cc.compression()) {
      cclCheck(cclAllGatherEx(a.send, a.recv, a.count, a.type, cc.get(), a.stream, cc.compression(), cc.nextFeedback()),
               "cclAllGatherEx", cc.get());
      return;
    }
    cclCheck(cclAllGather(a.send, a.recv, a.count, a.type, cc.get(), a.stream), "cclAllGather", cc.get());
  }
  // Element j of rank r's block is global element r * c + j of the gathered result.
  void fillInput(const DataModel& m, RankInfo me, int, const TypedBuffer& send) const override {
    const size_t first = size_t(me.rank) * send.count;
    fillWith(send, [&](size_t j) { return m.input(me.rank, first + j); });
  }
  bool fillExpected(const DataModel& m, RankInfo me, int, const TypedBuffer& out) const override {
    const size_t c = out.count / size_t(me.nranks);
    fillWith(out, [&](size_t i) { return m.input(int(i / c), i); });
    return true;
  }
};

}  // namespace

int main(int argc, char** argv) { return cclperf::runCclPerf(argc, argv, AllGatherPerf{}); }
