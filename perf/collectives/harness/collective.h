// SPDX-License-Identifier: BSD-3-Clause
// What a perf binary describes about its collective: buffer layout, bandwidth formulas
// (as nccl-tests defines them), how to call it, and the inputs/outputs of a check.
#pragma once

#include <cstddef>

#include "ccl/ccl.h"
#include "collectives/plan/collective_info.h"
#include "harness/codec_bound.h"
#include "harness/data_model.h"
#include "harness/datatypes.h"

namespace cclperf {

// Element counts for one size, as nccl-tests lays out buffers. In place, the send buffer
// starts at recv + sendInPlaceOffset * rank and the result at recv + recvInPlaceOffset * rank.
struct BufferLayout {
  size_t sendCount;
  size_t recvCount;
  size_t paramCount;  // the count argument of the call
  size_t sendInPlaceOffset;
  size_t recvInPlaceOffset;
};

// A rank's handle to whatever runs the collective (a ccl communicator, MPI, ...).
class RankComm {
 public:
  virtual ~RankComm() = default;
  // Brackets the calls aggregated by -m into one group.
  virtual void groupStart() {}
  virtual void groupEnd() {}
  // Cumulative bytes this rank sent (raw: counted uncompressed; wire: as sent); false when
  // the backend keeps no such counters.
  virtual bool wireCounters(double* raw, double* wire) {
    (void)raw;
    (void)wire;
    return false;
  }
  // Cumulative commands this rank's calls on device buffers enqueued on CUDA streams, and of
  // those host functions; false when the backend keeps no such counters.
  virtual bool commandCounters(double* commands, double* hostFunctions) {
    (void)commands;
    (void)hostFunctions;
    return false;
  }
};

struct CallArgs {
  const void* send;
  void* recv;
  size_t count;
  cclDataType_t type;
  cclRedOp_t op;
  int root;
  cclStream_t stream;  // the rank's CUDA stream with -M device; NULL on host memory
};

struct RankInfo {
  int rank;
  int nranks;
};

// The facts that ccl's table of collectives holds (collectives/plan/collective_info.h: rooted,
// reduction, buffer extents, in-place form, compressible) come from it; a binary adds how
// to call, fill and check its collective, and nccl-tests' bandwidth formulas.
class PerfCollective {
 public:
  explicit PerfCollective(ccl::coll::Coll kind) : info_(ccl::coll::collInfo(kind)) {}
  virtual ~PerfCollective() = default;

  bool usesOp() const { return info_.reduction; }
  bool usesRoot() const { return info_.rooted; }
  // nccl-tests does not validate in-place runs of alltoall-like calls it cannot express.
  virtual bool checksInPlace() const { return true; }
  // How -Z applies: the collective's round trips through the codec (cclCodecErrorBound's
  // `quantizations`, worst algorithm) and feedback stages; unsupported without an *Ex call.
  CompressionShape compression(int nranks) const {
    if (!info_.compressible) return {};
    const int stages = info_.feedback ? (info_.op == cclOpAllReduce ? 2 : 1) : 0;
    return {true, ccl::coll::codecRoundTrips(static_cast<ccl::coll::Coll>(info_.op), nranks), stages};
  }

  // nccl-tests' layout for `count` elements in all: collectives with a per-rank block pass
  // count / nranks; in place, the smaller buffer sits at the rank's block of the larger.
  BufferLayout layout(size_t count, int nranks) const;
  // algbw = algbwBytes / time; busbw = algbw * busbwFactor.
  virtual double algbwBytes(size_t paramCount, size_t typeSize, int nranks) const = 0;
  virtual double busbwFactor(int nranks) const = 0;

  // Throws on failure.
  virtual void run(RankComm& comm, const CallArgs& args) const = 0;

  // Writes this rank's input into `send` (layout().sendCount elements).
  virtual void fillInput(const DataModel& model, RankInfo me, int root, const TypedBuffer& send) const = 0;
  // Writes the expected result (layout().recvCount elements at the result position);
  // returns false when this rank receives nothing to check.
  virtual bool fillExpected(const DataModel& model, RankInfo me, int root, const TypedBuffer& expected) const = 0;

 private:
  ccl::coll::CollInfo info_;
};

inline BufferLayout PerfCollective::layout(size_t count, int nranks) const {
  using ccl::coll::Extent;
  using ccl::coll::InPlace;
  const auto n = size_t(nranks);
  const bool perRank = info_.send == Extent::kPerRank || info_.recv == Extent::kPerRank;
  const size_t c = perRank ? count / n : count;
  // Point to point: the binary sends and receives one block, both buffers in use.
  const auto elems = [&](Extent e) { return e == Extent::kPerRank ? c * n : c; };
  return {elems(info_.send), elems(info_.recv), c, info_.inPlace == InPlace::kSendInRecv ? c : 0,
          info_.inPlace == InPlace::kRecvInSend ? c : 0};
}

}  // namespace cclperf
