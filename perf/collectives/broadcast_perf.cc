// SPDX-License-Identifier: BSD-3-Clause
// broadcast_perf: cclBroadcast from the root (-r) to every rank.
#include "harness/ccl_backend.h"

namespace {

using namespace cclperf;

class BroadcastPerf final : public PerfCollective {
 public:
  BroadcastPerf() : PerfCollective(ccl::coll::Coll::kBroadcast) {}
  double algbwBytes(size_t count, size_t typeSize, int) const override { return double(count * typeSize); }
  double busbwFactor(int) const override { return 1.0; }

  void run(RankComm& comm, const CallArgs& a) const override {
    CclRankComm& cc = cclRankOf(comm);
    if (cc.compression()) {
      cclCheck(cclBroadcastEx(a.send, a.recv, a.count, a.type, a.root, cc.get(), a.stream, cc.compression()),
               "cclBroadcastEx", cc.get());
      return;
    }
    cclCheck(cclBroadcast(a.send, a.recv, a.count, a.type, a.root, cc.get(), a.stream), "cclBroadcast", cc.get());
  }
  void fillInput(const DataModel& m, RankInfo me, int, const TypedBuffer& send) const override {
    fillWith(send, [&](size_t i) { return m.input(me.rank, i); });
  }
  bool fillExpected(const DataModel& m, RankInfo, int root, const TypedBuffer& out) const override {
    fillWith(out, [&](size_t i) { return m.input(root, i); });
    return true;
  }
};

}  // namespace

int main(int argc, char** argv) { return cclperf::runCclPerf(argc, argv, BroadcastPerf{}); }
