// SPDX-License-Identifier: BSD-3-Clause
// This CPU's kernels timed for the cost model (plan/cost.h's ComputeCost), by the kernels
// exec/ runs them with.
#pragma once

#include <span>

#include "codecs/codec.h"
#include "collectives/plan/cost.h"

namespace ccl::coll {

// This process's kernel throughputs, timed on its CPU over 4 MiB of fp32 (copy, reduce, a
// reduce from a 256 KiB ring in 64 KiB pieces as a receive in place runs it, and
// encode, decode and decode-accumulate of each codec in `codecs`), best of three runs. Takes
// a few milliseconds per codec.
ComputeCost measureComputeCost(std::span<const codec::Params> codecs);

}  // namespace ccl::coll
