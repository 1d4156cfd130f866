// SPDX-License-Identifier: BSD-3-Clause
// MPI process group, for runs an MPI launcher started (its environment says so); a run
// started alone gets the local group of one process, what an MPI singleton would be.
#include <mpi.h>

#include <cstdlib>
#include <stdexcept>

#include "harness/process_group.h"

namespace cclperf {
namespace {

MPI_Op toMpi(Reduction op) {
  switch (op) {
    case Reduction::kMin:
      return MPI_MIN;
    case Reduction::kMax:
      return MPI_MAX;
    default:
      return MPI_SUM;
  }
}

class MpiProcessGroup final : public ProcessGroup {
 public:
  MpiProcessGroup(int* argc, char*** argv) {
    int provided = 0;
    // Thread ranks take turns calling MPI from whichever thread arrives last.
    if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
      throw std::runtime_error("MPI_Init_thread failed");
    }
    if (provided < MPI_THREAD_SERIALIZED) {
      MPI_Finalize();
      throw std::runtime_error("the MPI library does not provide MPI_THREAD_SERIALIZED");
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiProcessGroup() override { MPI_Finalize(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool isMpi() const override { return true; }
  void barrier() override { MPI_Barrier(MPI_COMM_WORLD); }
  void broadcast(void* data, size_t bytes, int root) override {
    MPI_Bcast(data, int(bytes), MPI_BYTE, root, MPI_COMM_WORLD);
  }
  double allreduce(double value, Reduction op) override {
    double out = 0;
    MPI_Allreduce(&value, &out, 1, MPI_DOUBLE, toMpi(op), MPI_COMM_WORLD);
    return out;
  }
  long long allreduce(long long value, Reduction op) override {
    long long out = 0;
    MPI_Allreduce(&value, &out, 1, MPI_LONG_LONG, toMpi(op), MPI_COMM_WORLD);
    return out;
  }
  std::vector<std::string> gatherText(const std::string& text) override {
    int len = int(text.size());
    std::vector<int> lens(size_t(size_), 0);
    MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
    std::vector<int> displs(size_t(size_), 0);
    int total = 0;
    for (int p = 0; p < size_; ++p) {
      displs[size_t(p)] = total;
      total += lens[size_t(p)];
    }
    std::string all(size_t(rank_ == 0 ? total : 0), '\0');
    MPI_Gatherv(text.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
    std::vector<std::string> out;
    if (rank_ == 0) {
      for (int p = 0; p < size_; ++p) out.push_back(all.substr(size_t(displs[size_t(p)]), size_t(lens[size_t(p)])));
    }
    return out;
  }
  void abortAll() override {
    if (size_ > 1) MPI_Abort(MPI_COMM_WORLD, 1);
  }

 private:
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace

// Whether a launcher (mpirun, srun, hydra) started this process: each sets one of these.
bool launchedByMpi() {
  for (const char* name :
       {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS", "SLURM_PROCID"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

std::unique_ptr<ProcessGroup> makeProcessGroup(int* argc, char*** argv) {
  if (auto forked = forkedProcessGroupIfAsked(argc, argv)) return forked;  // -np: no MPI at all
  // Started alone, MPI would be a singleton of one process: the local group is the same
  // without it. (Open MPI's singletons started together race to create their session folder
  // in /tmp, and one fails with "File exists".)
  if (!launchedByMpi()) return makeLocalProcessGroup();
  return std::make_unique<MpiProcessGroup>(argc, argv);
}

}  // namespace cclperf
