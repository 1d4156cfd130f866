// SPDX-License-Identifier: BSD-3-Clause
// Element types of the perf binaries: names as nccl-tests spells them, sizes, and typed
// fill/compare loops that convert small exact integers to and from every cclDataType_t.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ccl/ccl.h"
#include "harness/parallel.h"

namespace cclperf {

struct DataTypeInfo {
  cclDataType_t type;
  const char* name;  // as printed in the table
  size_t size;
  // Largest integer N such that every integer in [0, N] is exact in the type and no
  // partial result of a checked reduction can collide with the fill used for "unwritten".
  int64_t exactLimit;
};

// The types nccl-tests iterates over for "-d all", in its order.
const std::vector<DataTypeInfo>& allDataTypes();
const DataTypeInfo& dataTypeInfo(cclDataType_t type);

// Parses a -d argument: a type name or alias; "all" returns every type.
std::vector<cclDataType_t> parseDataTypes(const std::string& text);

// A typed view of a host buffer.
struct TypedBuffer {
  void* data;
  size_t count;
  cclDataType_t type;
};

// Minifloat encoding of a value that is exactly representable (small non-negative
// integers here); throws if it is not, because the check would then be inexact.
uint32_t encodeMinifloat(double value, int exponentBits, int mantissaBits);

// Element i of `buf` as a double (NaN for NaN encodings).
double loadElement(const TypedBuffer& buf, size_t i);

// Writes `value` (an exact small integer) to element i of `buf`.
void storeElement(const TypedBuffer& buf, size_t i, double value);

// Stores valueOf(i) into every element i of `buf`, over the host's cores (valueOf is called
// from several threads at once).
template <typename ValueOf>
void fillWith(const TypedBuffer& buf, ValueOf valueOf) {
  parallelParts(buf.count, partsFor(buf.count), [&](size_t, size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) storeElement(buf, i, valueOf(i));
  });
}

// Sets every byte to 0xff: NaN for the float types and -1 / max for the integer types,
// values no checked result ever takes, so an element the library did not write is wrong.
void poison(const TypedBuffer& buf);

}  // namespace cclperf
