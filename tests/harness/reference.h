// SPDX-License-Identifier: BSD-3-Clause
// Serial reference of the collectives: deterministic inputs per (rank, element) and the
// result the library must produce, plus a compact report of mismatching elements.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ccl/ccl.h"
#include "dtype_ref.h"

namespace ccltest {

inline uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A well-mixed 64-bit hash of (seed, a, b). The odd multiplier keeps (a, b) -> word
// injective for the small a of ranks; splitmix mixes.
inline uint64_t mixBits(uint64_t seed, uint64_t a, uint64_t b) {
  return splitmix(seed ^ (a * 0xd1b54a32d192ed03ull) ^ splitmix(b));
}

// Element `index` of `rank`'s input to reduction `op` over `nranks` ranks. Values are chosen
// so that the exact result, and every partial result in any order, is representable:
// small integers for float sums, powers of two for float products, any finite value for
// max/min, full-width bits for integer sums and products (they wrap modulo 2^bits).
class ReductionInput {
 public:
  ReductionInput(cclDataType_t t, cclRedOp_t op, int nranks, uint64_t seed);
  uint64_t operator()(int rank, size_t index) const;

 private:
  const DtypeInfo& info_;
  cclRedOp_t op_;
  int nranks_;
  int64_t floatSumBound_;
  uint64_t seed_;
};

// Arbitrary bits (NaN payloads included) for collectives that only move data.
class MovementInput {
 public:
  MovementInput(cclDataType_t t, uint64_t seed) : mask_(sizeMask(dtypeInfo(t).size)), seed_(seed) {}
  uint64_t operator()(int rank, size_t index) const {
    return mixBits(seed_, static_cast<uint64_t>(rank), index) & mask_;
  }

 private:
  uint64_t mask_;
  uint64_t seed_;
};

// op over the n inputs, computed serially in exact arithmetic and rounded once.
uint64_t reduceReference(cclDataType_t t, cclRedOp_t op, const uint64_t* inputs, int n);

// Exact match, except float averages which may be one unit in the last place off (the
// library divides a rounded sum, the reference rounds the exact quotient); averages of the
// types that scale their inputs first (avgScalesInputs) match exactly, their inputs exact
// multiples of the rank count (ReductionInput).
bool reductionMatches(cclDataType_t t, cclRedOp_t op, uint64_t observed, uint64_t expected);

// Counts mismatching elements of one check and reports the first few as a single failure.
class MismatchReport {
 public:
  MismatchReport(std::string context, cclDataType_t t) : context_(std::move(context)), type_(t) {}
  MismatchReport(const MismatchReport&) = delete;
  MismatchReport& operator=(const MismatchReport&) = delete;
  ~MismatchReport();

  void add(const char* region, size_t index, uint64_t observed, uint64_t expected);
  size_t count() const { return count_; }

 private:
  std::string context_;
  cclDataType_t type_;
  size_t count_ = 0;
  std::string first_;
};

}  // namespace ccltest
