// SPDX-License-Identifier: BSD-3-Clause
// The sweep of a perf binary: parse flags, connect the ranks, run every size as
// nccl-tests does (warm-up, timed iterations, then one checked call), print the table.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "harness/collective.h"
#include "harness/options.h"
#include "harness/process_group.h"

namespace cclperf {

// Creates the per-rank handles the collective runs on.
class Backend {
 public:
  virtual ~Backend() = default;
  // First header line, e.g. the library version.
  virtual std::string describe() const = 0;
  // One handle per thread rank of this process; global rank = process * nthreads + thread.
  virtual std::vector<std::unique_ptr<RankComm>> connect(ProcessGroup& processes, const Options& options) = 0;
  // Resolves backend-specific options (the -Z codec name); throws UsageError. By default a
  // backend has no compression and refuses -Z.
  virtual void prepare(Options& options) const;
  // Whether its calls take device buffers (-M device); by default they do not.
  virtual bool takesDeviceMemory() const { return false; }
};

// The whole program; returns the exit status (non-zero on a wrong value or an error).
int perfMain(int argc, char** argv, const PerfCollective& collective, Backend& backend);

}  // namespace cclperf
