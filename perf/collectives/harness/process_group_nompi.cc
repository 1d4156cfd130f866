// SPDX-License-Identifier: BSD-3-Clause
// Chosen when the build found no MPI: a single process, or ranks as processes with -np.
#include "harness/process_group.h"

namespace cclperf {

std::unique_ptr<ProcessGroup> makeProcessGroup(int* argc, char*** argv) {
  if (auto forked = forkedProcessGroupIfAsked(argc, argv)) return forked;
  return makeLocalProcessGroup();
}

}  // namespace cclperf
