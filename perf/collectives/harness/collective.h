// What a perf binary describes about its collective: buffer layout, bandwidth formulas
// (as nccl-tests defines them), how to call it, and the inputs/outputs of a check.
#pragma once

#include <cstddef>

#include "ccl/ccl.h"
#include "harness/codec_bound.h"
#include "harness/data_model.h"
#include "harness/datatypes.h"

namespace cclperf {

// Element counts for one size, as nccl-tests lays out buffers. In place, the send buffer
// starts at recv + send_inplace_offset * rank and the result at recv + recv_inplace_offset * rank.
struct BufferLayout {
  size_t send_count;
  size_t recv_count;
  size_t param_count;  // the count argument of the call
  size_t send_inplace_offset;
  size_t recv_inplace_offset;
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
};

struct CallArgs {
  const void* send;
  void* recv;
  size_t count;
  cclDataType_t type;
  cclRedOp_t op;
  int root;
};

struct RankInfo {
  int rank;
  int nranks;
};

class PerfCollective {
 public:
  virtual ~PerfCollective() = default;

  virtual bool usesOp() const { return false; }
  virtual bool usesRoot() const { return false; }
  // nccl-tests does not validate in-place runs of alltoall-like calls it cannot express.
  virtual bool checksInPlace() const { return true; }
  // How -Z applies; the default: this collective has no compressed (*Ex) call.
  virtual CompressionShape compression(int nranks) const {
    (void)nranks;
    return {};
  }

  virtual BufferLayout layout(size_t count, int nranks) const = 0;
  // algbw = algbwBytes / time; busbw = algbw * busbwFactor.
  virtual double algbwBytes(size_t param_count, size_t type_size, int nranks) const = 0;
  virtual double busbwFactor(int nranks) const = 0;

  // Throws on failure.
  virtual void run(RankComm& comm, const CallArgs& args) const = 0;

  // Writes this rank's input into `send` (layout().send_count elements).
  virtual void fillInput(const DataModel& model, RankInfo me, int root, const TypedBuffer& send) const = 0;
  // Writes the expected result (layout().recv_count elements at the result position);
  // returns false when this rank receives nothing to check.
  virtual bool fillExpected(const DataModel& model, RankInfo me, int root, const TypedBuffer& expected) const = 0;
};

}  // namespace cclperf
