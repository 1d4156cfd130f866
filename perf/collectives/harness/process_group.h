// SPDX-License-Identifier: BSD-3-Clause
// The processes of a perf run and the few host-side operations the harness needs across
// them (not the measured data path): MPI when launched by mpirun, else one process.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace cclperf {

enum class Reduction { kSum, kMin, kMax };

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual bool isMpi() const = 0;
  virtual void barrier() = 0;
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  virtual double allreduce(double value, Reduction op) = 0;
  virtual long long allreduce(long long value, Reduction op) = 0;
  // Every process's text, in process order, on process 0 (empty elsewhere).
  virtual std::vector<std::string> gatherText(const std::string& text) = 0;
  // Stops every process after a fatal error of this one, so none waits forever.
  virtual void abortAll() = 0;
};

// Defined by exactly one of process_group_mpi.cc / process_group_local.cc, chosen at build
// time by whether MPI was found.
std::unique_ptr<ProcessGroup> makeProcessGroup(int* argc, char*** argv);

// A group of one process, for builds without MPI.
std::unique_ptr<ProcessGroup> makeLocalProcessGroup();

// With `-np N` (or --nprocs N) on the command line, removed from it: forks N ranks as
// processes, each returning its group; the calling process serves them and exits with their
// status (process_group_fork.cc). Without the flag: nullptr. Called before anything else.
std::unique_ptr<ProcessGroup> forkedProcessGroupIfAsked(int* argc, char*** argv);

}  // namespace cclperf
