// SPDX-License-Identifier: BSD-3-Clause
// What -c 1 accepts for a compressed call: the codec's documented per-element bound (see
// src/codecs/codec.h) composed over the algorithm the library may pick, and the error
// statistics (maxrel, rmsrel) of a received result against the exact one.
#pragma once

#include <cstddef>

#include "ccl/ccl.h"
#include "harness/datatypes.h"
#include "harness/options.h"

namespace cclperf {

// How a collective passes values through the codec on their way to the result.
struct CompressionShape {
  bool supported = false;  // the collective has an *Ex call
  int quantizations = 0;   // codec round trips of a value, worst algorithm (ring allreduce: n)
  int feedbackStages = 0;  // of which feed their error into the next call's input
};

// Largest |got - exact| accepted for one element: the library's cclCodecErrorBound over
// the round trips of the worst algorithm the library may pick (error feedback carries last
// call's error in: two more round trips per feedback stage bound it, at most q/(1-q) of the
// value, q <= 1/2 for every codec), plus the fp32 sums of the algorithm and the last
// rounding of a bf16/fp16 result. Sparsifiers get p: every contribution arrives exactly or
// is dropped. Uncompressible calls (a type other than fp32/bf16/fp16, an op other than
// sum/avg) and codec none are exact: bound 0. A codec without an element-wise bound
// (powersgd: the library's is +inf) gets +inf: only finiteness is checked.
class ElementBound {
 public:
  ElementBound(const CodecOptions& codec, cclDataType_t type, bool compressible, const CompressionShape& shape);

  // p: sum over contributors of |input| for this element; s: the largest p in the buffer.
  // Not thread-safe: one bound per checking thread.
  double operator()(double p, double s) const;
  bool exact() const { return exact_; }

 private:
  double codecBound(double p, double s) const;

  bool exact_ = true;
  cclCompression_t compression_{};
  int roundTrips_ = 0;
  double loco_ = 1;
  double outRounding_ = 0;
  double sumSlack_ = 0;
  mutable double cachedS_ = -1, atZero_ = 0, atS_ = 0;  // the codec's bound at p = 0 and p = s
};

// Whether the library bounds the codec's error element by element (false for powersgd,
// whose loss depends on the matrix's spectrum): -c 1 then checks only that results are
// finite. True for codec none and when the library refuses the parameters (the call reports
// that).
bool hasElementBound(const CodecOptions& codec);

// Error of a result against the exact values, on one rank.
struct AccuracyTally {
  long long wrong = 0;  // elements outside the bound (NaN included)
  double maxErr = 0;    // max |got - exact|
  double sumSq = 0;     // sum of (got - exact)^2
  double maxExact = 0;  // max |exact|
  double count = 0;     // elements compared
  void add(const AccuracyTally& other);
};

// Compares every element of `got` with `exact`. p of an element is |exact|: the data
// model's inputs of sums and averages are non-negative, so |sum x| = sum |x|. A non-finite
// error is always wrong.
AccuracyTally tallyAgainstBound(const TypedBuffer& got, const TypedBuffer& exact, const ElementBound& bound);

}  // namespace cclperf
