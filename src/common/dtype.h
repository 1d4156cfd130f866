// SPDX-License-Identifier: BSD-3-Clause
// The data-type table: element sizes, names and classes of cclDataType_t.
#pragma once

#include <cstddef>

#include "ccl/ccl.h"

namespace ccl {

inline bool validDataType(int t) { return t >= 0 && t < cclNumTypes; }

// Bytes per element; 0 for an invalid type.
size_t dataTypeSize(cclDataType_t t);

// "float32", "bfloat16", ...; "invalid" for an invalid type.
const char* dataTypeName(cclDataType_t t);

// fp16, bf16, fp32, fp64, fp8: the types a codec may compress.
bool isFloatType(cclDataType_t t);

// fp16 and the fp8 types: floats whose range a sum of a few ranks' values can leave (fp16's
// largest is 65504, e4m3's 448). An uncompressed cclAvg of them scales each rank's input by
// 1/nranks before summing, as NCCL does, where other types divide the sum (scaled_average.h).
bool averageScalesInputs(cclDataType_t t);

inline bool validRedOp(int op) { return op >= 0 && op < cclNumOps; }
const char* redOpName(cclRedOp_t op);

}  // namespace ccl
