// SPDX-License-Identifier: BSD-3-Clause
// cclAvg of fp16 and fp8 (averageScalesInputs, common/dtype.h). A sum divided at the end
// leaves the type's range whenever a partial sum does: two fp16 ranks averaging 40000 gave
// inf, two e4m3 ranks averaging 300 gave NaN. NCCL scales each input by 1/nranks first, and
// so does ccl here: every rank's input is divided by nranks on its way into the plan, the
// plan sums, and no division follows. Partial sums then stay within the inputs' range.
// Uncompressed calls only: a compressed average sums in fp32 and divides once, and its
// error-feedback residuals stay in the input's units.
#pragma once

#include "collectives/algorithms/algorithms.h"
#include "collectives/plan/call_args.h"
#include "collectives/plan/collective_info.h"
#include "collectives/plan/plan.h"

namespace ccl::coll {

// Whether collective c's call with `a`, planned by row e, scales its inputs first.
bool scalesInputs(const AlgoEntry& e, Coll c, const CollArgs& a);

// The plan of row e for such a call. An allreduce runs in place over its receive buffer,
// which receives the scaled input first (no scratch); a reduce or reduce-scatter scales the
// input into scratch (as many bytes as its send buffer), its caller's buffer left unwritten.
Plan planScaledAverage(const AlgoEntry& e, Coll c, const CollArgs& a);

// `p` without its divisions by nranks: kDivide and kDivideFloat steps dropped (a step that
// waited for one waits for what it waited for) and every `divide` flag cleared.
Plan withoutDivisions(const Plan& p);

}  // namespace ccl::coll
