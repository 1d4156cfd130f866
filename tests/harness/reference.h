// Serial reference of the collectives: deterministic inputs per (rank, element) and the
// result the library must produce, plus a compact report of mismatching elements.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ccl/ccl.h"
#include "dtype_ref.h"

namespace ccltest {

// A well-mixed 64-bit hash of (seed, a, b).
uint64_t mixBits(uint64_t seed, uint64_t a, uint64_t b);

// Element `index` of `rank`'s input to reduction `op` over `nranks` ranks. Values are chosen
// so that the exact result, and every partial result in any order, is representable:
// small integers for float sums, powers of two for float products, any finite value for
// max/min, full-width bits for integer sums and products (they wrap modulo 2^bits).
uint64_t reductionInput(cclDataType_t t, cclRedOp_t op, int nranks, int rank, size_t index, uint64_t seed);

// Arbitrary bits (NaN payloads included) for collectives that only move data.
uint64_t movementInput(cclDataType_t t, int rank, size_t index, uint64_t seed);

// op over the n inputs, computed serially in exact arithmetic and rounded once.
uint64_t reduceReference(cclDataType_t t, cclRedOp_t op, const uint64_t* inputs, int n);

// Exact match, except float averages which may be one unit in the last place off (the
// library divides a rounded sum, the reference rounds the exact quotient).
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
