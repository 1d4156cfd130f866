// SPDX-License-Identifier: BSD-3-Clause
// One thread rank's part of the sweep.
#pragma once

#include "harness/collective.h"
#include "harness/options.h"
#include "harness/team.h"

namespace cclperf {

struct SweepTotals {
  long long wrong = 0;
  double busbwSum = 0;
  int rows = 0;  // placements measured
};

// Runs every type/op/root/size of `options` on this rank and returns what rank 0 prints.
SweepTotals runRankSweep(const PerfCollective& collective, const Options& options, RankComm& comm, Team& team,
                         int thread, RankInfo me, bool prints);

}  // namespace cclperf
