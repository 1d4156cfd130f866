// SPDX-License-Identifier: BSD-3-Clause
// The launcher of a build without MPI: ranks are threads.
#include <stdexcept>

#include "launch.h"

namespace gpt {

void runRanks(int*, char***, int threads, const std::function<void(cclComm_t, int)>& fn) {
  if (launchedByMpi()) throw std::runtime_error("started by an MPI launcher, but built without MPI: use --ranks N");
  runThreadRanks(threads, fn);
}

}  // namespace gpt
