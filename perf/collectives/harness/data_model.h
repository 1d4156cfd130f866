// SPDX-License-Identifier: BSD-3-Clause
// Deterministic inputs whose exact results are representable, so checks compare exactly.
//
// Every rank's input is a function of (rank, element index, seed). For reductions the
// values are bounded so that every partial result of any algorithm (ring, tree, in fp32
// rounded per step) stays an exactly representable integer of the element type.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ccl/ccl.h"

namespace cclperf {

class DataModel {
 public:
  // `reducing` false: plain data movement, `op` is ignored.
  DataModel(cclDataType_t type, bool reducing, cclRedOp_t op, int nranks, uint64_t seed);

  // Input of `rank` at element `index` (index into the rank's send buffer, or a global
  // index where a collective gives one).
  double input(int rank, size_t index) const;

  // The reduction over all ranks of input(r, index), as the library must compute it.
  double reduced(size_t index) const;

 private:
  uint64_t hash(int rank, size_t index) const;
  double sumInput(int rank, size_t index) const;
  double avgInput(int rank, size_t index) const;
  double prodInput(int rank, size_t index) const;

  cclDataType_t type_;
  bool reducing_;
  cclRedOp_t op_;
  int nranks_;
  uint64_t seed_;
  int64_t limit_;   // exact integer range of the type
  int64_t range_;   // inputs are in [0, range_] (before scaling)
  bool ownerOnly_;  // one rank per element contributes; the others hold the identity
  int prodTwos_;    // prod: at most this many ranks contribute a factor 2
};

}  // namespace cclperf
