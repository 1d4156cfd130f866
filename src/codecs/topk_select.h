// SPDX-License-Identifier: BSD-3-Clause
// Exact top-k selection by |x| without sorting: a strided sample estimates a threshold that
// a little more than k elements pass, one pass collects those candidates in index order,
// and a radix select over the candidates finds the exact k-th key.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "codecs/math/rng.h"

namespace ccl::codec {

// Per-thread working memory of the sparsifiers (selection candidates, staged input, index
// lists) is kept between calls up to this size and handed back after a larger call: a
// thread that once encoded a large tensor (4 bytes per element per list) would otherwise
// hold that memory for its life, after every communicator that used it is gone
// (tests/faults measured 7-47 MB kept after one call of 2-12 M elements). A new block costs
// little: the candidate lists touch only their pages, about the kept fraction of the input.
inline constexpr size_t kKeepScratchBytes = size_t{1} << 20;

// Ordering key of |x|: larger key, larger magnitude; NaN ranks above infinity.
inline uint32_t magnitudeKey(uint32_t bits) { return bits & 0x7fffffffu; }

// Writes to `out` (ascending) the indices of the k elements of v[0, n) with the largest
// |v|, ties broken toward the lower index. k <= n < 2^32.
void selectTopK(const float* v, size_t n, size_t k, std::vector<uint32_t>& out);

// Writes to `out` (ascending) the indices with |v| >= t, plus every NaN. t >= 0.
void selectAtLeast(const float* v, size_t n, float t, std::vector<uint32_t>& out);

// Position of stratum j of randk (key = rngKey(seed); n < 2^32): one uniformly drawn index in [j*n/k, (j+1)*n/k).
uint32_t randomKIndex(math::RngKey key, uint64_t n, uint64_t k, uint64_t j);

namespace detail {

// The candidate pass of both selections: writes to cand (room for n), ascending, the indices
// i < n with magnitudeKey(bits of v[i]) >= t, and returns how many. t < 2^31. With AVX2 it
// runs select_x86.h's loop, which the tests compare with the portable one.
size_t collectAtLeast(const float* v, size_t n, uint32_t t, uint32_t* cand);

// selectTopK after its estimate: the candidates are the elements whose key reaches `guess`,
// or every element when fewer than k do. Exact whatever the guess; 0 < k < n.
void selectTopKAbove(const float* v, size_t n, size_t k, uint32_t guess, std::vector<uint32_t>& out);

// The narrowing step of a radix round, and the last step of top-k: writes to out (room for
// m), in order, values[i] for each i < m with keys[i] in [lo, hi], and returns how many. out
// may be keys or values. Keys and hi are below 2^31. x86 loop as above.
size_t keepInRange(const uint32_t* keys, const uint32_t* values, size_t m, uint32_t lo, uint32_t hi, uint32_t* out);

}  // namespace detail

}  // namespace ccl::codec
