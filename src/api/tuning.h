// SPDX-License-Identifier: BSD-3-Clause
// The cost model of a communicator (tuning.cc): agreed at init, watched while calls run.
#pragma once

#include <memory>

#include "api/comm.h"
#include "collectives/plan/cost.h"

namespace ccl::api {

// The cost model: this rank's (CCL_LINK_MODEL's links, this CPU's kernels timed), and every
// rank's exchanged, so that all price calls on the same one: the slowest of each input.
// Without CCL_LINK_MODEL on every rank the links are probed. Collective over `comm`'s ranks.
std::shared_ptr<const coll::CostModel> agreeCostModel(cclComm& comm);

// A call the cost model chose took `observed` seconds where it predicted `predicted`. After
// kDriftCalls such calls in a row off by more than kDriftRatio either way, the links this
// communicator was priced on leave the process's cache, so that the next communicator
// measures them again (an INFO line says so, once per communicator). The communicator itself
// keeps its model: re-measuring it would need every rank to stop at the same call, which a
// rank's own timings cannot decide.
inline constexpr double kDriftRatio = 3.0;
inline constexpr int kDriftCalls = 16;
void noteCallTime(cclComm& comm, double observed, double predicted);

}  // namespace ccl::api
