// SPDX-License-Identifier: BSD-3-Clause
// mpi_allreduce_perf: MPI_Allreduce measured by the same harness, flags and table as
// all_reduce_perf, so the two compare side by side. Run it under mpirun, one rank per process.
#include <mpi.h>

#include <stdexcept>
#include <string>

#include "harness/all_reduce_shape.h"
#include "harness/runner.h"

namespace {

using namespace cclperf;

MPI_Datatype mpiType(cclDataType_t type) {
  switch (type) {
    case cclInt8:
      return MPI_INT8_T;
    case cclUint8:
      return MPI_UINT8_T;
    case cclInt32:
      return MPI_INT32_T;
    case cclUint32:
      return MPI_UINT32_T;
    case cclInt64:
      return MPI_INT64_T;
    case cclUint64:
      return MPI_UINT64_T;
    case cclFloat32:
      return MPI_FLOAT;
    case cclFloat64:
      return MPI_DOUBLE;
    default:
      throw std::invalid_argument("MPI has no reduction for " + std::string(dataTypeInfo(type).name));
  }
}

MPI_Op mpiOp(cclRedOp_t op) {
  switch (op) {
    case cclSum:
      return MPI_SUM;
    case cclProd:
      return MPI_PROD;
    case cclMax:
      return MPI_MAX;
    case cclMin:
      return MPI_MIN;
    default:
      throw std::invalid_argument("MPI has no 'avg' reduction");
  }
}

class MpiRankComm final : public RankComm {
 public:
  MpiRankComm() { MPI_Comm_dup(MPI_COMM_WORLD, &comm_); }
  ~MpiRankComm() override { MPI_Comm_free(&comm_); }
  MpiRankComm(const MpiRankComm&) = delete;
  MpiRankComm& operator=(const MpiRankComm&) = delete;
  MPI_Comm get() const { return comm_; }

 private:
  MPI_Comm comm_;
};

class MpiBackend final : public Backend {
 public:
  std::string describe() const override {
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int len = 0;
    MPI_Get_library_version(version, &len);
    const std::string text(version, size_t(len));
    return "MPI_Allreduce baseline: " + text.substr(0, text.find('\n'));
  }
  std::vector<std::unique_ptr<RankComm>> connect(ProcessGroup&, const Options& o) override {
    if (o.nthreads != 1)
      throw std::invalid_argument("the MPI baseline runs one rank per process: use mpirun -np N, not -t");
    std::vector<std::unique_ptr<RankComm>> comms;
    comms.push_back(std::make_unique<MpiRankComm>());
    return comms;
  }
};

class MpiAllReducePerf final : public AllReduceShape {
 public:
  void run(RankComm& comm, const CallArgs& a) const override {
    if (a.count > size_t(INT32_MAX)) throw std::invalid_argument("count exceeds MPI's int range");
    const void* send = a.send == a.recv ? MPI_IN_PLACE : a.send;
    const int rc =
        MPI_Allreduce(send, a.recv, int(a.count), mpiType(a.type), mpiOp(a.op), static_cast<MpiRankComm&>(comm).get());
    if (rc != MPI_SUCCESS) throw std::runtime_error("MPI_Allreduce failed with code " + std::to_string(rc));
  }
};

}  // namespace

int main(int argc, char** argv) {
  MpiBackend backend;
  return perfMain(argc, argv, MpiAllReducePerf{}, backend);
}
