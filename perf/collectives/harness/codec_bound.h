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
  bool supported = false;   // the collective has an *Ex call
  int quantisations = 0;    // codec round trips of a value, worst algorithm (ring allreduce: n)
  int feedback_stages = 0;  // of which feed their error into the next call's input
};

// Largest |got - exact| accepted for one element.
//
// Quantisers: a round trip of values of magnitude at most m errs by at most rel*|v| + abs*m
// (per codec.h; m bounds the block's absmax). Composed over k round trips of partial sums
// that each hold at most the element's sum of |inputs| p (S: the largest p in the buffer)
// plus the error so far: e += rel*(p + e) + abs*(S + E), with E the same for p = S. Two-shot
// (n-1 shards + the sum) and the ring (n-1 partial sums + the sum) both fit k = n.
// Error feedback carries last call's error in: two more round trips per feedback stage
// bound it (it is at most q/(1-q) of the value, q <= 1/2 for every codec).
// Sparsifiers: every element is exact or dropped, so the bound is p: it only proves that
// nothing beyond dropping happened.
// Uncompressible calls (a type other than fp32/bf16/fp16, an op other than sum/avg) and
// codec none are exact: bound 0.
class ElementBound {
 public:
  ElementBound(const CodecOptions& codec, cclDataType_t type, bool compressible, const CompressionShape& shape);

  // p: sum over contributors of |input| for this element; s: the largest p in the buffer.
  double operator()(double p, double s) const;
  bool exact() const { return exact_; }

 private:
  bool exact_ = true;
  double per_p_ = 0;  // bound = per_p_ * p + per_s_ * s
  double per_s_ = 0;
};

// Error of a result against the exact values, on one rank.
struct AccuracyTally {
  long long wrong = 0;   // elements outside the bound (NaN included)
  double max_err = 0;    // max |got - exact|
  double sum_sq = 0;     // sum of (got - exact)^2
  double max_exact = 0;  // max |exact|
  double count = 0;      // elements compared
  void add(const AccuracyTally& other);
};

// Compares every element of `got` with `exact`. p of an element is |exact|: the data
// model's inputs of sums and averages are non-negative, so |sum x| = sum |x|.
AccuracyTally tallyAgainstBound(const TypedBuffer& got, const TypedBuffer& exact, const ElementBound& bound);

}  // namespace cclperf
