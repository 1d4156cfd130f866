// Exact top-k selection by |x| without sorting: a strided sample estimates a threshold that
// a little more than k elements pass, one pass collects those candidates in index order,
// and a radix select over the candidates finds the exact k-th key.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "codecs/math/rng.h"

namespace ccl::codec {

// Ordering key of |x|: larger key, larger magnitude; NaN ranks above infinity.
inline uint32_t magnitudeKey(uint32_t bits) { return bits & 0x7fffffffu; }

// Writes to `out` (ascending) the indices of the k elements of v[0, n) with the largest
// |v|, ties broken toward the lower index. k <= n < 2^32.
void selectTopK(const float* v, size_t n, size_t k, std::vector<uint32_t>& out);

// Writes to `out` (ascending) the indices with |v| >= t, plus every NaN. t >= 0.
void selectAtLeast(const float* v, size_t n, float t, std::vector<uint32_t>& out);

// Position of stratum j of randk (key = rngKey(seed); n < 2^32): one uniformly drawn index in [j*n/k, (j+1)*n/k).
uint32_t randomKIndex(math::RngKey key, uint64_t n, uint64_t k, uint64_t j);

}  // namespace ccl::codec
