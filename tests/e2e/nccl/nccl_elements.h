// SPDX-License-Identifier: BSD-3-Clause
// Element types of the NCCL-ABI tests: sizes, names and typed access through doubles. Like
// the tests, this includes only NVIDIA's headers (nccl.h, and CUDA's host-side float
// conversions), never ccl's.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace nccl_test {

// Every data type NCCL 2.28 defines.
const std::vector<ncclDataType_t>& allTypes();
const char* typeName(ncclDataType_t t);
size_t typeSize(ncclDataType_t t);
bool isFloat(ncclDataType_t t);

// Element i of a buffer of type t, as a double / set from a double (rounded as CUDA's
// host conversions round; integers wrap as C++ conversions do).
double get(ncclDataType_t t, const void* buf, size_t i);
void set(ncclDataType_t t, void* buf, size_t i, double v);

// A buffer of `count` elements of `t` holding f(i).
std::vector<unsigned char> filled(ncclDataType_t t, size_t count, const std::function<double(size_t)>& f);

}  // namespace nccl_test
