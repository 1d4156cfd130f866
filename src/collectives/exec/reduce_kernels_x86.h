// SPDX-License-Identifier: BSD-3-Clause
// fp16 and bf16 element loops with AVX2 (and F16C's conversions for fp16: vcvtph2ps,
// vcvtps2ph), eight elements at a time. The portable conversions of common/floatconv.h are
// exact but cost about ten times the arithmetic for fp16, which made an fp16 sum on host
// memory ten times slower than a bf16 one; bf16's are shifts, vectorised here too.
// Each loop does what the portable loop of reduce_kernels.cc does, to the bit: the arithmetic
// is the same fp32 arithmetic, both conversions are exact or round to nearest even, and a
// NaN gets the codes the portable conversions give (F16C keeps its payload, they do not).
// Run where codecs/x86.h says the CPU has AVX2 and F16C (`lanesDone` in reduce_kernels.cc);
// each returns how many leading elements it did (a multiple of 8), the portable loop does the
// rest. Elsewhere (no x86) they do none. tests/unit/collectives/exec/reduce_kernels_test.cc
// compares them with the portable loops over every code.
#pragma once

#include <cstddef>
#include <cstdint>

#include "codecs/x86.h"

namespace ccl::coll::x86 {

#if CCL_CODECS_X86

// fp16: eight codes as fp32, a NaN as the portable decode gives it (its sign, quiet, no
// payload); eight fp32 values as codes, rounded to nearest even, a NaN as the canonical code
// the portable encode gives (0x7fff, whatever its sign and payload).
struct HalfLanes {
  CCL_X86_TARGET static __m256 load(const uint16_t* p) {
    const __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    if (_mm256_movemask_ps(nan) == 0) return v;
    const __m256 quiet =
        _mm256_or_ps(_mm256_and_ps(v, _mm256_set1_ps(-0.0f)), _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)));
    return _mm256_blendv_ps(v, quiet, nan);
  }
  CCL_X86_TARGET static void store(uint16_t* p, __m256 v) {
    __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    if (_mm256_movemask_ps(nan) != 0) {
      const __m256i wide = _mm256_castps_si256(nan);
      const __m128i mask = _mm_packs_epi32(_mm256_castsi256_si128(wide), _mm256_extracti128_si256(wide, 1));
      h = _mm_blendv_epi8(h, _mm_set1_epi16(0x7fff), mask);
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), h);
  }
};

// bf16: the upper half of an fp32 (exact, NaN payloads kept, as the portable shift keeps
// them); stored rounded to nearest even, a NaN as its upper half made quiet (floatToBf16).
struct Bf16Lanes {
  CCL_X86_TARGET static __m256 load(const uint16_t* p) {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
  }
  CCL_X86_TARGET static void store(uint16_t* p, __m256 v) {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i rounded =
        _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    // |u| > inf's bits: a NaN (both sides positive as int32, so the signed compare holds).
    const __m256i nan =
        _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
    const __m256i codes = _mm256_blendv_epi8(rounded, quiet, nan);  // each at most 0xffff
    // 32 to 16 bits: the pack works per 128-bit lane, the permute puts the halves in order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(codes, codes), 0xd8);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
  }
};

// d = a + b (d may be a or b).
template <class L>
CCL_X86_TARGET size_t sum(uint16_t* d, const uint16_t* a, const uint16_t* b, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) L::store(d + i, _mm256_add_ps(L::load(a + i), L::load(b + i)));
  return i;
}

// d = a + b in fp32 (kReduce's wide sum; d may be a).
template <class L>
CCL_X86_TARGET size_t sumWide(float* d, const float* a, const uint16_t* b, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm256_add_ps(_mm256_loadu_ps(a + i), L::load(b + i)));
  return i;
}

// d = s / divisor (d may be s).
template <class L>
CCL_X86_TARGET size_t divide(uint16_t* d, const uint16_t* s, size_t n, float divisor) {
  const __m256 div = _mm256_set1_ps(divisor);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) L::store(d + i, _mm256_div_ps(L::load(s + i), div));
  return i;
}

template <class L>
CCL_X86_TARGET size_t widen(float* d, const uint16_t* s, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, L::load(s + i));
  return i;
}

// d = s, or s / divisor when `divide`.
template <class L>
CCL_X86_TARGET size_t narrow(uint16_t* d, const float* s, size_t n, float divisor, bool divide) {
  const __m256 div = _mm256_set1_ps(divisor);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(s + i);
    L::store(d + i, divide ? _mm256_div_ps(v, div) : v);
  }
  return i;
}

#else

// No x86 loops here: every element is the portable loop's.
struct HalfLanes {};
struct Bf16Lanes {};
template <class L>
size_t sum(uint16_t*, const uint16_t*, const uint16_t*, size_t) {
  return 0;
}
template <class L>
size_t sumWide(float*, const float*, const uint16_t*, size_t) {
  return 0;
}
template <class L>
size_t divide(uint16_t*, const uint16_t*, size_t, float) {
  return 0;
}
template <class L>
size_t widen(float*, const uint16_t*, size_t) {
  return 0;
}
template <class L>
size_t narrow(uint16_t*, const float*, size_t, float, bool) {
  return 0;
}

#endif

}  // namespace ccl::coll::x86
