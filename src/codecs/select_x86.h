// SPDX-License-Identifier: BSD-3-Clause
// The compaction loops of top-k and threshold selection on x86 CPUs with AVX2 (the candidate
// pass over the input, and the narrowing of the candidates' keys in each radix round): eight
// keys are compared at once, and what passes is packed to the front of a vector by a
// permutation looked up from the comparison's bit mask, then stored together. No branch
// depends on the data, so a density of a few percent, where almost every group of 32 holds
// one hit at an unpredictable place, costs the same as none. Bit-equal to the portable loops
// in topk_select.cc (tests/unit/codecs checks both). Included by topk_select.cc only.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "codecs/x86.h"

namespace ccl::codec::detail::x86 {

#if CCL_CODECS_X86

// For each 8-bit mask, the lanes of its set bits, lowest first, one per byte.
inline constexpr std::array<uint64_t, 256> kPackLanes = [] {
  std::array<uint64_t, 256> t{};
  for (unsigned m = 0; m < 256; ++m) {
    int out = 0;
    for (unsigned lane = 0; lane < 8; ++lane) {
      if (m & (1u << lane)) t[m] |= static_cast<uint64_t>(lane) << (8 * out++);
    }
  }
  return t;
}();

// Stores at out + w the lanes of values whose lane of pass is all ones, in order (eight
// slots are written), and advances w by their count.
CCL_X86_TARGET __attribute__((always_inline)) inline void packStore(uint32_t* out, size_t& w, __m256i values,
                                                                    __m256i pass) {
  const unsigned mask = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(pass)));
  const __m256i lanes = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(&kPackLanes[mask])));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + w), _mm256_permutevar8x32_epi32(values, lanes));
  w += static_cast<size_t>(__builtin_popcount(mask));
}

// Writes to cand, ascending, the indices i below `done` with (bits of v[i]) & 0x7fffffff >= t
// and returns how many; done is n rounded down to a multiple of 8. Each group stores eight
// slots at cand + count, which stays inside cand[0, n): count never exceeds the group's start.
// t < 2^31 and n < 2^32.
CCL_X86_TARGET inline size_t collectAtLeast(const float* v, size_t n, uint32_t t, uint32_t* cand, size_t& done) {
  const __m256i magnitude = _mm256_set1_epi32(0x7fffffff);
  // Keys and t are below 2^31, so a signed comparison orders them; t = 0 compares with -1.
  const __m256i below = _mm256_set1_epi32(static_cast<int32_t>(t) - 1);
  const __m256i eight = _mm256_set1_epi32(8), sixteen = _mm256_set1_epi32(16);
  __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  auto group = [&](size_t at, __m256i idx, size_t& c) CCL_X86_TARGET {
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + at));
    packStore(cand, c, idx, _mm256_cmpgt_epi32(_mm256_and_si256(bits, magnitude), below));
  };
  size_t c = 0, i = 0;
  for (; i + 16 <= n; i += 16) {
    group(i, index, c);
    group(i + 8, _mm256_add_epi32(index, eight), c);
    index = _mm256_add_epi32(index, sixteen);
  }
  for (; i + 8 <= n; i += 8) {
    group(i, index, c);
    index = _mm256_add_epi32(index, eight);
  }
  done = i;
  return c;
}

// Writes to out, in order, values[i] for each i < done with keys[i] in [lo, hi], and returns
// how many; done is m rounded down to a multiple of 8. Each group stores eight slots at
// out + count, inside out[0, m); out may be keys or values, since a group is loaded before
// anything is stored and stores land below the next group. Keys and hi are below 2^31.
CCL_X86_TARGET inline size_t keepInRange(const uint32_t* keys, const uint32_t* values, size_t m, uint32_t lo,
                                         uint32_t hi, uint32_t* out, size_t& done) {
  const __m256i below = _mm256_set1_epi32(static_cast<int32_t>(lo) - 1);
  const __m256i top = _mm256_set1_epi32(static_cast<int32_t>(hi));
  size_t w = 0, i = 0;
  for (; i + 8 <= m; i += 8) {
    const __m256i key = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(keys + i));
    const __m256i value = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(values + i));
    packStore(out, w, value, _mm256_andnot_si256(_mm256_cmpgt_epi32(key, top), _mm256_cmpgt_epi32(key, below)));
  }
  done = i;
  return w;
}

#else

inline size_t collectAtLeast(const float*, size_t, uint32_t, uint32_t*, size_t& done) {
  done = 0;
  return 0;
}
inline size_t keepInRange(const uint32_t*, const uint32_t*, size_t, uint32_t, uint32_t, uint32_t*, size_t& done) {
  done = 0;
  return 0;
}

#endif

}  // namespace ccl::codec::detail::x86
