// SPDX-License-Identifier: BSD-3-Clause
// The value an encoder compresses, on the CPU and the GPU alike: the element plus its
// error-feedback residual, or without a residual the element itself (adding 0.0f would turn
// -0 into +0: the GPU's codec none once did, and its stream differed from the CPU's).
#pragma once

#include <cstdint>

#include "common/floatconv.h"

namespace ccl::codec::math {

CCL_HD float withResidual(float x, const float* residual, uint64_t i) { return residual ? x + residual[i] : x; }

}  // namespace ccl::codec::math
