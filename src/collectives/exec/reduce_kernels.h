// SPDX-License-Identifier: BSD-3-Clause
// Element-wise reductions on host memory for every cclDataType_t and cclRedOp_t. 16-bit and
// fp8 types are widened to fp32, combined, and rounded back once per call.
#pragma once

#include <cstddef>

#include "ccl/ccl.h"

namespace ccl::coll {

// dst[i] = a[i] op b[i] for i < count. dst may equal a or b; other overlaps are not allowed.
// op is cclSum, cclProd, cclMax or cclMin (cclAvg reduces as cclSum, see divide).
void reduce(void* dst, const void* a, const void* b, size_t count, cclDataType_t dtype, cclRedOp_t op);

// dst[i] = a[i] op (float)b[i] in fp32 for i < count: a sum of a floating dtype kept in fp32
// (dst and a fp32, b of dtype). dst may equal a.
void reduceWide(float* dst, const float* a, const void* b, size_t count, cclDataType_t dtype, cclRedOp_t op);

// dst[i] = src[i] / divisor (dst may equal src; other overlaps are not allowed): integer
// division for integer types, otherwise a division in the type's compute precision rounded once.
void divide(void* dst, const void* src, size_t count, cclDataType_t dtype, int divisor);

// dst[i] = (float)src[i] for a floating-point dtype.
void widenToFloat(float* dst, const void* src, size_t count, cclDataType_t dtype);

// dst[i] = src[i] / divisor, rounded once to `dtype` (a floating-point dtype).
void narrowFromFloat(void* dst, const float* src, size_t count, cclDataType_t dtype, int divisor);

}  // namespace ccl::coll
