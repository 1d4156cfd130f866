// SPDX-License-Identifier: BSD-3-Clause
// The tests' own model of every cclDataType_t: sizes, classes and an independent encoder /
// decoder of the narrow float formats, so expected results never come from library code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ccl/ccl.h"

namespace ccltest {

enum class Kind { kSigned, kUnsigned, kFloat };

struct DtypeInfo {
  cclDataType_t type;
  const char* name;
  size_t size;
  Kind kind;
  // Binary layout of float formats; ieee formats reserve the top exponent for inf/NaN,
  // the others (e4m3) use only the all-ones code as NaN.
  int expBits;
  int manBits;
  bool ieee;
  // Every integer in [-exactIntLimit, exactIntLimit] is representable (floats only).
  double exactIntLimit;
  // cclAvg scales each rank's input by 1/nranks before summing (ccl.h), not the sum after.
  bool avgScalesInputs = false;
};

const DtypeInfo& dtypeInfo(cclDataType_t t);
const std::vector<cclDataType_t>& allDtypes();
const char* opName(cclRedOp_t op);
const std::vector<cclRedOp_t>& allOps();

inline uint64_t sizeMask(size_t size) { return size >= 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * size)) - 1; }
inline int64_t signExtend(uint64_t bits, size_t size) {
  if (size >= 8) return static_cast<int64_t>(bits);
  const unsigned shift = static_cast<unsigned>(64 - 8 * size);
  return static_cast<int64_t>(bits << shift) >> shift;
}

uint64_t loadBits(const void* buf, size_t index, size_t size);
void storeBits(void* buf, size_t index, size_t size, uint64_t bits);

// Float types only. decode is exact; encode rounds to nearest, ties to even, and turns
// values beyond the finite range into inf (NaN for e4m3).
double decodeFloat(cclDataType_t t, uint64_t bits);
uint64_t encodeFloat(cclDataType_t t, double value);
bool isFiniteCode(cclDataType_t t, uint64_t bits);
// A signed integer that is monotonic in the value of finite codes (+0 and -0 both map to 0),
// so two codes are neighbours when their ordered values differ by one.
int64_t orderedCode(cclDataType_t t, uint64_t bits);

// "0x1234 (=3.5)" for messages.
std::string describeBits(cclDataType_t t, uint64_t bits);

}  // namespace ccltest
