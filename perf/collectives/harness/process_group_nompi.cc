// SPDX-License-Identifier: BSD-3-Clause
// Chosen when the build found no MPI: every run is a single process.
#include "harness/process_group.h"

namespace cclperf {

std::unique_ptr<ProcessGroup> makeProcessGroup(int*, char***) { return makeLocalProcessGroup(); }

}  // namespace cclperf
