// SPDX-License-Identifier: BSD-3-Clause
// Radix selection of the k-th largest 32-bit key, shared by the CPU top-k and the CUDA
// kernels: three rounds of 11, 11 and 10 bits from the top. Each round counts the keys that
// match the digits chosen so far, by their next digit, and picks the digit whose bin holds
// the k-th largest; after the last round the chosen digits are the k-th largest key itself,
// and k is how many keys equal to it belong to the top k.
#pragma once

#include <cstdint>

#include "common/floatconv.h"

namespace ccl::codec::math {

constexpr int kRadixRounds = 3;
constexpr uint32_t kRadixMaxBins = 2048;

CCL_HD constexpr int radixShift(int round) { return round == 0 ? 21 : round == 1 ? 10 : 0; }
CCL_HD constexpr uint32_t radixBins(int round) { return round == 2 ? 1024u : 2048u; }
CCL_HD constexpr uint32_t radixDigit(uint32_t key, int round) {
  return (key >> radixShift(round)) & (radixBins(round) - 1);
}

// Walks the bins hi, hi-1, ..., lo of a round's histogram: returns the bin holding the k-th
// largest of the keys they count (1 <= k <= their total) and leaves in k its rank among
// that bin's keys. Stops at lo whatever its count, so a bad total cannot walk out of range.
template <class Count>
CCL_HD uint32_t radixPickBin(const Count* hist, uint32_t lo, uint32_t hi, uint64_t& k) {
  uint32_t b = hi;
  while (b > lo && hist[b] < k) {
    k -= hist[b];
    --b;
  }
  return b;
}

}  // namespace ccl::codec::math
