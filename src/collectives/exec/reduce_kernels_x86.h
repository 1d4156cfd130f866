// SPDX-License-Identifier: BSD-3-Clause
// fp16 element loops with F16C's conversions (vcvtph2ps, vcvtps2ph), eight elements at a
// time: the portable conversions of common/floatconv.h are exact but cost about ten times
// the arithmetic, which made an fp16 sum on host memory four times slower than a bf16 one.
// Each loop does what the portable loop of reduce_kernels.cc does, to the bit: the
// arithmetic is the same fp32 arithmetic, both conversions are exact or round to nearest
// even, and a NaN gets the codes the portable conversions give (F16C keeps its payload,
// they do not). Run where codecs/x86.h says the CPU has F16C and AVX2; each returns how many
// leading elements it did (a multiple of 8), the portable loop does the rest.
// tests/unit/collectives/exec/reduce_kernels_test.cc compares them over every fp16 code.
#pragma once

#include <cstddef>
#include <cstdint>

#include "codecs/x86.h"

namespace ccl::coll::x86 {

#if CCL_CODECS_X86

// Eight fp16 codes as fp32: a NaN as the portable decode gives it (its sign, quiet, no payload).
CCL_X86_TARGET inline __m256 loadHalves(const uint16_t* p) {
  const __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  if (_mm256_movemask_ps(nan) == 0) return v;
  const __m256 quiet =
      _mm256_or_ps(_mm256_and_ps(v, _mm256_set1_ps(-0.0f)), _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)));
  return _mm256_blendv_ps(v, quiet, nan);
}

// Eight fp32 values as fp16 codes, rounded to nearest even: a NaN as the canonical code the
// portable encode gives (0x7fff, whatever its sign and payload).
CCL_X86_TARGET inline void storeHalves(uint16_t* p, __m256 v) {
  __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  if (_mm256_movemask_ps(nan) != 0) {
    const __m256i wide = _mm256_castps_si256(nan);
    const __m128i mask = _mm_packs_epi32(_mm256_castsi256_si128(wide), _mm256_extracti128_si256(wide, 1));
    h = _mm_blendv_epi8(h, _mm_set1_epi16(0x7fff), mask);
  }
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), h);
}

// d = a + b (d may be a or b).
CCL_X86_TARGET inline size_t sumHalves(uint16_t* d, const uint16_t* a, const uint16_t* b, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) storeHalves(d + i, _mm256_add_ps(loadHalves(a + i), loadHalves(b + i)));
  return i;
}

// d = a + b in fp32 (kReduce's wide sum; d may be a).
CCL_X86_TARGET inline size_t sumHalvesWide(float* d, const float* a, const uint16_t* b, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm256_add_ps(_mm256_loadu_ps(a + i), loadHalves(b + i)));
  return i;
}

// d = s / divisor (d may be s).
CCL_X86_TARGET inline size_t divideHalves(uint16_t* d, const uint16_t* s, size_t n, float divisor) {
  const __m256 div = _mm256_set1_ps(divisor);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) storeHalves(d + i, _mm256_div_ps(loadHalves(s + i), div));
  return i;
}

CCL_X86_TARGET inline size_t widenHalves(float* d, const uint16_t* s, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, loadHalves(s + i));
  return i;
}

// d = s, or s / divisor when `divide`.
CCL_X86_TARGET inline size_t narrowHalves(uint16_t* d, const float* s, size_t n, float divisor, bool divide) {
  const __m256 div = _mm256_set1_ps(divisor);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(s + i);
    storeHalves(d + i, divide ? _mm256_div_ps(v, div) : v);
  }
  return i;
}

#endif

}  // namespace ccl::coll::x86
