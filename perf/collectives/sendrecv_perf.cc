// SPDX-License-Identifier: BSD-3-Clause
// sendrecv_perf: each rank sends to rank+1 and receives from rank-1 in one group.
#include "harness/ccl_backend.h"

namespace {

using namespace cclperf;

class SendRecvPerf final : public PerfCollective {
 public:
  SendRecvPerf() : PerfCollective(ccl::coll::Coll::kSend) {}
  // In place, a rank would receive into the buffer it is sending from.
  bool checksInPlace() const override { return false; }
  double algbwBytes(size_t count, size_t typeSize, int) const override { return double(count * typeSize); }
  double busbwFactor(int) const override { return 1.0; }

  void run(RankComm& comm, const CallArgs& a) const override {
    const cclComm_t c = cclCommOf(comm);
    int rank = 0;
    int n = 0;
    cclCheck(cclCommUserRank(c, &rank), "cclCommUserRank", c);
    cclCheck(cclCommCount(c, &n), "cclCommCount", c);
    const cclCompression_t* z = cclRankOf(comm).compression();
    // --feedback: the send carries this rank's handle for the call (its stream of sends is
    // one tensor's; with -m, each send of the group has its own). Taken before the group
    // opens, so nothing can throw inside it.
    const cclFeedback_t feedback = z ? cclRankOf(comm).nextFeedback() : nullptr;
    cclCheck(cclGroupStart(), "cclGroupStart");
    const cclResult_t sent = z ? cclSendEx(a.send, a.count, a.type, (rank + 1) % n, c, a.stream, z, feedback)
                               : cclSend(a.send, a.count, a.type, (rank + 1) % n, c, a.stream);
    const cclResult_t received = z ? cclRecvEx(a.recv, a.count, a.type, (rank - 1 + n) % n, c, a.stream, z)
                                   : cclRecv(a.recv, a.count, a.type, (rank - 1 + n) % n, c, a.stream);
    // The group is closed whatever happened, so the thread is not left inside it.
    const cclResult_t ended = cclGroupEnd();
    cclCheck(sent, z ? "cclSendEx" : "cclSend", c);
    cclCheck(received, z ? "cclRecvEx" : "cclRecv", c);
    cclCheck(ended, "cclGroupEnd", c);
  }
  void fillInput(const DataModel& m, RankInfo me, int, const TypedBuffer& send) const override {
    fillWith(send, [&](size_t i) { return m.input(me.rank, i); });
  }
  bool fillExpected(const DataModel& m, RankInfo me, int, const TypedBuffer& out) const override {
    const int from = (me.rank - 1 + me.nranks) % me.nranks;
    fillWith(out, [&](size_t i) { return m.input(from, i); });
    return true;
  }
};

}  // namespace

int main(int argc, char** argv) { return cclperf::runCclPerf(argc, argv, SendRecvPerf{}); }
