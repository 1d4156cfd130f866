// SPDX-License-Identifier: BSD-3-Clause
#include "reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace ccltest {

namespace {

// An integer in [lo, hi] drawn from h.
int64_t pick(uint64_t h, int64_t lo, int64_t hi) {
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  return lo + static_cast<int64_t>(h % span);
}

// Largest magnitude of float sum inputs: n of them must add up exactly in any order.
int64_t floatSumBound(const DtypeInfo& d, int nranks) {
  const double bound = std::floor(d.exactIntLimit / nranks);
  return static_cast<int64_t>(std::min(bound, 1048576.0));
}

uint64_t floatInput(const DtypeInfo& d, cclRedOp_t op, int nranks, int64_t sumBound, uint64_t h) {
  switch (op) {
    case cclAvg:
      // Multiples of nranks where each input is scaled first: every x / nranks is exact, and
      // so is every partial sum of them, whatever the order (their sum is within the bound).
      if (d.avgScalesInputs) return encodeFloat(d.type, static_cast<double>(nranks * pick(h, -sumBound, sumBound)));
      [[fallthrough]];
    case cclSum:
      return encodeFloat(d.type, static_cast<double>(pick(h, -sumBound, sumBound)));
    case cclProd: {
      static const double kFactors[] = {1.0, 2.0, 0.5, -1.0};
      return encodeFloat(d.type, kFactors[h % 4]);
    }
    default: {  // max, min: any finite value except -0, whose order against +0 is unspecified
      uint64_t bits = h & sizeMask(d.size);
      if (!isFiniteCode(d.type, bits)) bits &= ~(uint64_t{1} << (8 * d.size - 2));  // clear top exponent bit
      if (decodeFloat(d.type, bits) == 0) bits = 0;
      return bits;
    }
  }
}

uint64_t integerInput(const DtypeInfo& d, cclRedOp_t op, uint64_t h) {
  const bool isSigned = d.kind == Kind::kSigned;
  if (op == cclProd) {
    static const int64_t kSigned[] = {1, 2, -1, 1};
    return static_cast<uint64_t>(isSigned ? kSigned[h % 4] : 1 + static_cast<int64_t>(h % 2)) & sizeMask(d.size);
  }
  if (op == cclAvg) {
    // Up to 8 inputs must sum without overflow, since the average of a wrapped sum is not
    // what a user means.
    const uint64_t maxValue = (isSigned ? sizeMask(d.size) >> 1 : sizeMask(d.size)) / 8;
    const int64_t lo = isSigned ? -static_cast<int64_t>(maxValue) : 0;
    if (!isSigned && maxValue > static_cast<uint64_t>(INT64_MAX)) return h % (maxValue + 1);
    return static_cast<uint64_t>(pick(h, lo, static_cast<int64_t>(maxValue))) & sizeMask(d.size);
  }
  return h & sizeMask(d.size);
}

uint64_t reduceIntegers(const DtypeInfo& d, cclRedOp_t op, const uint64_t* in, int n) {
  const bool isSigned = d.kind == Kind::kSigned;
  uint64_t acc = in[0];
  for (int r = 1; r < n; ++r) {
    const uint64_t x = in[r];
    switch (op) {
      case cclSum:
        acc += x;
        break;  // unsigned: wraps as two's complement does
      case cclProd:
        acc *= x;
        break;  // low bits of a product depend only on low bits
      case cclMax:
        if (isSigned ? signExtend(x, d.size) > signExtend(acc, d.size) : x > acc) acc = x;
        break;
      case cclMin:
        if (isSigned ? signExtend(x, d.size) < signExtend(acc, d.size) : x < acc) acc = x;
        break;
      default:
        break;
    }
  }
  if (op == cclAvg) {
    if (isSigned) {
      int64_t sum = 0;
      for (int r = 0; r < n; ++r) sum += signExtend(in[r], d.size);
      acc = static_cast<uint64_t>(sum / n);
    } else {
      uint64_t sum = 0;
      for (int r = 0; r < n; ++r) sum += in[r];
      acc = sum / static_cast<uint64_t>(n);
    }
  }
  return acc & sizeMask(d.size);
}

uint64_t reduceFloats(const DtypeInfo& d, cclRedOp_t op, const uint64_t* in, int n) {
  double acc = decodeFloat(d.type, in[0]);
  for (int r = 1; r < n; ++r) {
    const double x = decodeFloat(d.type, in[r]);
    switch (op) {
      case cclSum:
      case cclAvg:
        acc += x;
        break;
      case cclProd:
        acc *= x;
        break;
      case cclMax:
        acc = std::max(acc, x);
        break;
      case cclMin:
        acc = std::min(acc, x);
        break;
      default:
        break;
    }
  }
  if (op == cclAvg) acc /= n;
  return encodeFloat(d.type, acc);
}

}  // namespace

ReductionInput::ReductionInput(cclDataType_t t, cclRedOp_t op, int nranks, uint64_t seed)
    : info_(dtypeInfo(t)), op_(op), nranks_(nranks), floatSumBound_(0), seed_(seed) {
  if (info_.kind == Kind::kFloat) floatSumBound_ = floatSumBound(info_, nranks);
}

uint64_t ReductionInput::operator()(int rank, size_t index) const {
  const uint64_t h = mixBits(seed_, static_cast<uint64_t>(rank), index);
  return info_.kind == Kind::kFloat ? floatInput(info_, op_, nranks_, floatSumBound_, h) : integerInput(info_, op_, h);
}

uint64_t reduceReference(cclDataType_t t, cclRedOp_t op, const uint64_t* inputs, int n) {
  const DtypeInfo& d = dtypeInfo(t);
  return d.kind == Kind::kFloat ? reduceFloats(d, op, inputs, n) : reduceIntegers(d, op, inputs, n);
}

bool reductionMatches(cclDataType_t t, cclRedOp_t op, uint64_t observed, uint64_t expected) {
  if (observed == expected) return true;
  // A division's rounding; none where the inputs are scaled (exactly, by floatInput).
  if (op != cclAvg || dtypeInfo(t).kind != Kind::kFloat || dtypeInfo(t).avgScalesInputs) return false;
  if (!isFiniteCode(t, observed) || !isFiniteCode(t, expected)) return false;
  const int64_t diff = orderedCode(t, observed) - orderedCode(t, expected);
  return diff >= -1 && diff <= 1;
}

MismatchReport::~MismatchReport() {
  if (count_ == 0) return;
  ADD_FAILURE() << context_ << ": " << count_ << " wrong element(s); first: " << first_;
}

void MismatchReport::add(const char* region, size_t index, uint64_t observed, uint64_t expected) {
  if (count_ < 4) {
    first_ += std::string(count_ ? "; " : "") + region + "[" + std::to_string(index) + "] observed " +
              describeBits(type_, observed) + " expected " + describeBits(type_, expected);
  }
  ++count_;
}

}  // namespace ccltest
