// SPDX-License-Identifier: BSD-3-Clause
// One rank of MPI_Allreduce (fp32 sum, out of place) under mpirun; rank and size come from
// MPI. The transport is whatever mpirun's MCA flags select (run.sh: ob1 + tcp over the veth).
#include <mpi.h>

#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_common.h"

namespace {

class MpiSession {
 public:
  MpiSession(int* argc, char*** argv) { MPI_Init(argc, argv); }
  ~MpiSession() { MPI_Finalize(); }
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
};

void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw std::runtime_error(std::string(what) + " failed with code " + std::to_string(rc));
}

void run(slowlink::Options o) {
  check(MPI_Comm_rank(MPI_COMM_WORLD, &o.rank), "MPI_Comm_rank");
  check(MPI_Comm_size(MPI_COMM_WORLD, &o.nranks), "MPI_Comm_size");
  const std::size_t count = slowlink::elementCount(o);
  if (count > std::size_t(1) << 30) throw std::runtime_error("-b: MPI takes an int count; at most 1G elements");
  std::vector<float> send(count), recv(count);
  slowlink::fillInput(o.rank, send.data(), count);

  auto barrier = [] { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); };
  auto call = [&] {
    check(MPI_Allreduce(send.data(), recv.data(), int(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
  };
  for (int i = 0; i < o.warmup; ++i) call();
  double seconds = 0;
  for (int i = 0; i < o.iters; ++i) seconds += slowlink::timeCall(barrier, call);
  // Open MPI does not report its wire bytes; -1 marks "unknown" (tc counters in run.sh show them).
  slowlink::reportResult(o, "mpi", seconds / o.iters, -1, -1, recv.data());
}

}  // namespace

int main(int argc, char** argv) {
  MpiSession session(&argc, &argv);
  try {
    run(slowlink::parseOptions(argc, argv));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpi_allreduce_bench: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
}
